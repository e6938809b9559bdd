"""tether family askuser."""
