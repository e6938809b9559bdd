"""What the watchdog looks at: a worker's process tree (CPU used, who is in it, what each waits on)
and the files it may write. Blocking: the roster calls these in a thread."""

from __future__ import annotations

import os
from pathlib import Path

import psutil

SKIP = frozenset({".git"})  # never scanned: git's own bookkeeping
SCAN_LIMIT = 200_000  # entries: past this the scan says "written" (unknown is never taken for a stall)
STATE_LINES = 12


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def tree_sample(pid: int) -> tuple[float, frozenset[int]]:
    """CPU seconds used by the tree (reaped children included) and its pids: any change is activity."""
    total, pids = 0.0, set()
    for p in _tree(pid):
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
        pids.add(p.pid)
    return round(total, 2), frozenset(pids)


def _wchan(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/wchan") as fh:
            text = fh.read().strip()
    except OSError:
        return ""
    return "" if text in ("", "0") else text


def tree_states(pid: int) -> str:
    """One line per process of the tree: pid, name, state and (Linux) the kernel function it waits in
    where the kernel tells, e.g. ``wait_for_partner`` for a FIFO no one opened for writing,
    ``pipe_read`` for an empty pipe, ``hrtimer_nanosleep`` for a sleep."""
    lines = []
    for p in _tree(pid):
        try:
            with p.oneshot():
                name, status = p.name(), p.status()
        except psutil.Error:
            continue
        wchan = _wchan(p.pid)
        lines.append(f"  {p.pid} {name}: {status}" + (f", waiting in {wchan}" if wchan else ""))
    if len(lines) > STATE_LINES:
        lines = [*lines[:STATE_LINES], f"  [{len(lines) - STATE_LINES} more processes not shown]"]
    return "\n".join(lines) or "  (none left)"


def written_since(folder: Path, since: float) -> bool:
    """Whether a file or folder under ``folder`` (not .git, not through symlinks) changed after ``since``."""
    stack, seen = [str(folder)], 0
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                seen += 1
                if seen > SCAN_LIMIT:
                    return True
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_mtime > since or st.st_ctime > since:
                    return True
                if entry.is_dir(follow_symlinks=False) and entry.name not in SKIP:
                    stack.append(entry.path)
    return False
