"""Child processes of a run: start them in their own session, and kill whole trees when done.

A run tracks every process a family starts (`Run.track_process`); closing the run kills what is left
of each tree after a grace period, even when the family's own shutdown failed or hung.
"""

from __future__ import annotations

import os
import signal
import time


def _tree(pid: int) -> list:
    import psutil  # imported here: only closing and killing need it

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def kill_tree(pid: int, grace: float = 2.0) -> None:
    """SIGTERM the process, its process group and its descendants; SIGKILL what is left after ``grace`` s."""
    import psutil

    procs = _tree(pid)
    groups = set()
    for p in procs:
        try:
            groups.add(os.getpgid(p.pid))
        except OSError:
            pass
    own_group = os.getpgrp()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for g in groups - {own_group}:
            try:
                os.killpg(g, sig)
            except OSError:
                pass
        for p in procs:
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass
        if sig == signal.SIGTERM:
            _, alive = psutil.wait_procs(procs, timeout=grace)
            if not alive:
                break
            procs = alive
    # reap zombies that are our own children so nothing lingers in the table
    deadline = time.monotonic() + 1.0
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except psutil.Error:
            pass


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
