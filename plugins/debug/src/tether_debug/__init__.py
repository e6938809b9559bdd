"""tether family debug."""
