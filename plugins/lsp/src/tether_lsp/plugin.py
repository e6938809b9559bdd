"""Entry point of the lsp family (filled in by its issue)."""
