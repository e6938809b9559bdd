"""Workers as processes: kill stops the whole group, the cap holds, and nothing outlives the run."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from tether.procs import (
    alive,  # running, not a zombie (an orphan's zombie may linger where init does not reap)
)
from tether_vibe import hookspecs

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


async def pids_in(path: Path, count: int, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            pids = [int(x) for x in path.read_text().split()]
            if len(pids) >= count:
                return pids
        await asyncio.sleep(0.02)
    raise AssertionError(f"the worker did not write {count} pid(s) to {path}")


def worker_pid(run, worker_id: str) -> int:
    return run.resource(hookspecs.tether_vibe_roster)._workers[worker_id].proc.pid


async def test_kill_stops_the_worker_and_everything_it_started(open_vibe, project, worker_cmd, tmp_path):
    pidfile = tmp_path / "children"
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        await run.call(
            "vibe_spawn",
            {
                "brief": f"@stderr working on it\n@child {pidfile}\n@escaped-child {pidfile}\n@sleep 60",
                "label": "busy",
            },
        )
        children = await pids_in(pidfile, 2)
        leader = worker_pid(run, "w1")
        assert all(alive(p) for p in [leader, *children])

        begun = time.monotonic()
        killed = await run.call("vibe_kill", {"worker_id": "w1"})
        assert time.monotonic() - begun < 3
        assert not killed.is_error and killed.data["status"] == "killed" and killed.data["stopped"] is True
        assert "Stopped worker w1 ('busy', fast) and every process it started" in killed.plain
        assert "Last lines of its log (stderr):\nworking on it" in killed.plain
        assert not any(alive(p) for p in [leader, *children])  # before the run closes
        listed = await run.call("vibe_list")
        assert "- w1 [fast] killed" in listed.plain
        waited = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 5})
        assert waited.data["status"] == "killed" and "was killed after" in waited.plain


async def test_kill_escalates_when_the_worker_ignores_sigterm(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd, "kill_grace": 0.3}) as run:
        await run.call("vibe_spawn", {"brief": "@ignore-term\n@sleep 60", "label": "stubborn"})
        await asyncio.sleep(0.5)  # let it install its handler
        leader = worker_pid(run, "w1")
        begun = time.monotonic()
        killed = await run.call("vibe_kill", {"worker_id": "w1"})
        assert time.monotonic() - begun < 3
        assert killed.data["status"] == "killed" and not alive(leader)


async def test_kill_then_send_restarts_with_the_whole_briefing(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        await run.call("vibe_spawn", {"brief": "@sleep-until-told 60\nthe brief", "label": "l"})
        queued = await run.call("vibe_send", {"worker_id": "w1", "message": "queued note"})
        assert queued.data["queued"] == 1
        killed = await run.call("vibe_kill", {"worker_id": "w1"})
        assert "1 queued message(s) stay in its briefing" in killed.plain
        assert killed.data["queued"] == 0  # the kill cancelled the pending rerun

        # the restart sees the brief and both messages (the second one ends its sleep)
        restarted = await run.call("vibe_send", {"worker_id": "w1", "message": "stop sleeping"})
        assert restarted.data["status"] == "running" and restarted.data["runs"] == 2
        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 30})
    assert done.data["status"] == "done" and done.data["runs"] == 2
    result = done.data["result"]
    assert "the brief" in result and "message 1 (sent after the brief) ---\nqueued note" in result
    assert "message 2 (sent after the brief) ---\nstop sleeping" in result


async def test_kill_of_a_finished_worker_changes_nothing(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        await run.call("vibe_spawn", {"brief": "quick", "label": "l"})
        await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 30})
        killed = await run.call("vibe_kill", {"worker_id": "w1"})
    assert not killed.is_error and killed.data["stopped"] is False and killed.data["status"] == "done"
    assert "was not running (it is done); nothing was stopped" in killed.plain


async def test_a_finished_worker_leaves_no_process_behind(open_vibe, project, worker_cmd, tmp_path):
    pidfile = tmp_path / "orphans"
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        begun = time.monotonic()
        await run.call("vibe_spawn", {"brief": f"@child {pidfile}\nexit leaving a child", "label": "l"})
        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 30})
        # the child held the worker's stdout open: wait must not hang on it
        assert time.monotonic() - begun < 5
        assert done.data["status"] == "done" and "exit leaving a child" in done.data["result"]
        (orphan,) = await pids_in(pidfile, 1)
        assert not alive(orphan)  # stopped when its worker ended, not only when the run closes


async def test_a_child_in_its_own_session_is_stopped_when_its_worker_exits(
    open_vibe, project, worker_cmd, tmp_path
):
    pidfile = tmp_path / "escaped"
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        begun = time.monotonic()
        await run.call("vibe_spawn", {"brief": f"@escaped-child {pidfile}\n@sleep 0.5\nbye", "label": "l"})
        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 30})
        assert time.monotonic() - begun < 3
        assert done.data["status"] == "done" and "bye" in done.data["result"]
        (escaped,) = await pids_in(pidfile, 1)
        assert not alive(escaped)  # not in the worker's group, yet stopped with it


async def test_concurrency_cap(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd, "good": worker_cmd, "max_workers": 2}) as run:
        for i in range(2):
            assert not (await run.call("vibe_spawn", {"brief": "@sleep 60", "label": f"long {i}"})).is_error
        full = await run.call("vibe_spawn", {"brief": "b", "label": "third", "tier": "good"})
        assert full.is_error and full.data == {
            "error": "roster_full",
            "max_workers": 2,
            "running": ["w1", "w2"],
        }
        assert full.plain.startswith("the roster is full: 2 of 2 workers are running (w1, w2).")
        assert "vibe_wait" in full.plain and "vibe_kill" in full.plain and "max_workers" in full.plain
        assert len((await run.call("vibe_list")).data["workers"]) == 2  # the refused one is not on the roster

        await run.call("vibe_kill", {"worker_id": "w1"})
        third = await run.call("vibe_spawn", {"brief": "quick", "label": "third"})
        assert third.data["worker_id"] == "w3"
        await run.call("vibe_wait", {"worker_id": "w3", "timeout_seconds": 30})

        # a rerun counts too: w3 is done, w2 and w4 run, so sending to w3 would make three
        await run.call("vibe_spawn", {"brief": "@sleep 60", "label": "fourth"})
        refused = await run.call("vibe_send", {"worker_id": "w3", "message": "again"})
        assert refused.is_error and refused.data["error"] == "roster_full"
        assert (
            "--- message"
            not in (await run.call("vibe_wait", {"worker_id": "w3", "timeout_seconds": 1})).plain
        )
        # but a message to a running worker only queues, and is always accepted
        assert (await run.call("vibe_send", {"worker_id": "w2", "message": "more"})).data["queued"] == 1


async def test_cap_holds_under_concurrent_spawns(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd, "max_workers": 3}) as run:
        results = await asyncio.gather(
            *(run.call("vibe_spawn", {"brief": "@sleep 60", "label": f"w{i}"}) for i in range(6))
        )
        assert sum(not r.is_error for r in results) == 3
        assert sum(r.is_error and r.data["error"] == "roster_full" for r in results) == 3
        assert len((await run.call("vibe_list")).data["workers"]) == 3


async def test_closing_the_run_kills_every_worker(open_vibe, project, worker_cmd, tmp_path):
    pidfile = tmp_path / "children"
    async with open_vibe(project, {"fast": worker_cmd, "good": worker_cmd}) as run:
        await run.call("vibe_spawn", {"brief": f"@child {pidfile}\n@sleep 60", "label": "a"})
        await run.call(
            "vibe_spawn", {"brief": f"@escaped-child {pidfile}\n@sleep 60", "label": "b", "tier": "good"}
        )
        await run.call("vibe_spawn", {"brief": "@ignore-term\n@sleep 60", "label": "c"})
        children = await pids_in(pidfile, 2)
        leaders = [worker_pid(run, w) for w in ("w1", "w2", "w3")]
        roster = run.resource(hookspecs.tether_vibe_roster)
        begun = time.monotonic()
    assert time.monotonic() - begun < 8
    assert not any(alive(p) for p in [*leaders, *children])
    assert {w.status.value for w in await roster.list()} == {"killed"}
    # the closed roster refuses new work (the run refuses calls too; this is the roster's own guard)
    with pytest.raises(Exception, match="the run is closing"):
        await roster.spawn("b", "l", "fast")
