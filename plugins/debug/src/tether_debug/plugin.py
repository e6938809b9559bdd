"""Entry point of the debug family: its hooks and the registration of the `debug` tool.

Imports nothing heavy: the DAP client, sessions and adapters load on the first call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether import hookimpl

from tether_debug import hookspecs

if TYPE_CHECKING:
    import pluggy
    from tether.options import OptionRegistry
    from tether.plugins import Registrar
    from tether.run import Run

    from tether_debug.adapters import AdapterDef
    from tether_debug.supervisor import DebugSupervisor


@hookimpl(trylast=True)
def tether_debug_adapters(run: Run) -> list[AdapterDef]:
    """The built-in adapter definitions; a third party's with the same id replaces one (`Run.definitions`)."""
    from tether_debug.adapters import BUILTIN

    return list(BUILTIN)


@hookimpl
def tether_addoptions(register: OptionRegistry) -> None:
    from tether_debug.options import DebugOptions

    register(DebugOptions)


@hookimpl
def tether_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def tether_debug_supervisor(run: Run) -> DebugSupervisor:
    from tether_debug.supervisor import DebugSupervisor

    return DebugSupervisor()


@hookimpl
def tether_register_tools(run: Run, register: Registrar) -> None:
    if run.conversation_id is None:
        register.unavailable("the run has no conversation id (a debug session belongs to one conversation)")
        return
    if not run.root.is_dir():
        register.unavailable("the run has no working directory")
        return
    supervisor = run.resource(hookspecs.tether_debug_supervisor)
    if supervisor is None:
        register.unavailable("no debug-session supervisor for this run")
        return
    from tether_debug.tools import make_tools

    for tool in make_tools(supervisor):
        register(tool)
