"""Fixtures of the vibe tests: a project in tmp_path with a small scripted worker, and runs on it.

The worker reads its briefing from stdin and obeys lines starting with '@' (sleep, write to stderr,
exit with a code, start children...); it prints a result that quotes the briefing it read, so a test
can see what the worker was told.
"""

from __future__ import annotations

import sys
import textwrap
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import tether

WORKER = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time

    if "--noread" in sys.argv:  # a worker that never reads its briefing
        time.sleep(0.2)
        print("did not read")
        sys.exit(0)
    brief = sys.stdin.read()
    wid = os.environ.get("TETHER_VIBE_WORKER_ID", "?")
    for line in brief.splitlines():
        word, _, rest = line.partition(" ")
        if word == "@sleep":
            time.sleep(float(rest))
        elif word == "@sleep-until-told":  # sleeps unless a message says "stop sleeping"
            if "stop sleeping" not in brief:
                time.sleep(float(rest))
        elif word == "@stderr":
            print(rest, file=sys.stderr, flush=True)
        elif word == "@stderr-lines":
            for i in range(int(rest)):
                print(f"log line {i}", file=sys.stderr)
        elif word == "@flood":
            sys.stdout.write("x" * int(rest) + "\\n")
        elif word == "@exit":
            sys.stdout.flush()
            sys.exit(int(rest))
        elif word == "@ignore-term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif word in ("@child", "@escaped-child"):
            # a child in the worker's group, or one in a session of its own: both must be stopped
            child = subprocess.Popen(
                [sys.executable, "-c", "import time; time.sleep(300)"],
                start_new_session=(word == "@escaped-child"),
                stdin=subprocess.DEVNULL,
            )
            with open(rest, "a") as fh:
                fh.write(f"{child.pid}\\n")
        elif word == "@env":
            print("cwd=" + os.getcwd())
            print("env=" + ",".join(os.environ.get(k, "") for k in ("TETHER_VIBE_WORKER_ID", "TETHER_VIBE_TIER", "TETHER_VIBE_LABEL", "TETHER_VIBE_SURFACE")))
    print(f"result of {wid}: briefing was [[{brief}]]")
    """
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project dir"  # a space on purpose: command lines are split as a shell would
    root.mkdir()
    (root / "worker.py").write_text(WORKER)
    return root


@pytest.fixture
def worker_cmd(project: Path) -> list[str]:
    return [sys.executable, str(project / "worker.py")]


@asynccontextmanager
async def vibe_run(
    root: Path, vibe: dict[str, Any] | None = None, *, modes=("vibe",), surface="full", **kwargs: Any
):
    """A run on ``root`` with vibe mode on and the given 'vibe' option; only the vibe family loads."""
    options = {"vibe": vibe} if vibe is not None else {}
    options.update(kwargs.pop("options", {}))
    async with tether.open_run(
        root,
        modes=set(modes),
        surface=surface,
        options=options,
        load_entry_points=False,
        plugins=[_vibe_plugin(), *kwargs.pop("plugins", ())],
        **kwargs,
    ) as run:
        yield run


@pytest.fixture
def open_vibe():
    """``async with open_vibe(root, {"fast": cmd}) as run``: see `vibe_run`."""
    return vibe_run


def _vibe_plugin():
    from tether_vibe import plugin

    return plugin
