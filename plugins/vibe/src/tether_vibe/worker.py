"""A worker of the command roster: its live record, from which every answer's `WorkerInfo` is taken.

The roster (`tether_vibe.command_roster`) runs it, `tether_vibe.isolation` gives it a worktree, and
`tether_vibe.merge` lands what it changed; each reads and sets the fields its story owns.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether.output import Tail

from tether_vibe.roster import Status, WorkerInfo

if TYPE_CHECKING:
    from tether_vibe import worktree


@attrs.define(eq=False)
class Worker:
    """One worker of the command roster, live: what `info` snapshots, and what its run drives."""

    id: str
    label: str
    tier: str
    argv: tuple[str, ...]
    brief: str
    log: Tail
    messages: list[str] = attrs.field(factory=list)
    status: Status = Status.RUNNING
    started_at: float = attrs.field(factory=time.time)
    finished_at: float | None = None
    result: str = ""
    exit_code: int | None = None
    runs: int = 0
    queued: int = 0  # messages the current run has not seen
    killing: bool = False
    proc: asyncio.subprocess.Process | None = None
    driver: asyncio.Task[None] | None = None  # runs it to the end (`CommandRoster._drive`)
    settled: asyncio.Event = attrs.field(factory=asyncio.Event)
    stalled: asyncio.Event = attrs.field(factory=asyncio.Event)  # set while it is marked stalled
    budget: float | None = None
    timed_out: bool = False
    out: Tail | None = None  # the current run's stdout
    isolation: str = "none"
    tree: worktree.Linked | None = None  # its worktree (None: not isolated, or merged/discarded)
    start: str | None = None  # the commit its worktree began from
    branch: str | None = None
    changes: tuple[dict[str, Any], ...] | None = None
    found: list[worktree.Change] | None = None  # what its last run left (for a merge)
    note: str = ""
    data: Any = None  # the JSON of its $TETHER_VIBE_RESULT
    result_file: Path | None = None
    cleanup: asyncio.Future[None] | None = None  # its last worktree, being removed
    sandbox: str = ""  # how its current run is confined (the envelope's policy line)

    def info(self) -> WorkerInfo:
        return WorkerInfo(
            id=self.id,
            label=self.label,
            tier=self.tier,
            status=self.status,
            started_at=self.started_at,
            finished_at=self.finished_at,
            result=self.result,
            log=self.log.render("log"),
            runs=self.runs,
            queued=self.queued,
            exit_code=self.exit_code,
            isolation=self.isolation,
            branch=self.branch,
            changes=self.changes,
            note=self.note,
            data=self.data,
            sandbox=self.sandbox,
        )
