"""Hooks the lsp family adds to tether (registered through `tether_addhooks`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.hookspecs import hookspec

if TYPE_CHECKING:
    from tether.run import Run

    from tether_lsp.servers import ServerDef
    from tether_lsp.supervisor import Supervisor


@hookspec(firstresult=True)
def tether_lsp_supervisor(run: Run) -> Supervisor | None:
    """The run's language-server supervisor, or None for no lsp tools.

    The family's own implementation returns a cheap handle (no process starts before the first
    query). A harness overrides it with ``@hookimpl(tryfirst=True)``.

    Stops at the first non-None result.
    """


@hookspec
def tether_lsp_servers(run: Run) -> list[ServerDef] | None:
    """Server definitions to add; a definition replaces an earlier one with the same id.

    The family's built-in definitions come first (its implementation is ``trylast``), so a third
    party's definition with id "basedpyright" replaces the built-in one.
    """
