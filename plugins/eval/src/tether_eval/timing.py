"""How long a cell and its end may take: the cell's two budgets as one deadline, and the bounds of its end.

A cell's inactivity and total budgets (the run options ``eval_timeout`` and ``eval_total_timeout``)
are the deadline of one ``asyncio.timeout``: output that changes what the model will see restarts
the inactivity budget, the total one never; both stand still while a `tool()` call from the cell
is open. The waits after the cell's code is done (its idle, Deno's barrier) have bounds of their own.
"""

from __future__ import annotations

import asyncio

# After the execute_reply, how long iopub may stay quiet before a probe asks whether the cell's idle
# was lost (ZeroMQ's PUB socket drops messages once its queue for a slow reader is full).
SETTLE = 2.0
# How long the barrier after a Deno cell waits for its answer: a round trip of milliseconds on an idle
# machine, seconds on a loaded one (1 s lost a late result in CI); the cell says so when it runs out.
BARRIER_WAIT = 15.0


class Budget:
    """A cell's inactivity and total budgets (seconds, 0: none) as the deadline of one asyncio timeout.

    After the execute_reply both end: the cell's code is done and only its idle is awaited, for
    SETTLE seconds of quiet, then (see ``Cell._collect``) for as long as the inactivity budget.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, idle: float, total: float) -> None:
        self.loop, self.idle = loop, idle
        self.total_end = loop.time() + total if total else None
        self.quiet: float | None = None  # after the reply: how long iopub may be quiet
        self.deadline: asyncio.Timeout | None = None

    def until(self) -> float | None:
        now = self.loop.time()
        if self.quiet is not None:
            return now + self.quiet
        ends = [t for t in (now + self.idle if self.idle else None, self.total_end) if t is not None]
        return min(ends) if ends else None

    def restart(self) -> None:
        """Output: the inactivity budget starts again (the total one goes on)."""
        if self.deadline is not None:
            self.deadline.reschedule(self.until())

    def replied(self, quiet: float) -> None:
        self.quiet = quiet
        self.restart()

    def pause(self) -> float:
        if self.deadline is not None:
            self.deadline.reschedule(None)
        return self.loop.time()

    def resume(self, since: float) -> None:
        """After a tool() call: the total budget did not count its time, the inactivity one restarts."""
        if self.total_end is not None:
            self.total_end += self.loop.time() - since
        self.restart()

    def total_spent(self) -> bool:
        return self.total_end is not None and self.loop.time() >= self.total_end
