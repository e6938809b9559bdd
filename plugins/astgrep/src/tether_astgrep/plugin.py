"""Entry point of the astgrep family: hooks and tool registration (nothing heavy is imported here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.hookspecs import hookimpl

from tether_astgrep import hookspecs

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pluggy
    from tether.options import OptionRegistry
    from tether.plugins import Registrar
    from tether.run import Run

    from tether_astgrep.grammars import Grammar
    from tether_astgrep.parsers import ParserPool


@hookimpl
def tether_addoptions(register: OptionRegistry) -> None:
    from tether_astgrep.options import AstgrepOptions

    register(AstgrepOptions)


@hookimpl
def tether_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    from tether_astgrep import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def tether_astgrep_parsers(run: Run) -> ParserPool | None:
    # the run option turns the family off from options alone; a harness plugin can instead answer
    # this hook first with tether.NO_RESOURCE (an answer of None would fall through to this one)
    from tether_astgrep.options import AstgrepOptions

    if not run.options.of(AstgrepOptions).astgrep_enabled:
        return None
    from tether_astgrep.parsers import ParserPool

    return ParserPool(run)  # cheap: grammars load and workers start on first use


@hookimpl(trylast=True)
def tether_astgrep_grammars(run: Run) -> Sequence[Grammar]:
    from tether_astgrep.grammars import builtin_grammars

    return builtin_grammars()


@hookimpl
def tether_register_tools(run: Run, register: Registrar) -> None:
    handle = run.resource(hookspecs.tether_astgrep_parsers)
    if handle is None:
        register.unavailable("structural search is turned off for this run (run option astgrep_enabled)")
        return
    from tether_astgrep.tools import make_tools

    for tool in make_tools(handle):
        register(tool)
