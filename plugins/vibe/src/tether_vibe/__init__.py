"""tether family vibe."""
