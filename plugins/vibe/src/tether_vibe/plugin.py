"""Hooks of the vibe family: its roster hook, the built-in command roster, and tool registration.

Imports stay light here (no subprocess machinery): `tether tools` loads every family's entry point.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from tether import hookimpl

from tether_vibe import hookspecs

if TYPE_CHECKING:
    import pluggy
    from tether.options import OptionRegistry
    from tether.plugins import Registrar
    from tether.run import Run

    from tether_vibe.command_roster import CommandRoster

MODE = "vibe"
log = logging.getLogger("tether.vibe")


@hookimpl
def tether_addoptions(register: OptionRegistry) -> None:
    from tether_vibe.options import VibeOptions

    register(VibeOptions)


@hookimpl
def tether_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def tether_vibe_roster(run: Run) -> CommandRoster | None:
    """The built-in command roster when a worker command is configured; no process starts before a spawn."""
    from tether_vibe.config import worker_commands
    from tether_vibe.options import VibeOptions

    options = run.options.of(VibeOptions)
    commands = worker_commands(options)
    if not commands:
        return None
    from tether_vibe.command_roster import CommandRoster

    return CommandRoster(run, options, commands)


def _vibe_folder(root: Path) -> Path | None:
    """``.git/tether-vibe`` of the repository the root is in, when it exists (stat calls only)."""
    for folder in (root, *root.parents):
        dot = folder / ".git"
        if dot.is_dir():
            found = dot / "tether-vibe"
            return found if found.is_dir() else None
        if dot.exists():  # a linked worktree: its common dir is found by git
            from tether_vibe import worktree

            common = worktree.common_dir_quick(folder)
            return (
                common / worktree.FOLDER
                if common is not None and (common / worktree.FOLDER).is_dir()
                else None
            )
    return None


@hookimpl
async def tether_run_opened(run: Run) -> None:
    """Sweep the worktrees that runs killed before their close (SIGKILL) left in this repository:
    each one's work is committed on its branch, the worktree removed (see `tether_vibe.worktree`)."""
    folder = _vibe_folder(run.root)
    if folder is None:
        return  # the common case: one stat per parent, nothing imported
    import asyncio

    from tether_vibe import worktree

    try:
        await asyncio.to_thread(worktree.sweep, folder.parent)
    except Exception:
        log.warning("vibe: could not sweep %s", folder, exc_info=True)


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
