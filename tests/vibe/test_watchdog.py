"""The watchdog: a worker that uses no CPU and writes nothing is marked stalled (vibe_wait returns early),
one that writes slowly but steadily never is, and budget_seconds stops a worker (timed out)."""

from __future__ import annotations

import os
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

STALL = 2.0

STUCK = textwrap.dedent(
    """
    import os, subprocess, sys
    brief = sys.stdin.read()
    print("starting", brief.split()[0], flush=True)
    if brief.startswith("fifo"):
        os.mkfifo("pipe")
        subprocess.run(["cat", "pipe"])  # a child blocked opening a FIFO no one writes
    elif brief.startswith("sleep"):
        subprocess.run(["sleep", "300"])
    elif brief.startswith("drip"):
        import time
        for i in range(int(brief.split()[1])):
            with open("drip.txt", "a") as fh:
                fh.write(f"{i}\\n")
            time.sleep(0.6)
        print("dripped")
    """
)


@pytest.fixture
def stuck(tmp_path):
    root = tmp_path / "stuck"
    root.mkdir()
    (tmp_path / "stuck.py").write_text(STUCK)
    return root, [sys.executable, str(tmp_path / "stuck.py")]


async def test_a_fifo_reader_and_an_endless_sleep_are_marked_stalled(open_vibe, stuck):
    root, cmd = stuck
    async with open_vibe(root, {"fast": cmd, "stall_seconds": STALL, "max_workers": 4}) as run:
        begun = time.monotonic()
        for brief in ("fifo", "sleep"):
            assert not (await run.call("vibe_spawn", {"brief": brief, "label": brief})).is_error
        for wid, waits_in in (("w1", "cat"), ("w2", "sleep")):
            waited = await run.call("vibe_wait", {"worker_id": wid, "timeout_seconds": 120})
            assert not waited.is_error
            assert waited.data["status"] == "stalled", waited.plain
            assert time.monotonic() - begun < STALL + 5 + 1  # returned early, not after 120 s
            assert "is stalled after" in waited.plain and "no CPU used" in waited.plain
            assert "starting" in waited.plain  # what it last printed
            assert waits_in in waited.data["note"]  # its process tree's states
        first = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 0})
        if os.path.exists("/proc/self/wchan"):  # Linux tells what a process waits in
            assert "waiting in wait_for_partner" in first.data["note"]  # cat, opening the FIFO no one writes
        listed = await run.call("vibe_list")
        assert [w["status"] for w in listed.data["workers"]] == ["stalled", "stalled"]
        assert "2 stalled" in listed.plain
        killed = await run.call("vibe_kill", {"worker_id": "w1"})
        assert killed.data["status"] == "killed" and killed.data["stopped"] is True


async def test_a_slow_steady_writer_is_never_stalled(open_vibe, stuck):
    root, cmd = stuck
    async with open_vibe(root, {"fast": cmd, "stall_seconds": STALL}) as run:
        await run.call(
            "vibe_spawn", {"brief": "drip 6", "label": "drip"}
        )  # a line each 0.6 s: never 2 s quiet
        waited = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 60})
        assert waited.data["status"] == "done", waited.plain
        assert "dripped" in waited.data["result"]


async def test_budget_seconds_stops_the_worker_as_timed_out(open_vibe, stuck):
    root, cmd = stuck
    async with open_vibe(root, {"fast": cmd}) as run:
        spawned = await run.call("vibe_spawn", {"brief": "sleep", "label": "long", "budget_seconds": 1})
        assert "budget: 1 s" in spawned.plain
        waited = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 60})
        assert waited.data["status"] == "timed out", waited.plain
        assert "timed out after" in waited.plain and "budget" in waited.plain
        bad = await run.call("vibe_spawn", {"brief": "sleep", "label": "x", "budget_seconds": 0})
        assert bad.is_error and "budget_seconds" in bad.plain
