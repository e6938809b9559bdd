"""Entry point of the lsp family: hooks and tool registration.

Imports nothing heavy: the tools are listed without the language-server machinery (see
`tether_lsp.tools`); pygls and lsprotocol load when the first server starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from tether.hookspecs import hookimpl

from tether_lsp import hookspecs

if TYPE_CHECKING:
    import pluggy
    from tether.diagnostics import Diagnostic, PreviewDiagnostics, WriteDiagnostics
    from tether.options import OptionRegistry
    from tether.plugins import Registrar
    from tether.run import Run

    from tether_lsp.servers import ServerDef
    from tether_lsp.supervisor import Supervisor


@hookimpl
def tether_addoptions(register: OptionRegistry) -> None:
    from tether_lsp.options import LspOptions

    register(LspOptions)


@hookimpl
def tether_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    from tether_lsp import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def tether_lsp_supervisor(run: Run) -> Supervisor | None:
    from tether_lsp.supervisor import Supervisor

    if not run.root.is_dir():
        return None
    return Supervisor(run)


@hookimpl(trylast=True)
def tether_lsp_servers(run: Run) -> list[ServerDef]:
    from tether_lsp.servers import BUILTIN_SERVERS

    return list(BUILTIN_SERVERS)


@hookimpl
def tether_register_tools(run: Run, register: Registrar) -> None:
    from tether_lsp.tools import make_tools

    sup = run.resource(hookspecs.tether_lsp_supervisor)
    if sup is None:
        register.unavailable("no language-server supervisor for this run (the harness disabled it)")
        return
    for tool in make_tools(sup):
        register(tool)


def _supervisor(run: Run) -> Supervisor | None:
    try:
        return run.resource(hookspecs.tether_lsp_supervisor)
    except LookupError:
        return None


@hookimpl
async def tether_diagnostics_before_write(
    run: Run, paths: Sequence[str], call_id: str
) -> dict[str, list[Diagnostic]] | None:
    sup = _supervisor(run)
    if sup is None:
        return None
    from tether_lsp.preview import claim
    from tether_lsp.write_diagnostics import before_write

    # the write of a kept preview's files takes over its baseline and its hold of the servers
    if sup.kept is not None and (before := await claim(sup, list(paths), call_id)) is not None:
        return before
    async with sup.gate.shared():  # not while a preview holds the servers
        return await before_write(run, sup, list(paths), call_id)


@hookimpl
async def tether_diagnostics_after_write(
    run: Run, paths: Sequence[str], call_id: str
) -> WriteDiagnostics | None:
    sup = _supervisor(run)
    if sup is None:
        return None
    from tether_lsp.write_diagnostics import after_write

    if sup.kept is not None and sup.kept.claimed == call_id:
        from tether_lsp.preview import claimed_write

        return await claimed_write(run, sup, list(paths), call_id)
    async with sup.gate.shared():
        return await after_write(run, sup, list(paths), call_id)


@hookimpl
async def tether_diagnostics_preview(
    run: Run, contents: Mapping[str, str | None], call_id: str
) -> PreviewDiagnostics | None:
    sup = _supervisor(run)
    if sup is None:
        return None
    from tether_lsp.preview import preview

    return await preview(run, sup, dict(contents), call_id)
