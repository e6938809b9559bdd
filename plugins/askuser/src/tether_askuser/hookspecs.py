"""The askuser family's resource hook: the run's question port."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.hookspecs import hookspec

if TYPE_CHECKING:
    from tether.run import Run

    from tether_askuser.port import QuestionPort


@hookspec(firstresult=True)
def tether_askuser_port(run: Run) -> QuestionPort | None:
    """The run's question port (see `tether_askuser.port.QuestionPort`), or None when no human is reachable.

    The family's own implementation picks, in order: the harness's port from the run option
    ``askuser_port``, MCP elicitation from the host's `tether.hookspecs.tether_elicitation` (which
    `tether serve` answers only when the client declared the capability), the controlling terminal
    when stdin is a TTY. A harness overrides it with ``@hookimpl(tryfirst=True)``. Creating the port
    must not block.

    Stops at the first non-None result.
    """
