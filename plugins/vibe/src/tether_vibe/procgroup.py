"""Stopping a worker and everything it started.

A worker runs as the leader of its own session and process group. While the leader lives, its tree
is found through its children (children that moved to a session of their own too). Once the leader
has exited, what it left behind is orphaned: its process group still names the members that stayed
in it, and `Descendants`, recorded while the worker ran, names those that moved to a session of
their own (one started less than a recording interval before the worker exited can escape).

A living worker's tree is stopped by `tether.procs.kill_tree`; what it cannot reach (members of the
worker's group whose parent already exited, descendants recorded in a session of their own) is
stopped here. Like `kill_tree`, nothing here reaps: asyncio reaps the worker, init reaps orphans, and
a zombie counts as stopped (an orphan's zombie may linger where init does not reap).
"""

from __future__ import annotations

import os
import signal
import time

from tether.procs import kill_tree

POLL = 0.02


def _alive(p) -> bool:
    import psutil

    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def group_members(pgid: int) -> list:
    """Live (non-zombie) processes of process group ``pgid``."""
    import psutil

    try:
        os.killpg(pgid, 0)  # cheap: is anything (even a zombie) left in the group?
    except ProcessLookupError:
        return []
    except OSError:
        pass  # EPERM: something is there; look
    out = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and _alive(p):
                out.append(p)
        except (OSError, psutil.Error):
            pass
    return out


def _tree(pid: int) -> list:
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _signal_all(procs: list, groups: set[int], sig: int) -> None:
    import psutil

    for g in groups:
        try:
            os.killpg(g, sig)
        except OSError:
            pass
    for p in procs:  # a member may have left its group: signal it by pid as well
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass


def _stop(procs: list, groups: set[int], grace: float) -> None:
    groups = groups - {os.getpgrp()}  # never our own group
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 1.0)):
        procs = [p for p in procs if _alive(p)]
        if not procs:
            return
        _signal_all(procs, groups, sig)
        deadline, pause = time.monotonic() + wait, 0.001
        while time.monotonic() < deadline and any(_alive(p) for p in procs):
            time.sleep(pause)  # most processes die within a millisecond or two of SIGTERM
            pause = min(pause * 2, POLL)


def stop_group(pgid: int, grace: float) -> None:
    """SIGTERM what is left of process group ``pgid``, SIGKILL it after ``grace`` s (blocking, bounded)."""
    _stop(group_members(pgid), {pgid}, grace)


def stop_worker(pid: int, grace: float) -> None:
    """Stop the worker ``pid``, its descendants and its process group (blocking, bounded)."""
    kill_tree(pid, grace)
    # start_new_session made the worker's pid its group id; members whose parent exited are not in the tree
    stop_group(pid, grace)


class Descendants:
    """The processes a worker started, as seen while it ran: pid -> creation time (pids get reused)."""

    def __init__(self) -> None:
        self.seen: dict[int, float] = {}

    def record(self, pid: int) -> None:
        import psutil

        for p in _tree(pid)[1:]:
            try:
                self.seen.setdefault(p.pid, p.create_time())
            except psutil.Error:
                pass

    def left(self) -> list:
        """Those still alive (the same processes: same pid and creation time)."""
        import psutil

        out = []
        for pid, created in self.seen.items():
            try:
                p = psutil.Process(pid)
                if p.create_time() == created and _alive(p):
                    out.append(p)
            except psutil.Error:
                pass
        return out


def stop_leftovers(pgid: int, descendants: Descendants, grace: float) -> None:
    """After the worker exited: stop what is left of its group and of what it started (blocking, bounded)."""
    procs = group_members(pgid)
    known = {p.pid for p in procs}
    procs += [p for p in descendants.left() if p.pid not in known]
    groups = {pgid}
    for p in procs:
        try:
            groups.add(os.getpgid(p.pid))
        except OSError:
            pass
    _stop(procs, groups, grace)
