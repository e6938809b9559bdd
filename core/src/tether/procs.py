"""Child processes of a run: start them in their own session, and kill whole trees when done.

A run tracks every process a family starts (`Run.track_process`); closing the run kills what is left
of each tree after a grace period, even when the family's own shutdown failed or hung.

Nothing here reaps (waits for) a process: a family's asyncio child watcher may own it and must see its
exit status. Dead processes are told apart by status instead.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

POLL = 0.02  # the longest pause between checks while waiting for a tree to die


def process(pid: int) -> Any | None:
    """A psutil handle that remembers the creation time, so a reused pid is never mistaken for ours."""
    import psutil  # imported here: only tracking and killing need it

    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _gone(p: Any) -> bool:
    import psutil

    try:
        return not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def kill_tree(root: int | Any, grace: float = 2.0) -> None:
    """SIGTERM a process, its process group(s) and descendants; SIGKILL what is left after ``grace`` s."""
    import psutil

    top = process(root) if isinstance(root, int) else root
    if top is None or _gone(top):
        return
    try:
        procs = [top, *top.children(recursive=True)]
    except psutil.Error:
        procs = [top]
    groups = set()
    for p in procs:
        try:
            groups.add(os.getpgid(p.pid))
        except OSError:
            pass
    groups.discard(os.getpgrp())  # never signal our own group
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for g in groups:
            try:
                os.killpg(g, sig)
            except OSError:
                pass
        for p in procs:
            if not _gone(p):
                try:
                    p.send_signal(sig)
                except psutil.Error:
                    pass
        deadline, pause = time.monotonic() + (grace if sig == signal.SIGTERM else 2.0), 0.001
        while time.monotonic() < deadline and not all(_gone(p) for p in procs):
            time.sleep(pause)  # most processes die within a millisecond or two of SIGTERM
            pause = min(pause * 2, POLL)
        if all(_gone(p) for p in procs):
            return


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    p = process(pid)
    return p is not None and not _gone(p)
