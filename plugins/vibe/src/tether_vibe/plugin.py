"""Entry point of the vibe family (filled in by its issue)."""
