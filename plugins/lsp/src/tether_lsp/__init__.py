"""tether family lsp: queries, rename and diagnostics on write, answered by real language servers."""
