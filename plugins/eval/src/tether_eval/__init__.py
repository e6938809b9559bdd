"""tether family eval."""
