"""Entry point of the askuser family (filled in by its issue)."""
