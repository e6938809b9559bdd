"""Entry point of the debug family (filled in by its issue)."""
