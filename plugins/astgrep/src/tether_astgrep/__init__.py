"""tether family astgrep."""
