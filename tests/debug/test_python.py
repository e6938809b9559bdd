"""The debug tool on real debugpy: stops, frames, variables with their caps, stepping, output, lifecycle."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time

import psutil
import pytest


@pytest.mark.usefixtures("cpu_stress")
async def test_breakpoint_hit_stack_and_variables(debug):
    await debug.ok(action="breakpoints", file="app.py", lines=[5])
    launched = await debug.ok(action="launch", program="app.py")
    assert launched.data["stopped"] == {
        "reason": "breakpoint",
        "thread_id": launched.data["stopped"]["thread_id"],
        "file": "app.py",
        "line": 5,
    }
    assert "c = a + b" in launched.plain
    assert "line 5 verified" in launched.plain

    stack = await debug.ok(action="stack")
    frames = stack.data["frames"]
    assert [(f["name"], f["file"], f["line"]) for f in frames[:3]] == [
        ("add", "app.py", 5),
        ("main", "app.py", 13),
        ("<module>", "app.py", 18),
    ]

    scopes = await debug.ok(action="scopes", frame_id=frames[0]["id"])
    locals_ref = next(s["reference"] for s in scopes.data["scopes"] if s["name"] == "Locals")
    variables = await debug.ok(action="variables", reference=locals_ref)
    values = {v["name"]: (v["value"], v["type"]) for v in variables.data["variables"]}
    assert values == {"a": ("2", "int"), "b": ("3", "int")}
    assert variables.data["total"] == 2


async def test_variable_caps_are_applied_and_said(debug):
    await debug.ok(action="breakpoints", file="app.py", lines=[13])
    await debug.ok(action="launch", program="app.py")
    frame = (await debug.ok(action="stack")).data["frames"][0]["id"]
    scopes = await debug.ok(action="scopes", frame_id=frame)
    locals_ref = next(s["reference"] for s in scopes.data["scopes"] if s["name"] == "Locals")
    variables = await debug.ok(action="variables", reference=locals_ref)
    by_name = {v["name"]: v for v in variables.data["variables"]}

    text = by_name["text"]
    assert text["value"].startswith("'xxxx")
    assert "value cut: showed 400 of 5,002 characters" in text["value"]
    assert len(text["value"].split("...")[0]) == 400
    assert "cut at 400 characters" in variables.plain

    items = by_name["items"]
    assert items["reference"] > 0
    children = await debug.ok(action="variables", reference=items["reference"])
    # debugpy hands over the first 100 elements (plus its special entries); tether shows 50 of them
    assert children.data["total"] > 100
    names = [v["name"] for v in children.data["variables"]]
    assert "000" in names and "040" in names and "060" not in names
    assert len(children.data["variables"]) == 50
    assert f"showing 50 of {children.data['total']}; the container's len() is 1000" in children.plain
    assert "evaluate" in children.plain


async def test_evaluate_in_a_frame(debug):
    await debug.ok(action="breakpoints", file="app.py", lines=[5])
    await debug.ok(action="launch", program="app.py")
    frames = (await debug.ok(action="stack")).data["frames"]
    add_frame, main_frame = frames[0]["id"], frames[1]["id"]
    inner = await debug.ok(action="evaluate", expression="a * 10 + b")
    assert inner.data["result"] == "23"
    outer = await debug.ok(action="evaluate", expression="len(items)", frame_id=main_frame)
    assert outer.data["result"] == "1000"
    missing = await debug.err(action="evaluate", expression="items", frame_id=add_frame)
    assert "NameError" in missing.plain and "name 'items' is not defined" in missing.plain


@pytest.mark.usefixtures("cpu_stress")
async def test_step_in_over_out(debug):
    await debug.ok(action="breakpoints", file="app.py", lines=[13])
    await debug.ok(action="launch", program="app.py")
    step_in = await debug.ok(action="step_in")
    assert step_in.data["stopped"]["line"] == 5 and step_in.data["stopped"]["reason"] == "step"
    step_over = await debug.ok(action="step_over")
    assert step_over.data["stopped"]["line"] == 6
    step_out = await debug.ok(action="step_out")
    assert step_out.data["stopped"]["file"] == "app.py"
    assert step_out.data["stopped"]["line"] in (13, 14)  # back in main, at or after the call
    over = await debug.ok(action="step_over")
    assert (
        over.data["stopped"]["line"] > step_out.data["stopped"]["line"] or over.data["stopped"]["line"] == 14
    )


async def test_output_capture_since_last_read(debug):
    await debug.ok(action="breakpoints", file="app.py", lines=[13])
    await debug.ok(action="launch", program="app.py")
    collected = ""
    deadline = time.monotonic() + 5
    while "hello out\n" not in collected and time.monotonic() < deadline:  # output events trail the stop
        collected += (await debug.ok(action="output")).data["output"]
        await asyncio.sleep(0.05)
    assert collected == "hello out\n"
    again = await debug.ok(action="output")
    assert again.data["output"] == "" and "no new output" in again.plain
    ended = await debug.ok(action="continue")
    assert ended.data["ended"]["exit_code"] == 0
    assert "total 5" in ended.data["output"]
    status = await debug.ok(action="status")
    assert status.data["session"] is None and "exit code 0" in status.plain


async def test_uncaught_exception_stops_and_status_shows_it(
    pyproject, no_leftover_processes, open_debug, write_files
):
    write_files(pyproject, {"boom.py": "def f(x):\n    raise ValueError(f'bad value {x}')\n\nf(7)\n"})
    async with open_debug(pyproject) as debug:
        stopped = await debug.ok(action="launch", program="boom.py")
        assert stopped.data["stopped"]["reason"] == "exception"
        assert stopped.data["stopped"]["line"] == 2
        status = await debug.ok(action="status")
        assert "ValueError" in status.plain and "bad value 7" in status.plain
        assert status.data["stopped"]["file"] == "boom.py"


async def test_program_that_spawns_a_subprocess_does_not_hang(
    pyproject, no_leftover_processes, open_debug, write_files
):
    write_files(
        pyproject,
        {
            "spawn.py": (
                "import subprocess, sys\n"
                "out = subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True, text=True).stdout\n"
                "answer = out.strip()\n"
                "print('child said', answer)\n"
            )
        },
    )
    async with open_debug(pyproject, debug_stop_timeout=20) as debug:
        await debug.ok(action="breakpoints", file="spawn.py", lines=[4])
        started = time.monotonic()
        stopped = await debug.ok(action="launch", program="spawn.py")
        assert time.monotonic() - started < 15
        assert stopped.data["stopped"]["line"] == 4
        answer = await debug.ok(action="evaluate", expression="answer")
        assert answer.data["result"] == "'42'"


async def test_run_to_end_without_breakpoints_reports_exit_and_output(debug):
    result = await debug.ok(action="launch", program="app.py", args=["--flag"])
    assert result.data["stopped"] is None
    assert result.data["ended"]["exit_code"] == 0
    # stdout and stderr reach debugpy on separate threads: their chunks may interleave
    assert "hello out" in result.data["output"]
    assert "total" in result.data["output"] and "5\n" in result.data["output"]
    again = await debug.ok(action="launch", program="app.py")  # the ended session does not block a new one
    assert again.data["ended"]["exit_code"] == 0


async def test_breakpoints_while_running_say_where_they_landed(debug):
    await debug.ok(action="breakpoints", file="app.py", lines=[13])
    await debug.ok(action="launch", program="app.py")
    placed = await debug.ok(action="breakpoints", file="app.py", lines=[5, 14])
    assert placed.data["sent"] is True
    assert [(b["requested"], b["verified"]) for b in placed.data["breakpoints"]] == [(5, True), (14, True)]
    hit = await debug.ok(action="continue")
    assert hit.data["stopped"]["line"] == 5
    cleared = await debug.ok(action="breakpoints", file="app.py", lines=[])
    assert cleared.data["breakpoints"] == []
    ended = await debug.ok(action="continue")
    assert ended.data["ended"]["exit_code"] == 0


async def test_threads_and_pause_of_a_running_program(
    pyproject, no_leftover_processes, open_debug, write_files
):
    loop = "import time\n\nn = 0\nwhile True:\n    n += 1\n    if n == 1:\n        print('looping', flush=True)\n    time.sleep(0.01)\n"
    write_files(pyproject, {"loop.py": loop})
    async with open_debug(pyproject, debug_stop_timeout=1.5) as debug:
        running = await debug.ok(action="launch", program="loop.py")
        assert running.data["running"] is True and "pause" in running.plain
        refused = await debug.err(action="stack")
        assert "running" in refused.plain and "pause" in refused.plain
        threads = await debug.ok(action="threads")
        assert threads.data["threads"] and all("id" in t for t in threads.data["threads"])
        # a busy machine may not have run the first line yet: pause once the loop has begun
        collected, deadline = "", time.monotonic() + 60
        while "looping" not in collected and time.monotonic() < deadline:
            collected += (await debug.ok(action="output")).data["output"]
            await asyncio.sleep(0.05)
        assert "looping" in collected
        paused = await debug.ok(action="pause")
        assert paused.data["stopped"]["reason"] == "pause"
        n = await debug.ok(action="evaluate", expression="n > 0")
        assert n.data["result"] == "True"
        await debug.ok(action="terminate")


async def test_second_launch_is_refused(debug):
    await debug.ok(action="breakpoints", file="app.py", lines=[13])
    first = await debug.ok(action="launch", program="app.py")
    refused = await debug.err(action="launch", program="app.py")
    assert "already running" in refused.plain and "terminate" in refused.plain
    assert refused.data["error"] == "session_exists"
    status = await debug.ok(action="status")  # the first session is untouched
    assert status.data["stopped"] == first.data["stopped"]


async def test_ttl_expiry_terminates_and_the_next_call_says_so(
    pyproject, no_leftover_processes, open_debug, write_files
):
    async with open_debug(pyproject, debug_ttl=2) as debug:
        await debug.ok(action="breakpoints", file="app.py", lines=[13])
        await debug.ok(action="launch", program="app.py")
        supervisor = debug.supervisor
        adapter = supervisor.sessions["conv-1"].proc.pid
        tree = [adapter, *(p.pid for p in psutil.Process(adapter).children(recursive=True))]
        assert len(tree) >= 2  # adapter, launcher and debuggee
        await asyncio.sleep(3.5)
        assert not any(
            psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in tree
        )
        expired = await debug.err(action="stack")
        assert "time limit" in expired.plain and "terminated" in expired.plain
        assert "no debug session" in expired.plain
        status = await debug.ok(action="status")
        assert status.data["session"] is None
        relaunched = await debug.ok(action="launch", program="app.py")  # a new one may start
        assert relaunched.data["stopped"]["line"] == 13


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_attach_to_a_listening_process(pyproject, no_leftover_processes, open_debug, write_files):
    port = _free_port()
    write_files(
        pyproject,
        {
            "served.py": (
                "import sys\n"
                "import debugpy\n"
                "debugpy.listen(('127.0.0.1', int(sys.argv[1])))\n"
                "print('ready', flush=True)\n"
                "debugpy.wait_for_client()\n"
                "value = 21 * 2\n"
                "print('value', value, flush=True)\n"
            )
        },
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(pyproject / "served.py"),
        str(port),
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None
    try:
        assert (await asyncio.wait_for(proc.stdout.readline(), 30)).strip() == b"ready"
        async with open_debug(pyproject, debug_attach_wait=30) as debug:
            await debug.ok(action="breakpoints", file="served.py", lines=[7])
            attached = await debug.ok(action="attach", port=port)
            assert "attached" in attached.plain
            assert attached.data["stopped"]["line"] == 7
            value = await debug.ok(action="evaluate", expression="value")
            assert value.data["result"] == "42"
            await debug.ok(action="terminate")
        await asyncio.wait_for(proc.wait(), 20)  # the debuggee finishes once the debugger lets go
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_attach_to_the_debugpy_command_line_listener(pyproject, open_debug, no_leftover_processes):
    """`python -m debugpy --listen 127.0.0.1:PORT --wait-for-client app.py`: tether connects straight to PORT."""
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "debugpy",
        "--listen",
        f"127.0.0.1:{port}",
        "--wait-for-client",
        "app.py",
        cwd=pyproject,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        # debugpy's command line takes seconds from the attach to the first line on a busy machine (3 s
        # measured): more than attach's default wait for a breakpoint, which then says the program runs
        async with open_debug(pyproject, debug_attach_wait=30) as debug:
            await debug.ok(action="breakpoints", file="app.py", lines=[5])
            deadline = time.monotonic() + 20
            while (
                attached := await debug(action="attach", port=port)
            ).is_error and time.monotonic() < deadline:
                assert "nothing accepts connections" in attached.plain  # not listening yet: the error says so
                await asyncio.sleep(0.1)
            assert not attached.is_error, attached.plain
            assert attached.data["stopped"]["line"] == 5
            assert (await debug.ok(action="evaluate", expression="a + b")).data["result"] == "5"
            ended = await debug.ok(action="continue")
            assert ended.data["ended"] and "total" in ended.data["output"]
        assert await asyncio.wait_for(proc.wait(), 20) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        # debugpy's command line starts its adapter detached from the program: it must go too
        deadline = time.monotonic() + 5
        while (left := _listeners(port)) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        for p in left:
            p.kill()
        assert not left, "debugpy's adapter outlived the attached session"


def _listeners(port: int) -> list[psutil.Process]:
    return [
        p for p in psutil.process_iter(["cmdline"]) if f"--port {port}" in " ".join(p.info["cmdline"] or ())
    ]


async def test_terminate_leaves_no_process_behind(debug):
    await debug.ok(action="breakpoints", file="app.py", lines=[13])
    await debug.ok(action="launch", program="app.py")
    session = debug.supervisor.sessions["conv-1"]
    tree = [session.proc.pid, *(p.pid for p in psutil.Process(session.proc.pid).children(recursive=True))]
    done = await debug.ok(action="terminate")
    assert done.data["terminated"] is True
    for pid in tree:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    after = await debug.err(action="stack")
    assert "no debug session" in after.plain


async def test_run_close_ends_a_live_session(pyproject, no_leftover_processes, open_debug, write_files):
    async with open_debug(pyproject) as debug:
        await debug.ok(action="breakpoints", file="app.py", lines=[13])
        await debug.ok(action="launch", program="app.py")
    # no_leftover_processes checks the adapter and the debuggee are gone


async def test_a_stop_that_comes_after_the_wait_gave_up_is_reported(
    pyproject, open_debug, write_files, no_leftover_processes
):
    write_files(pyproject, {"late.py": "import time\ntime.sleep(2)\nlate = 'here'\nprint(late)\n"})
    async with open_debug(pyproject, debug_stop_timeout=0.5) as debug:
        await debug.ok(action="breakpoints", file="late.py", lines=[4])
        running = await debug.ok(action="launch", program="late.py")
        assert running.data["running"] is True
        await _until_event(debug, "stopped")
        status = await debug.ok(action="status")
        assert status.data["stopped"]["line"] == 4 and status.data["stopped"]["reason"] == "breakpoint"
        assert (await debug.ok(action="evaluate", expression="late")).data["result"] == "'here'"


async def test_an_end_that_comes_after_the_wait_gave_up_is_reported(
    pyproject, open_debug, write_files, no_leftover_processes
):
    write_files(pyproject, {"short.py": "import time\ntime.sleep(1.5)\nprint('done')\n"})
    async with open_debug(pyproject, debug_stop_timeout=0.5) as debug:
        assert (await debug.ok(action="launch", program="short.py")).data["running"] is True
        await _until_event(debug, "terminated")
        late = await debug.ok(action="stack")
        assert "ended while running, before this 'stack' call" in late.plain
        assert late.data["ended"]["exit_code"] == 0 and "done" in late.data["output"]
        assert (await debug.ok(action="status")).data["session"] is None


async def test_launch_after_a_running_program_ended_unwatched(
    pyproject, open_debug, write_files, no_leftover_processes
):
    write_files(pyproject, {"short.py": "import time\ntime.sleep(1)\nprint('done')\n"})
    async with open_debug(pyproject, debug_stop_timeout=0.3) as debug:
        assert (await debug.ok(action="launch", program="short.py")).data["running"] is True
        await _until_event(debug, "terminated")
        await debug.ok(action="breakpoints", file="app.py", lines=[13])
        await debug.ok(action="launch", program="app.py")  # not refused: the first one ended
        deadline = time.monotonic() + 20
        while (status := await debug.ok(action="status")).data.get(
            "stopped"
        ) is None and time.monotonic() < deadline:
            await asyncio.sleep(0.2)  # the 0.3 s stop bound is shorter than debugpy's way to the breakpoint
        assert status.data["stopped"]["line"] == 13


async def test_an_adapter_that_dies_under_a_stopped_program_ends_the_session(debug):
    await debug.ok(action="breakpoints", file="app.py", lines=[13])
    await debug.ok(action="launch", program="app.py")
    session = debug.supervisor.sessions["conv-1"]
    session.proc.kill()
    await asyncio.wait_for(session.proc.wait(), 5)
    await asyncio.sleep(0.2)
    lost = await debug.err(action="stack")
    assert "exited unexpectedly" in lost.plain and "action='launch'" in lost.plain
    again = await debug.ok(action="launch", program="app.py")
    assert again.data["stopped"]["line"] == 13


async def test_deep_stack_is_capped_at_30_frames_and_says_so(
    pyproject, open_debug, write_files, no_leftover_processes
):
    write_files(
        pyproject,
        {"deep.py": "def down(n):\n    if n == 0:\n        return 0\n    return down(n - 1)\n\n\ndown(50)\n"},
    )
    async with open_debug(pyproject) as debug:
        await debug.ok(action="breakpoints", file="deep.py", lines=[3])
        await debug.ok(action="launch", program="deep.py")
        stack = await debug.ok(action="stack")
        assert (
            len(stack.data["frames"]) == 30 and stack.data["total"] == 52
        )  # 51 calls of down() and <module>
        assert "22 more frames not shown (showing 30 of 52" in stack.plain


async def _until_event(debug, name: str, timeout: float = 30) -> None:
    """Wait until the adapter has sent ``name`` (without a tool call, which would consume it)."""
    client = debug.supervisor.sessions["conv-1"].client
    assert await client.wait_event((name,), 0, timeout) is not None, f"no {name} event within {timeout} s"


async def test_a_stop_whose_stack_comes_late_is_a_stop_that_says_to_ask_again(debug, monkeypatch):
    from tether_debug.dap import DapClient

    request = DapClient.request
    late = []

    async def slow_first_stack(self, command, arguments=None, timeout=None):
        if command == "stackTrace" and not late:
            late.append(command)  # the adapter's real answer comes after this request's bound
            timeout = 0.0
        return await request(self, command, arguments, timeout)

    monkeypatch.setattr(DapClient, "request", slow_first_stack)
    await debug.ok(action="breakpoints", file="app.py", lines=[5])
    launched = await debug.ok(action="launch", program="app.py")
    assert launched.data["stopped"]["reason"] == "breakpoint" and launched.data["stack_late"] is True
    assert "did not answer 'stackTrace' within 0 s" in launched.plain
    assert "call action='stack' to ask again" in launched.plain
    assert "held at its entry" not in launched.plain  # that advice is for delve's stop on entry
    no_frame = await debug.err(action="evaluate", expression="a")
    assert "call action='stack' and pass frame_id" in no_frame.plain
    stack = await debug.ok(action="stack")  # asked again: the stop was real
    assert [(f["name"], f["line"]) for f in stack.data["frames"][:2]] == [("add", 5), ("main", 13)]
