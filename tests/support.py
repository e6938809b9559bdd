"""Helpers shared by every family's tests: `from support import require_binary`."""

from __future__ import annotations

import os
import shutil
import time

import psutil
import pytest

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require_binary(name: str, *candidates: str) -> str:
    """The path of a binary a test needs: skipped locally when absent, a failure in CI (which installs it)."""
    for candidate in (name, *candidates):
        found = shutil.which(candidate) or (candidate if os.path.isabs(candidate) and os.access(candidate, os.X_OK) else None)
        if found:
            return found
    message = f"{name} is not installed (.ci/run installs it)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def children() -> set[int]:
    """Live (non-zombie) descendants of the test process."""
    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out.add(p.pid)
        except psutil.Error:
            pass
    return out


def assert_no_new_children(before: set[int], timeout: float = 5.0) -> None:
    """Fail if a process started during the test is still alive after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        left = children() - before
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    names = []
    for pid in left:
        try:
            names.append(f"{pid} {' '.join(psutil.Process(pid).cmdline())[:120]}")
        except psutil.Error:
            pass
    assert not names, "processes left behind: " + "; ".join(names)


