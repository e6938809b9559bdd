"""What a roster of workers is: the small interface the vibe tools drive, and the worker's record.

A roster runs workers in the background: `spawn` returns at once, the worker goes on by itself.
Every method returns `WorkerInfo` snapshots, never live objects, so a tool can render them safely.
The methods may be coroutines or plain functions (the tools await what needs awaiting). A roster
signals problems the model can fix by raising `tether.ToolError` (the helpers below word the usual
ones); anything else is a fault of the roster.
"""

from __future__ import annotations

import enum
import time
import typing
from collections.abc import Awaitable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import attrs
from tether.tools import ToolError

WorkerTier = Literal["fast", "good"]
TIERS: tuple[str, ...] = typing.get_args(WorkerTier)


class Status(str, enum.Enum):
    RUNNING = "running"
    STALLED = "stalled"  # still running, but its processes used no CPU and wrote nothing for a while
    DONE = "done"
    FAILED = "failed"
    KILLED = "killed"
    TIMED_OUT = "timed out"  # killed at the end of its budget_seconds

    @property
    def active(self) -> bool:
        """Its process still runs (running or stalled)."""
        return self in (Status.RUNNING, Status.STALLED)


@attrs.frozen
class WorkerInfo:
    """A snapshot of one worker.

    Attributes:
        id: the worker's id in the run (what vibe_send, vibe_wait and vibe_kill take).
        label: the label vibe_spawn gave it.
        tier: the worker tier it runs on ("fast" or "good" for the built-in roster).
        status: running, stalled (running, but no CPU, output or file written for the roster's stall
            time), done, failed, killed, or timed out (killed at the end of its budget).
        started_at: epoch seconds when its latest run began (a `send` runs it again).
        finished_at: epoch seconds when its latest run ended; None while it runs.
        result: the bounded result of its latest finished run.
        log: the bounded tail of its log.
        runs: how many times it has run (1 plus one per `send` that ran it again).
        queued: messages its current run has not seen: they are in its briefing and it runs again
            with them when the current run ends.
        exit_code: its process's exit code, for a roster of processes; None while it runs.
        isolation: where it works: "worktree" (a git worktree of its own), "none" (the run's root), or
            "" when the roster does not say.
        branch: its worktree's branch (the built-in roster: tether/vibe/<run id>/<worker id>).
        changes: what it changed against its starting point, as ``{"status": "A"|"M"|"D"|"T", "path",
            "added", "deleted"}`` (lines; None for a binary file), paths relative to the root; None when
            not known (not isolated, or not computed yet).
        note: a line the roster adds (a stall's process states, what is kept where, an unread result).
        data: the JSON the worker wrote to ``$TETHER_VIBE_RESULT`` (bounded), else None.
        sandbox: how its latest run is confined, in one line for the model (the envelope's policy: what
            it may write, its network, ...); "" when it runs unsandboxed or the roster does not say.
    """

    id: str
    label: str
    tier: str
    status: Status = attrs.field(converter=Status)
    started_at: float
    finished_at: float | None = None
    result: str = ""
    log: str = ""
    runs: int = 1
    queued: int = 0
    exit_code: int | None = None
    isolation: str = ""
    branch: str | None = None
    changes: tuple[dict[str, Any], ...] | None = None
    note: str = ""
    data: Any = None
    sandbox: str = ""

    def elapsed(self, now: float | None = None) -> float:
        end = self.finished_at if self.finished_at is not None else (time.time() if now is None else now)
        return max(0.0, end - self.started_at)

    def to_json(self) -> dict[str, Any]:
        return {
            "worker_id": self.id,
            "label": self.label,
            "tier": self.tier,
            "status": self.status.value,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "elapsed_seconds": round(self.elapsed(), 3),
            "runs": self.runs,
            "queued": self.queued,
            "exit_code": self.exit_code,
            "result": self.result,
            "log": self.log,
            "isolation": self.isolation,
            "branch": self.branch,
            "changes": list(self.changes) if self.changes is not None else None,
            "note": self.note,
            "data": self.data,
            "sandbox": self.sandbox,
        }


@runtime_checkable
class Roster(Protocol):
    """The roster the vibe tools drive. A harness implements these five methods.

    Optional: a ``tiers`` attribute (the tiers it can run, named in vibe_spawn's description), and
    ``aclose()`` or ``close()``, which the run calls when it closes (stop every worker there). A
    ``spawn`` that accepts the keywords ``isolation`` and ``budget_seconds`` gets them when the call
    gives them (else such a call is refused, saying the roster does not take them); the statuses
    stalled and timed out are a roster's to report (absent: running, done, failed, killed as before).
    `vibe_merge` is offered for a roster with ``merge_plan(worker_id, action, paths)`` and
    ``merge(plan)`` (the built-in command roster).
    """

    def spawn(self, brief: str, label: str, tier: str) -> WorkerInfo | Awaitable[WorkerInfo]:
        """Start a worker on ``brief`` and return at once (status running). See the class for the
        optional keywords ``isolation`` and ``budget_seconds``."""
        ...

    def send(self, worker_id: str, message: str) -> WorkerInfo | Awaitable[WorkerInfo]:
        """Add ``message`` to the worker's briefing and run it again (see the roster for a running worker)."""
        ...

    def wait(self, worker_id: str, timeout: float) -> WorkerInfo | Awaitable[WorkerInfo]:
        """The worker once it is no longer running (or stalled), or as it is after ``timeout`` seconds."""
        ...

    def kill(self, worker_id: str) -> WorkerInfo | Awaitable[WorkerInfo]:
        """Stop the worker and everything it started; a finished worker is left as it is."""
        ...

    def list(self) -> Sequence[WorkerInfo] | Awaitable[Sequence[WorkerInfo]]:
        """Every worker of the run, oldest first."""
        ...


# -- the usual errors, worded for the model --------------------------------------------------------


def unknown_worker(worker_id: str, known: Sequence[str]) -> ToolError:
    have = ", ".join(known) if known else "none yet (start one with vibe_spawn)"
    return ToolError(
        f"no worker with id '{worker_id}' in this run; workers: {have}. Use an id exactly as vibe_spawn or "
        "vibe_list gave it.",
        code="unknown_worker",
        worker_id=worker_id,
        workers=list(known),
    )


def roster_full(max_workers: int, running: Sequence[str]) -> ToolError:
    return ToolError(
        f"the roster is full: {len(running)} of {max_workers} workers are running ({', '.join(running)}). "
        "Wait for one to finish (vibe_wait) or stop one (vibe_kill), then try again; the project can raise "
        "the cap with max_workers in [tool.tether.vibe].",
        code="roster_full",
        max_workers=max_workers,
        running=list(running),
    )


def tier_unavailable(tier: str, configured: Sequence[str]) -> ToolError:
    have = ", ".join(f"'{t}'" for t in configured) or "none"
    return ToolError(
        f"no worker command is configured for tier '{tier}' (configured tiers: {have}). Use one of those "
        f'tiers, or set {tier} = "<command line>" under [tool.tether.vibe] in the root\'s pyproject.toml.',
        code="tier_unavailable",
        tier=tier,
        tiers=list(configured),
    )
