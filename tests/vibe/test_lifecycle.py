"""A worker's life through the tools: spawn, list, wait, send; and every bad input to them."""

from __future__ import annotations

import time

import pytest
from tether.testing import assert_model_error
from tether_vibe import plugin as vibe_plugin

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


async def spawn(run, brief: str, label: str = "job", **extra):
    result = await run.call("vibe_spawn", {"brief": brief, "label": label, **extra})
    assert not result.is_error, result.plain
    return result


@pytest.mark.usefixtures("cpu_stress")
async def test_spawn_returns_at_once_and_list_shows_running_then_done(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        begun = time.monotonic()
        spawned = await spawn(run, "write the parser\n@sleep 1.5", label="parser")
        assert time.monotonic() - begun < 1.0  # the worker sleeps 1.5 s: spawn did not wait for it
        assert spawned.data["worker_id"] == "w1"
        assert spawned.data["status"] == "running" and spawned.data["tier"] == "fast"
        assert "w1" in spawned.plain and "vibe_wait" in spawned.plain

        listed = await run.call("vibe_list")
        assert [w["status"] for w in listed.data["workers"]] == ["running"]
        assert "- w1 [fast] running" in listed.plain and "parser" in listed.plain

        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 30})
        assert not done.is_error
        assert (
            done.data["status"] == "done" and done.data["timed_out"] is False and done.data["exit_code"] == 0
        )
        assert "result of w1: briefing was [[write the parser" in done.data["result"]
        assert "Worker w1 ('parser', fast) is done after" in done.plain
        assert done.data["elapsed_seconds"] >= 1.5

        listed = await run.call("vibe_list")
        (w,) = listed.data["workers"]
        assert w["status"] == "done" and w["finished_at"] >= w["started_at"]
        assert "- w1 [fast] done" in listed.plain and "last result: result of w1" in listed.plain


@pytest.mark.usefixtures("cpu_stress")
async def test_wait_with_short_timeout_says_still_running(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        await spawn(run, "@sleep 30")
        begun = time.monotonic()
        waited = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 0.3})
        assert 0.25 < time.monotonic() - begun < 2
        assert not waited.is_error  # a timeout is news, not an error
        assert waited.data["status"] == "running" and waited.data["timed_out"] is True
        assert "is still running after" in waited.plain and "not an error" in waited.plain
        assert waited.data["elapsed_seconds"] >= 0.3
        await run.call("vibe_kill", {"worker_id": "w1"})


async def test_wait_default_timeout_comes_from_the_run_option(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd, "wait_timeout": 0.2}) as run:
        await spawn(run, "@sleep 30")
        begun = time.monotonic()
        waited = await run.call("vibe_wait", {"worker_id": "w1"})
        assert time.monotonic() - begun < 2 and waited.data["timed_out"] is True


async def test_long_wait_reports_progress(open_vibe, project, worker_cmd, monkeypatch):
    from tether_vibe import tools

    monkeypatch.setattr(tools, "PROGRESS_EVERY", 0.2)
    reports = []
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        await spawn(run, "@sleep 0.9")
        done = await run.call(
            "vibe_wait",
            {"worker_id": "w1", "timeout_seconds": 30},
            progress=lambda p, total, msg: reports.append((p, total, msg)),
        )
    assert done.data["status"] == "done"
    assert len(reports) >= 2 and all(total == 30 and "still running" in msg for _, total, msg in reports)
    assert [p for p, _, _ in reports] == sorted(p for p, _, _ in reports)


async def test_send_to_finished_worker_reruns_with_extended_brief(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        await spawn(run, "first brief")
        first = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 30})
        assert first.data["runs"] == 1 and "message 1" not in first.data["result"]

        sent = await run.call("vibe_send", {"worker_id": "w1", "message": "now also add tests"})
        assert not sent.is_error and sent.data["status"] == "running" and sent.data["runs"] == 2
        assert sent.data["queued"] == 0 and "running again" in sent.plain

        second = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 30})
        result = second.data["result"]
        assert second.data["status"] == "done" and second.data["runs"] == 2
        assert "first brief" in result
        assert "--- message 1 (sent after the brief) ---\nnow also add tests" in result
        assert result.index("first brief") < result.index("now also add tests")


async def test_send_to_running_worker_queues_one_rerun_with_every_message(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        await spawn(run, "@sleep 0.8\nbrief")
        one = await run.call("vibe_send", {"worker_id": "w1", "message": "note one"})
        two = await run.call("vibe_send", {"worker_id": "w1", "message": "note two"})
        assert one.data["queued"] == 1 and two.data["queued"] == 2 and two.data["runs"] == 1
        assert "queued" in two.plain and "vibe_kill" in two.plain
        listed = await run.call("vibe_list")
        assert "2 message(s) queued" in listed.plain

        # wait covers the queued rerun too: the result is the rerun's, which saw both messages
        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 30})
        assert done.data["status"] == "done" and done.data["runs"] == 2 and done.data["queued"] == 0
        assert "note one" in done.data["result"] and "note two" in done.data["result"]
        assert "(run 2)" in done.plain
        assert "[tether: run 1 ended with exit code 0; rerunning with 2 new message(s)]" in done.data["log"]


async def test_failed_worker_shows_failed_with_its_stderr_tail(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        await spawn(run, "@stderr-lines 30\n@stderr Traceback: the real cause\n@exit 3")
        failed = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 30})
        assert not failed.is_error  # the tool worked; the worker failed
        assert failed.data["status"] == "failed" and failed.data["exit_code"] == 3
        text = failed.plain
        assert "failed with exit code 3" in text and "Last lines of its log (stderr):" in text
        assert "Traceback: the real cause" in text and "log line 29" in text
        assert "log line 5\n" not in text and "[last 20 of 31 log lines]" in text  # the tail, said so

        listed = await run.call("vibe_list")
        assert "- w1 [fast] failed" in listed.plain
        assert "exit code 3; log ends: Traceback: the real cause" in listed.plain


async def test_result_is_bounded_and_says_so(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd, "result_chars": 1000}) as run:
        await spawn(run, "@flood 200000")
        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 30})
    result = done.data["result"]
    assert done.data["status"] == "done"
    assert result.startswith("[result cut: showing the last 1,000 of 200,")
    assert result.rstrip().endswith("]]")  # the tail (the end of the worker's output) is what is kept
    assert len(result) < 1200


async def test_large_briefing_to_a_worker_that_never_reads_it(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": [*worker_cmd, "--noread"]}) as run:
        await spawn(run, "x" * 2_000_000)  # far more than a pipe holds: writing it must not block anything
        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 30})
        assert done.data["status"] == "done" and "did not read" in done.data["result"]
        listed = await run.call("vibe_list")
        assert not listed.is_error


async def test_list_of_no_workers(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        listed = await run.call("vibe_list")
    assert listed.data == {"workers": []} and "vibe_spawn" in listed.plain


# -- bad inputs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["vibe_send", "vibe_wait", "vibe_kill"])
async def test_unknown_worker_id_is_a_clear_error(open_vibe, project, worker_cmd, tool):
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        await spawn(run, "hi")
        args = {"worker_id": "w7"} | ({"message": "m"} if tool == "vibe_send" else {})
        result = await run.call(tool, args)
        await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 30})
    assert result.is_error
    assert result.plain == (
        "no worker with id 'w7' in this run; workers: w1. Use an id exactly as vibe_spawn or vibe_list gave it."
    )
    assert result.data == {"error": "unknown_worker", "worker_id": "w7", "workers": ["w1"]}


async def test_unknown_worker_id_before_any_spawn(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        result = await run.call("vibe_wait", {"worker_id": "w1"})
    assert result.is_error and "workers: none yet (start one with vibe_spawn)" in result.plain


async def test_bad_tier_is_a_clear_error(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        result = await run.call("vibe_spawn", {"brief": "b", "label": "l", "tier": "medium"})
        assert result.is_error
        assert (
            result.plain
            == 'invalid arguments for vibe_spawn: tier: expected one of "fast", "good", got string \'medium\''
        )
        # a valid tier with no command configured for it
        result = await run.call("vibe_spawn", {"brief": "b", "label": "l", "tier": "good"})
        assert result.is_error and result.data["error"] == "tier_unavailable"
        assert "no worker command is configured for tier 'good' (configured tiers: 'fast')" in result.plain
        assert "[tool.tether.vibe]" in result.plain
        assert (await run.call("vibe_list")).data == {"workers": []}  # nothing was started


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("vibe_spawn", {"brief": "", "label": "l"}, "brief: must not be empty"),
        ("vibe_spawn", {"brief": "b", "label": ""}, "label: must not be empty"),
        ("vibe_spawn", {"brief": "b"}, "missing required argument 'label'"),
        ("vibe_send", {"worker_id": "w1", "message": ""}, "message: must not be empty"),
        ("vibe_wait", {"worker_id": "w1", "timeout_seconds": -1}, "timeout_seconds: must be at least 0"),
        ("vibe_wait", {"worker_id": "w1", "timeout_seconds": "soon"}, "timeout_seconds: expected number"),
        ("vibe_list", {"all": True}, "unknown argument 'all'"),
        ("vibe_spawn", {"brief": " \n\t", "label": "l"}, "brief is blank: say what the worker should do."),
        ("vibe_spawn", {"brief": "b", "label": "\n "}, "label is blank: give a short name"),
        ("vibe_send", {"worker_id": "w1", "message": "  "}, "message is blank"),
    ],
)
async def test_bad_arguments_are_one_line_errors(open_vibe, project, worker_cmd, tool, args, expected):
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        result = await run.call(tool, args)
    assert_model_error(result, expected)


async def test_command_that_cannot_start_is_a_clear_error_and_leaves_no_worker(open_vibe, project):
    async with open_vibe(project, {"fast": "no-such-agent-cli --flag", "good": [str(project)]}) as run:
        missing = await run.call("vibe_spawn", {"brief": "b", "label": "l"})
        not_executable = await run.call("vibe_spawn", {"brief": "b", "label": "l", "tier": "good"})
        listed = await run.call("vibe_list")
    assert missing.is_error and missing.data["error"] == "spawn_failed"
    assert "the fast worker command could not be started: 'no-such-agent-cli --flag'" in missing.plain
    assert "Fix 'fast' under [tool.tether.vibe]" in missing.plain
    assert not_executable.is_error and not_executable.data["error"] == "spawn_failed"
    assert listed.data == {"workers": []}


def test_from_a_synchronous_run(project, worker_cmd):
    # harnesses drive runs from plain code: the run's loop then lives in a thread of its own
    import tether

    with tether.open_run_sync(
        project,
        modes={"vibe"},
        options={"vibe": {"fast": worker_cmd}},
        load_entry_points=False,
        plugins=[vibe_plugin],
    ) as run:
        spawned = run.call("vibe_spawn", {"brief": "from sync code", "label": "sync"})
        done = run.call("vibe_wait", {"worker_id": spawned.data["worker_id"], "timeout_seconds": 30})
        run.call("vibe_spawn", {"brief": "@sleep 60", "label": "left running"})
    assert done.data["status"] == "done" and "from sync code" in done.data["result"]


async def test_label_is_kept_on_one_line(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        spawned = await run.call("vibe_spawn", {"brief": "b", "label": "fix\nthe   parser "})
        await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 30})
        listed = await run.call("vibe_list")
    assert spawned.data["label"] == "fix the parser"
    assert listed.plain.splitlines()[1].endswith(
        "fix the parser | last result: result of w1: briefing was [[b ]]"
    )
