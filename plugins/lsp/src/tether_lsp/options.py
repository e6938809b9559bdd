"""Run options of the lsp family."""

from __future__ import annotations

import attrs
from tether import arg


@attrs.frozen
class LspOptions:
    lsp_servers: list[str] | None = arg(
        "ids of the language servers this run may start (default: every server defined as a default one)",
        default=None,
    )
    lsp_request_timeout: float = arg(
        "seconds one request to a language server may take", default=30.0, minimum=0
    )
    lsp_start_timeout: float = arg(
        "seconds a server may take to start and answer initialize", default=60.0, minimum=0
    )
    lsp_shutdown_grace: float = arg(
        "seconds for shutdown and exit before a server's tree is killed", default=2.0, minimum=0
    )
    lsp_ready_wait: float = arg(
        "seconds a query waits for a starting server's first round of analysis before it answers",
        default=30.0,
        minimum=0,
    )
    lsp_checker_timeout: float = arg(
        'seconds the project checker of `diagnostics "*"` may take', default=300.0, minimum=0
    )
    lsp_open_files_above: int = arg(
        "a server that can check only open files (basedpyright) does so when its root holds more files of "
        "its languages than this; a write then checks the files importing the written one itself (0: "
        "always; 20000, the watcher's cap: never, the whole program is checked)",
        default=1000,
        minimum=0,
    )
    lsp_importers_checked: int | None = arg(
        "files importing a written file that a write checks in a server checking only open files (see "
        "lsp_open_files_above; typescript-language-server always), nearest first: each costs a check before "
        "and after the write (null: the server's own number, basedpyright 5, typescript-language-server 60)",
        default=None,
        minimum=0,
    )
    lsp_previews: bool = arg(
        "staged changes (ast_edit, lsp_rename with preview) and dry runs of the file tools are checked by the "
        "language servers as unsaved contents, within diagnostics_timeout (false: they are not checked, and say so)",
        default=True,
    )
