"""Hooks of the vibe family: its roster hook, the built-in command roster, and tool registration.

Imports stay light here (no subprocess machinery): `tether tools` loads every family's entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether import hookimpl

from tether_vibe import hookspecs

if TYPE_CHECKING:
    from tether.plugins import Registrar
    from tether.run import Run

MODE = "vibe"


@hookimpl
def tether_addoptions(register: Any) -> None:
    from tether_vibe.options import VibeOptions

    register(VibeOptions)


@hookimpl
def tether_addhooks(pluginmanager: Any) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def tether_vibe_roster(run: Run) -> Any:
    """The built-in command roster when a worker command is configured; no process starts before a spawn."""
    from tether_vibe.config import load_config
    from tether_vibe.options import VibeOptions

    config = load_config(run.options.of(VibeOptions))
    if not config.commands:
        return None
    from tether_vibe.command_roster import CommandRoster

    return CommandRoster(run, config)


@hookimpl
def tether_register_tools(run: Run, register: Registrar) -> None:
    if MODE not in run.modes:
        register.unavailable("vibe mode is off for this run (the harness turns it on with the mode 'vibe')")
        return
    try:
        roster = run.resource(hookspecs.tether_vibe_roster)
    except Exception as exc:  # noqa: BLE001 - a bad configuration disables the family, not the run
        register.unavailable(f"the worker roster could not be set up: {exc}")
        return
    if roster is None:
        register.unavailable(
            "no worker roster: set fast and/or good (a worker command line) under [tool.tether.vibe] in the "
            "root's pyproject.toml, or as the run options vibe_fast / vibe_good",
        )
        return
    from tether_vibe.tools import make_tools

    for tool in make_tools(roster):
        register(tool)
