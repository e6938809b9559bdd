"""The debug family's hooks: its resource (the session supervisor) and adapter definitions for third parties."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tether.hookspecs import hookspec

if TYPE_CHECKING:
    from tether.run import Run

    from tether_debug.adapters import AdapterDef
    from tether_debug.supervisor import DebugSupervisor


@hookspec(firstresult=True)
def tether_debug_supervisor(run: Run) -> DebugSupervisor | None:
    """The run's debug-session supervisor (`tether_debug.supervisor.DebugSupervisor`), or None for no debug tool.

    The family's default returns a fresh supervisor (nothing started until `launch`). A harness that
    wants its own (or none) implements this with ``tryfirst=True``.

    Stops at the first non-None result.
    """


@hookspec
def tether_debug_adapters(run: Run) -> Sequence[AdapterDef] | None:
    """More debug adapter definitions (`tether_debug.adapters.AdapterDef`); one with a built-in id replaces it."""
