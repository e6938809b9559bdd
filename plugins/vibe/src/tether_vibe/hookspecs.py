"""The vibe family's resource hook: the roster of background workers for a run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.hookspecs import hookspec

if TYPE_CHECKING:
    from tether.run import Run

    from tether_vibe.roster import Roster


@hookspec(firstresult=True)
def tether_vibe_roster(run: Run) -> Roster | None:
    """The run's roster of workers (see `tether_vibe.roster.Roster`), or None for no workers.

    The family's own implementation returns the built-in command roster when the project or the run
    options configure a worker command, else None; it starts no process until a worker is spawned. A
    harness whose workers are its own agent sessions returns its roster with ``@hookimpl(tryfirst=True)``.
    The run calls the roster's ``aclose()`` (or ``close()``) when it closes.

    Stops at the first non-None result.
    """
