"""Entry point of the debug family: its hooks and the registration of the `debug` tool.

Imports nothing heavy: the DAP client, sessions and adapters load on the first call.
"""

from __future__ import annotations

from tether import hookimpl

from tether_debug import hookspecs


@hookimpl(trylast=True)
def tether_debug_adapters(run):
    """The built-in adapter definitions; a third party's with the same id replaces one (`Run.definitions`)."""
    from tether_debug.adapters import BUILTIN

    return list(BUILTIN)


@hookimpl
def tether_addoptions(register) -> None:
    from tether_debug.options import DebugOptions

    register(DebugOptions)


@hookimpl
def tether_addhooks(pluginmanager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def tether_debug_supervisor(run):
    from tether_debug.supervisor import DebugSupervisor

    return DebugSupervisor()


@hookimpl
def tether_register_tools(run, register) -> None:
    if run.conversation_id is None:
        register.unavailable("the run has no conversation id (a debug session belongs to one conversation)")
        return
    if not run.root.is_dir():
        register.unavailable("the run has no working directory")
        return
    if run.resource(hookspecs.tether_debug_supervisor) is None:
        register.unavailable("no debug-session supervisor for this run")
        return
    from tether_debug.tools import tools

    for tool in tools():
        register(tool)
