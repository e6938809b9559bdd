"""Entry point of the astgrep family: hooks and tool registration (nothing heavy is imported here)."""

from __future__ import annotations

from typing import Any

from tether.hookspecs import hookimpl

from tether_astgrep import hookspecs


@hookimpl
def tether_addoptions(register: Any) -> None:
    from tether_astgrep.options import AstgrepOptions

    register(AstgrepOptions)


@hookimpl
def tether_addhooks(pluginmanager: Any) -> None:
    from tether_astgrep import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def tether_astgrep_parsers(run: Any) -> Any:
    # the run option turns the family off from options alone; a harness plugin can instead answer
    # this hook first with tether.NO_RESOURCE (an answer of None would fall through to this one)
    from tether_astgrep.options import AstgrepOptions

    if not run.options.of(AstgrepOptions).astgrep_enabled:
        return None
    from tether_astgrep.parsers import ParserPool

    return ParserPool(run)  # cheap: grammars load and workers start on first use


@hookimpl(trylast=True)
def tether_astgrep_grammars(run: Any) -> Any:
    from tether_astgrep.grammars import builtin_grammars

    return builtin_grammars()


@hookimpl
def tether_register_tools(run: Any, register: Any) -> None:
    handle = run.resource(hookspecs.tether_astgrep_parsers)
    if handle is None:
        register.unavailable("structural search is turned off for this run (run option astgrep_enabled)")
        return
    from tether_astgrep.tools import tools_for

    for tool in tools_for(handle):
        register(tool)
