"""Entry point of the astgrep family (filled in by its issue)."""
