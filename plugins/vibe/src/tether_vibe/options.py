"""Run options of the vibe family: which command runs each worker tier, and how the roster behaves.

Declared here, apart from `tether_vibe.config` (which turns them into worker commands), so that
registering them when a run opens imports nothing else of the family.
"""

from __future__ import annotations

from typing import Literal

import attrs
from tether import arg

DEFAULT_WAIT = 300.0
COMMAND_HELP = (
    "a command line (split like a shell splits words, never run through one) or a list of arguments"
)


@attrs.frozen
class VibeOptions:
    vibe_fast: str | list[str] | None = arg(
        f"the command that runs a fast worker: {COMMAND_HELP}", default=None
    )
    vibe_good: str | list[str] | None = arg(
        f"the command that runs a good worker: {COMMAND_HELP}", default=None
    )
    vibe_max_workers: int = arg("how many workers may run at once", default=4, minimum=1)
    vibe_kill_grace: float = arg(
        "seconds from SIGTERM to SIGKILL for a worker's process tree", default=2.0, minimum=0
    )
    vibe_result_chars: int = arg(
        "characters of a worker's stdout kept (the tail) as its result", default=4_000, minimum=1
    )
    vibe_log_chars: int = arg(
        "characters of a worker's stderr kept (the tail) as its log", default=20_000, minimum=1
    )
    vibe_wait_timeout: float = arg(
        "seconds vibe_wait waits when the call gives no timeout", default=DEFAULT_WAIT, minimum=0
    )
    vibe_isolation: Literal["auto", "worktree", "none"] = arg(
        "where a worker works unless vibe_spawn says: worktree (a git worktree and branch of its own, from "
        "HEAD plus the uncommitted changes), none (the run's root), or auto: worktree when the root is in a "
        "git repository with a commit, else none",
        default="auto",
    )
    vibe_stall_seconds: float = arg(
        "seconds without CPU use, output or a file written after which a running worker is marked stalled",
        default=300.0,
        minimum=1,
    )
