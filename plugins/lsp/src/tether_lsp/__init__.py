"""tether family lsp."""
