"""Listing the lsp family's tools (what `tether tools` does) loads none of the language-server machinery."""

from __future__ import annotations

from tether.testing import assert_light_entry_point

# the connection to a server, the client over its pipes, the file watcher, the diagnostics waits, the
# answers of the tools, and the libraries under them: loaded at the first query, never to list the tools
MACHINERY = (
    "pygls",
    "lsprotocol",
    "tether_lsp.connection",
    "tether_lsp.messages",
    "tether_lsp.client",
    "tether_lsp.watching",
    "tether_lsp.write_diagnostics",
    "tether_lsp.dependents",
    "tether_lsp.rounds",
    "tether_lsp.queries",
    "tether_lsp.navigation",
    "tether_lsp.code_actions",
    "tether_lsp.symbols",
    "tether_lsp.diagnostics",
    "tether_lsp.status",
    "tether_lsp.render",
    "tether_lsp.edits",
    "tether_lsp.checker",
    "tether_lsp.servers",
)


def test_listing_the_lsp_tools_imports_no_language_server_machinery(tmp_path):
    assert_light_entry_point(
        "tether_lsp.plugin",
        forbidden=MACHINERY,
        then=(
            "import tether, tether_lsp.plugin as p\n"
            f"with tether.open_run_sync({str(tmp_path)!r}, plugins=[p], load_entry_points=False) as run:\n"
            "    tools = run.tools()\n"
            "    # resolve is the core's, registered because lsp_rename stages (preview: true)\n"
            "    assert [t.name for t in tools] == ['lsp', 'lsp_fix', 'lsp_move', 'lsp_rename', 'resolve'], tools\n"
            "    assert all(t.description and t.input_schema['properties'] for t in tools)"
        ),
    )
