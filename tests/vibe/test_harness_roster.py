"""A harness plugs in its own roster through the hook: the tools drive any object with the five methods."""

from __future__ import annotations

import asyncio
import time

import pytest
from tether import ToolError, hookimpl
from tether.options import OptionsError
from tether_vibe.roster import Status, WorkerInfo, unknown_worker

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


class SessionRoster:
    """Workers as asyncio tasks, as a harness whose workers are its own agent sessions might run them."""

    tiers = ("good",)

    def __init__(self) -> None:
        self.workers: dict[str, WorkerInfo] = {}
        self.tasks: dict[str, asyncio.Task] = {}
        self.closed = False

    def _get(self, worker_id: str) -> WorkerInfo:
        if worker_id not in self.workers:
            raise unknown_worker(worker_id, list(self.workers))
        return self.workers[worker_id]

    async def _work(self, worker_id: str, brief: str) -> None:
        await asyncio.sleep(0.2)
        w = self.workers[worker_id]
        self.workers[worker_id] = WorkerInfo(
            w.id, w.label, w.tier, Status.DONE, w.started_at, time.time(), result=f"session says: {brief}"
        )

    def spawn(self, brief: str, label: str, tier: str) -> WorkerInfo:  # a plain function is fine too
        if tier not in self.tiers:
            raise ToolError(f"this harness runs only 'good' workers, not '{tier}'")
        wid = f"s{len(self.workers) + 1}"
        self.workers[wid] = WorkerInfo(wid, label, tier, "running", time.time())
        self.tasks[wid] = asyncio.ensure_future(self._work(wid, brief))
        return self.workers[wid]

    async def send(self, worker_id: str, message: str) -> WorkerInfo:
        w = self._get(worker_id)
        self.tasks[worker_id] = asyncio.ensure_future(self._work(worker_id, message))
        self.workers[worker_id] = WorkerInfo(w.id, w.label, w.tier, "running", time.time(), runs=w.runs + 1)
        return self.workers[worker_id]

    async def wait(self, worker_id: str, timeout: float) -> WorkerInfo:
        self._get(worker_id)
        await asyncio.wait([self.tasks[worker_id]], timeout=timeout)
        return self.workers[worker_id]

    async def kill(self, worker_id: str) -> WorkerInfo:
        w = self._get(worker_id)
        self.tasks[worker_id].cancel()
        if w.status is Status.RUNNING:
            self.workers[worker_id] = WorkerInfo(w.id, w.label, w.tier, "killed", w.started_at, time.time())
        return self.workers[worker_id]

    async def list(self) -> list[WorkerInfo]:
        return list(self.workers.values())

    async def aclose(self) -> None:
        self.closed = True
        for task in self.tasks.values():
            task.cancel()


class Harness:
    def __init__(self, roster) -> None:
        self.roster = roster

    @hookimpl(tryfirst=True)
    def tether_vibe_roster(self, run):
        return self.roster


async def test_harness_roster_replaces_the_command_roster(open_vibe, project, worker_cmd):
    roster = SessionRoster()
    # a worker command is configured too: the harness's roster wins all the same
    async with open_vibe(project, {"fast": worker_cmd}, plugins=[Harness(roster)]) as run:
        spawn_tool = next(t for t in run.tools() if t.name == "vibe_spawn")
        assert "Tiers configured for this run: good." in spawn_tool.description

        refused = await run.call("vibe_spawn", {"brief": "b", "label": "l"})  # tier defaults to fast
        assert refused.is_error and refused.plain == "this harness runs only 'good' workers, not 'fast'"

        spawned = await run.call("vibe_spawn", {"brief": "review w1", "label": "review", "tier": "good"})
        assert spawned.data["worker_id"] == "s1" and spawned.data["status"] == "running"
        done = await run.call("vibe_wait", {"worker_id": "s1", "timeout_seconds": 10})
        assert done.data["status"] == "done" and "session says: review w1" in done.plain

        again = await run.call("vibe_send", {"worker_id": "s1", "message": "look again"})
        assert again.data["runs"] == 2
        killed = await run.call("vibe_kill", {"worker_id": "s1"})
        assert killed.data["status"] == "killed" and killed.data["stopped"] is True

        unknown = await run.call("vibe_wait", {"worker_id": "w1"})
        assert unknown.is_error and "workers: s1" in unknown.plain
        listed = await run.call("vibe_list")
        assert "- s1 [good] killed" in listed.plain
    assert roster.closed  # the run closed the harness's roster


class HangingRoster(SessionRoster):
    async def list(self) -> list[WorkerInfo]:
        await asyncio.sleep(3600)
        return []


async def test_a_roster_that_hangs_does_not_hang_the_call(open_vibe, project, monkeypatch):
    from tether_vibe import tools

    monkeypatch.setattr(tools, "ROSTER_TIMEOUT", 0.3)
    async with open_vibe(project, plugins=[Harness(HangingRoster())]) as run:
        begun = time.monotonic()
        result = await run.call("vibe_list")
    assert time.monotonic() - begun < 3
    assert result.is_error and result.data == {"error": "roster_timeout"}
    assert "the worker roster did not answer vibe_list within 0.3 s" in result.plain


class BrokenRoster(SessionRoster):
    async def list(self) -> list[WorkerInfo]:
        raise RuntimeError("session store is gone")


async def test_a_roster_fault_is_contained(open_vibe, project):
    async with open_vibe(project, plugins=[Harness(BrokenRoster())]) as run:
        result = await run.call("vibe_list")
        # a fault of the roster: one line naming it, the traceback in the log only
        assert result.is_error and result.data == {"error": "internal"}, result.plain
        assert result.plain.startswith(
            "vibe_list failed inside the tool: RuntimeError: session store is gone."
        )
        assert "\n" not in result.plain.strip(), result.plain
        # the run and its other tools go on
        assert not (await run.call("vibe_spawn", {"brief": "b", "label": "l", "tier": "good"})).is_error


@pytest.mark.parametrize("modes", [(), ("plan",)])
async def test_harness_roster_still_needs_vibe_mode(open_vibe, project, modes):
    roster = SessionRoster()
    async with open_vibe(project, plugins=[Harness(roster)], modes=modes) as run:
        assert not [t for t in run.tools() if t.name.startswith("vibe_")]


async def test_bad_wait_timeout_option_with_a_harness_roster(open_vibe, project):
    # with a harness roster too, a bad vibe_wait_timeout is refused when the run opens, not at the first wait
    with pytest.raises(OptionsError) as info:
        async with open_vibe(project, {"wait_timeout": "soon"}, plugins=[Harness(SessionRoster())]):
            pass
    assert info.value.problems == ["run option vibe_wait_timeout: expected number, got string 'soon'"]
    async with open_vibe(project, {"wait_timeout": 7}, plugins=[Harness(SessionRoster())]) as run:
        await run.call("vibe_spawn", {"brief": "b", "label": "l", "tier": "good"})
        good = await run.call("vibe_wait", {"worker_id": "s1", "timeout_seconds": 10})
    assert good.data["status"] == "done"


async def test_list_is_bounded_and_puts_running_workers_first(open_vibe, project):
    roster = SessionRoster()
    now = time.time()
    for i in range(60):  # 59 finished workers, and one old one still running
        status = "running" if i == 0 else "done"
        roster.workers[f"s{i}"] = WorkerInfo(
            f"s{i}", f"job {i}", "good", status, now - 1000 + i, None if i == 0 else now
        )
    async with open_vibe(project, plugins=[Harness(roster)]) as run:
        listed = await run.call("vibe_list")
    rows = [ln for ln in listed.plain.splitlines() if ln.startswith("- ")]
    assert listed.plain.startswith("60 worker(s): 1 running, 59 done")
    assert len(rows) == 50 and rows[0].startswith("- s0 [good] running")
    assert rows[1].startswith("- s59 [good] done")  # then the latest first
    assert (
        "[10 more workers not shown (showing 50 of 60). vibe_wait on an id shows that worker.]"
        in listed.plain
    )
    assert len(listed.data["workers"]) == 60 and "log" not in listed.data["workers"][0]


class WatchfulRoster(SessionRoster):
    """A harness roster with the optional parts: spawn keywords, and the stalled and timed out statuses."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: dict[str, object] = {}

    def spawn(self, brief: str, label: str, tier: str, *, isolation=None, budget_seconds=None) -> WorkerInfo:
        self.asked = {"isolation": isolation, "budget_seconds": budget_seconds}
        wid = f"s{len(self.workers) + 1}"
        self.workers[wid] = WorkerInfo(
            wid, label, tier, "running", time.time(), isolation=isolation or "none"
        )
        return self.workers[wid]

    async def wait(self, worker_id: str, timeout: float) -> WorkerInfo:
        w = self._get(worker_id)
        status = "timed out" if self.asked["budget_seconds"] else "stalled"
        self.workers[worker_id] = WorkerInfo(
            w.id, w.label, w.tier, status, w.started_at, None, note="its session waits on a permission prompt"
        )
        return self.workers[worker_id]


async def test_a_harness_roster_may_take_the_spawn_keywords_and_report_stalls(open_vibe, project):
    roster = WatchfulRoster()
    async with open_vibe(project, plugins=[Harness(roster)]) as run:
        assert "vibe_merge" not in [t.name for t in run.tools()]  # it cannot merge: not offered
        await run.call("vibe_spawn", {"brief": "b", "label": "l", "tier": "good", "isolation": "worktree"})
        assert roster.asked == {"isolation": "worktree", "budget_seconds": None}
        begun = time.monotonic()
        stalled = await run.call("vibe_wait", {"worker_id": "s1", "timeout_seconds": 600})
        assert time.monotonic() - begun < 5 and not stalled.is_error
        assert stalled.data["status"] == "stalled" and "is stalled after" in stalled.plain
        assert "permission prompt" in stalled.plain
        assert "1 stalled" in (await run.call("vibe_list")).plain
        await run.call("vibe_spawn", {"brief": "b", "label": "l", "tier": "good", "budget_seconds": 5})
        timed = await run.call("vibe_wait", {"worker_id": "s2", "timeout_seconds": 1})
        assert timed.data["status"] == "timed out" and "timed out after" in timed.plain


async def test_a_harness_roster_without_the_keywords_refuses_them_in_one_line(open_vibe, project):
    async with open_vibe(project, plugins=[Harness(SessionRoster())]) as run:
        refused = await run.call(
            "vibe_spawn", {"brief": "b", "label": "l", "tier": "good", "budget_seconds": 9}
        )
        assert refused.is_error and refused.plain == (
            "this run's worker roster does not take budget_seconds; call vibe_spawn without it."
        )
        assert (await run.call("vibe_list")).data["workers"] == []  # nothing started
