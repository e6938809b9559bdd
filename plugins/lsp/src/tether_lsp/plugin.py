"""Entry point of the lsp family: hooks and tool registration.

Imports nothing heavy: the tools are listed without the language-server machinery (see
`tether_lsp.tools`); pygls and lsprotocol load when the first server starts.
"""

from __future__ import annotations

from typing import Any

from tether.hookspecs import hookimpl

from tether_lsp import hookspecs


@hookimpl
def tether_addoptions(register: Any) -> None:
    from tether_lsp.options import LspOptions

    register(LspOptions)


@hookimpl
def tether_addhooks(pluginmanager: Any) -> None:
    from tether_lsp import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def tether_lsp_supervisor(run: Any) -> Any:
    from tether_lsp.supervisor import Supervisor

    if not run.root.is_dir():
        return None
    return Supervisor(run)


@hookimpl(trylast=True)
def tether_lsp_servers(run: Any) -> list[Any]:
    from tether_lsp.servers import BUILTIN_SERVERS

    return list(BUILTIN_SERVERS)


@hookimpl
def tether_register_tools(run: Any, register: Any) -> None:
    from tether_lsp.tools import make_tools

    sup = run.resource(hookspecs.tether_lsp_supervisor)
    if sup is None:
        register.unavailable("no language-server supervisor for this run (the harness disabled it)")
        return
    for tool in make_tools(sup):
        register(tool)


def _supervisor(run: Any) -> Any:
    try:
        return run.resource(hookspecs.tether_lsp_supervisor)
    except LookupError:
        return None


@hookimpl
async def tether_diagnostics_before_write(run: Any, paths: Any, call_id: str) -> Any:
    sup = _supervisor(run)
    if sup is None:
        return None
    from tether_lsp.write_diagnostics import before_write

    async with sup.gate.shared():  # not while a preview holds the servers
        return await before_write(run, sup, list(paths), call_id)


@hookimpl
async def tether_diagnostics_after_write(run: Any, paths: Any, call_id: str) -> Any:
    sup = _supervisor(run)
    if sup is None:
        return None
    from tether_lsp.write_diagnostics import after_write

    async with sup.gate.shared():
        return await after_write(run, sup, list(paths), call_id)


@hookimpl
async def tether_diagnostics_preview(run: Any, contents: Any, call_id: str) -> Any:
    sup = _supervisor(run)
    if sup is None:
        return None
    from tether_lsp.preview import preview

    return await preview(run, sup, dict(contents), call_id)
