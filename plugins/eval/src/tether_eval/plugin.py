"""Entry point of the eval family (filled in by its issue)."""
