"""debugpy: conditions, hit counts, logpoints, function and exception breakpoints, the live list,
stop on entry, restart, the stop snapshot, module and script launches, signals, and bad input."""

from __future__ import annotations

import sys

import pytest

LOOP = """\
import sys


def f(i):
    return i * 2


def main():
    total = 0
    for i in range(10):
        total += f(i)
    try:
        raise ValueError("caught one")
    except ValueError:
        pass
    print("done", total)
    if sys.argv[1:] == ["fail"]:
        raise KeyError("uncaught one")
    return total


main()
"""

MANY = (
    "def wide():\n"
    + "".join(f"    v{i:02d} = {i}\n" for i in range(60))
    + "    long = 'y' * 1000\n    return v00\n\n\nwide()\n"
)

TEST_FILE = """\
def double(x):
    return x * 2


def test_double():
    value = double(21)
    assert value == 42
"""


@pytest.fixture
async def loop(pyproject, write_files, open_debug, no_leftover_processes):
    write_files(pyproject, {"loop.py": LOOP})
    async with open_debug(pyproject, debug_stop_timeout=30) as debug:
        yield debug


async def test_a_condition_skips_the_first_hits(loop):
    await loop.ok(action="breakpoints", file="loop.py", points=[{"line": 11, "condition": "i == 3"}])
    stopped = await loop.ok(action="launch", program="loop.py")
    assert "line 11 (if i == 3) verified" in stopped.plain
    assert stopped.data["stopped"]["line"] == 11
    local = {v["name"]: v["value"] for v in stopped.data["locals"]["variables"]}
    assert local == {"i": "3", "total": "6"}  # the snapshot: no stack/scopes/variables calls needed
    ended = await loop.ok(action="continue")  # i == 3 only once
    assert ended.data["ended"]["exit_code"] == 0


async def test_a_hit_count(loop):
    await loop.ok(action="breakpoints", file="loop.py", points=[{"line": 5, "hit_condition": "4"}])
    stopped = await loop.ok(action="launch", program="loop.py")
    assert "line 5 (hits 4) verified" in stopped.plain
    assert {v["name"]: v["value"] for v in stopped.data["locals"]["variables"]} == {"i": "3"}


async def test_a_logpoint_prints_without_stopping(loop):
    await loop.ok(
        action="breakpoints", file="loop.py", points=[{"line": 5, "log_message": "f({i}) -> {i * 2}"}]
    )
    ended = await loop.ok(action="launch", program="loop.py")
    expected = [f"f({i}) -> {i * 2}" for i in range(10)]
    assert ended.data["ended"]["exit_code"] == 0  # never stopped
    assert ended.data["logged"] == expected  # in the result of the call that ran past them
    assert "logpoints:\nf(0) -> 0\nf(1) -> 2" in ended.plain
    assert all(line in ended.data["output"] for line in expected)  # and in the output


async def test_logpoint_lines_come_with_the_next_stop(loop):
    await loop.ok(
        action="breakpoints", file="loop.py", points=[{"line": 5, "log_message": "at {i}"}, {"line": 16}]
    )
    stopped = await loop.ok(action="launch", program="loop.py")
    assert stopped.data["stopped"]["line"] == 16
    assert stopped.data["logged"] == [f"at {i}" for i in range(10)]
    assert "at 9" in (await loop.ok(action="output")).data["output"]


async def test_a_function_breakpoint(loop):
    placed = await loop.ok(action="breakpoints", functions=["f"])
    assert "function breakpoints: f kept" in placed.plain
    stopped = await loop.ok(action="launch", program="loop.py")
    assert stopped.data["stopped"]["reason"] == "function breakpoint"
    assert (stopped.data["stopped"]["line"], stopped.data["locals"]["variables"][0]["value"]) == (
        4,
        "0",
    )  # the def line
    again = await loop.ok(action="continue")
    assert again.data["locals"]["variables"][0]["value"] == "1"
    cleared = await loop.ok(action="breakpoints", functions=[])
    assert "function breakpoints cleared" in cleared.plain
    assert (await loop.ok(action="continue")).data["ended"]["exit_code"] == 0


async def test_a_function_breakpoint_on_a_missing_function_is_said_not_found(loop):
    # debugpy verifies any name (it matches the running code's bare name); tether looks for the def
    await loop.ok(action="breakpoints", functions=["f", "no_such_function", "Loop.f"])
    run_through = await loop.ok(action="launch", program="loop.py")
    assert run_through.data["stopped"]["reason"] == "function breakpoint"  # f is there, and stops
    listed = {r["function"]: r for r in (await loop.ok(action="breakpoints")).data["functions"]}
    assert listed["f"] == {"function": "f", "verified": True}
    missing = listed["no_such_function"]
    assert (missing["verified"], missing["found"]) == (True, False)
    assert missing["message"].startswith("no `def no_such_function` in the project's 2 Python files;")
    assert "stops only if a function of that name runs" in missing["message"]
    assert "write 'f'" in listed["Loop.f"]["message"]  # a qualified name never matches in debugpy
    said = (await loop.ok(action="status")).plain
    assert "no_such_function verified, but no `def no_such_function`" in said
    assert "Write names as the adapter expects" in said


async def test_exceptions_raised_stops_at_a_caught_one_with_its_info(loop):
    await loop.ok(action="breakpoints", exceptions="raised")
    stopped = await loop.ok(action="launch", program="loop.py")
    assert stopped.data["stopped"] == {
        "reason": "exception",
        "thread_id": stopped.data["stopped"]["thread_id"],
        "file": "loop.py",
        "line": 13,
    }
    info = stopped.data["exceptionInfo"]
    assert (info["type"], info["message"]) == ("ValueError", "caught one")
    assert any('loop.py", line 13, in main' in line for line in info["stack"])
    assert "exception: ValueError: caught one" in stopped.plain
    status = await loop.ok(action="status")
    assert (
        "exceptions=raised: filters raised (Raised Exceptions), uncaught (Uncaught Exceptions)"
        in status.plain
    )
    assert (await loop.ok(action="continue")).data["ended"]["exit_code"] == 0


async def test_exceptions_uncaught_passes_a_caught_one(loop):
    stopped = await loop.ok(action="launch", program="loop.py", args=["fail"])  # uncaught is the default
    assert stopped.data["stopped"]["line"] == 18
    assert stopped.data["exceptionInfo"]["type"] == "KeyError"
    assert stopped.data["exceptionInfo"]["break_mode"] == "unhandled"


async def test_exceptions_none_runs_to_the_end_with_a_trimmed_traceback(loop):
    said = await loop.ok(action="breakpoints", exceptions="none")
    assert "exceptions=none" in said.plain
    ended = await loop.ok(action="launch", program="loop.py", args=["fail"])
    assert ended.data["ended"]["exit_code"] == 1
    output = ended.data["output"]
    assert "KeyError: 'uncaught one'" in output
    assert "launcher frames (runpy, debugpy) not shown]" in output
    assert "runpy.py" not in output and "debugpy/" not in output
    # debugpy's launcher reads stdout and stderr on two threads: the stdout line may come anywhere
    # among the traceback's lines, but whole (it once came as "done" + the traceback + " 90")
    lines = output.splitlines()
    assert "done 90" in lines
    traceback = [line for line in lines if line != "done 90"]
    traceback = traceback[traceback.index("Traceback (most recent call last):") + 1 :]
    assert traceback[0].endswith(" launcher frames (runpy, debugpy) not shown]")
    assert traceback[1] == '  File "' + str(loop.run.root / "loop.py") + '", line 22, in <module>'


async def test_exception_mode_changes_in_a_live_session(loop):
    await loop.ok(action="breakpoints", file="loop.py", lines=[9])
    await loop.ok(action="launch", program="loop.py", args=["fail"])
    changed = await loop.ok(action="breakpoints", exceptions="raised")
    assert changed.data["sent"] is True and "filters raised" in changed.plain
    assert (await loop.ok(action="continue")).data["exceptionInfo"]["type"] == "ValueError"
    await loop.ok(action="breakpoints", exceptions="none")
    assert (await loop.ok(action="continue")).data["ended"]["exit_code"] == 1


async def test_the_live_list_says_verified_and_where(loop):
    await loop.ok(
        action="breakpoints", file="loop.py", points=[{"line": 11, "condition": "i == 5"}, {"line": 16}]
    )
    await loop.ok(action="breakpoints", functions=["f"])
    kept = await loop.ok(action="breakpoints")
    assert kept.data["sent"] is False and kept.data["files"][0]["breakpoints"][0]["verified"] is None
    await loop.ok(action="launch", program="loop.py")
    listed = await loop.ok(action="breakpoints")
    rows = listed.data["files"][0]["breakpoints"]
    assert [(r["requested"], r["line"], r["verified"]) for r in rows] == [(11, 11, True), (16, 16, True)]
    assert rows[0]["condition"] == "i == 5"
    assert listed.data["functions"] == [{"function": "f", "verified": True}]
    status = await loop.ok(action="status")
    assert status.data["breakpoints"]["files"] == listed.data["files"]
    assert "loop.py: line 11 (if i == 5) verified; line 16 verified" in status.plain


async def test_stop_on_entry_and_restart_keep_program_args_and_breakpoints(loop):
    entry = await loop.ok(action="launch", program="loop.py", args=["fail"], stop_on_entry=True)
    assert entry.data["stopped"]["reason"] == "entry" and entry.data["stopped"]["line"] == 1
    await loop.ok(action="breakpoints", file="loop.py", lines=[16])
    restarted = await loop.ok(action="launch", restart=True)
    assert "restarted: the previous session of loop.py was ended" in restarted.plain
    assert restarted.data["stopped"]["line"] == 16  # the breakpoint set in the first session
    assert (await loop.ok(action="evaluate", expression="sys.argv[1:]")).data["result"] == "['fail']"
    again = await loop.ok(action="launch", restart=True)  # a third time, from a live session again
    assert again.data["stopped"]["line"] == 16
    await loop.ok(action="terminate")
    after_end = await loop.ok(action="launch", restart=True)  # the last launch is remembered after the end
    assert after_end.data["stopped"]["line"] == 16


async def test_restart_without_a_launch_says_so(loop):
    refused = await loop.err(action="launch", restart=True)
    assert "restart=true needs a launch to repeat" in refused.plain


async def test_the_snapshot_is_capped_and_says_both_cuts(
    pyproject, write_files, open_debug, no_leftover_processes
):
    write_files(pyproject, {"many.py": MANY})
    async with open_debug(pyproject, debug_stop_timeout=30) as debug:
        await debug.ok(action="breakpoints", file="many.py", lines=[63])
        stopped = await debug.ok(action="launch", program="many.py")
        snapshot = stopped.data["locals"]
        assert snapshot["total"] == 61 and len(snapshot["variables"]) == 50
        assert "[11 more variables not shown (showing 50 of 61)" in stopped.plain
        names = [v["name"] for v in snapshot["variables"]]
        assert "special variables" not in names  # debugpy's groups are not locals
        long = next(v for v in snapshot["variables"] if v["name"] == "long")
        assert long["cut"] is True and "value cut: showed 400 of 1,002 characters" in long["value"]
        assert "1 value(s) cut at 400 characters" in stopped.plain


async def test_setting_a_variable_through_evaluate(loop):
    await loop.ok(action="breakpoints", file="loop.py", lines=[16])
    await loop.ok(action="launch", program="loop.py")
    await loop.ok(action="evaluate", expression="total = 1000")
    ended = await loop.ok(action="continue")
    assert "done 1000" in ended.data["output"]


async def test_evaluate_without_a_frame_names_the_top_frame(loop):
    await loop.ok(action="breakpoints", file="loop.py", lines=[5])
    await loop.ok(action="launch", program="loop.py")
    failed = await loop.err(action="evaluate", expression="nope")
    assert "in the top frame (f at loop.py:5) failed: NameError" in failed.plain
    assert "frame 1000" not in failed.plain


async def test_module_launch_of_pytest_with_a_breakpoint_in_a_test(
    pyproject, write_files, open_debug, no_leftover_processes
):
    # the project's interpreter is one with pytest in it (tether's own), as a .venv would be
    write_files(
        pyproject,
        {
            "test_demo.py": TEST_FILE,
            ".venv/bin/python": f'#!/bin/sh\nexec {sys.executable} "$@"\n',
            ".venv/bin/pytest": f"#!{sys.executable}\nimport sys\nimport pytest\nsys.exit(pytest.main())\n",
        },
    )
    for script in (".venv/bin/python", ".venv/bin/pytest"):
        (pyproject / script).chmod(0o755)
    async with open_debug(pyproject, debug_stop_timeout=60) as debug:
        dash_m = await debug.err(action="launch", program="-m", args=["pytest", "-q"])
        assert "give module='pytest' and the rest in args" in dash_m.plain
        bare = await debug.err(action="launch", program="pytest")
        assert "give module='pytest'" in bare.plain
        await debug.ok(action="breakpoints", file="test_demo.py", lines=[7])
        args = ["-q", "-p", "no:cacheprovider", "test_demo.py"]
        stopped = await debug.ok(action="launch", module="pytest", args=args)
        assert (stopped.data["stopped"]["file"], stopped.data["stopped"]["line"]) == ("test_demo.py", 7)
        assert stopped.data["locals"]["variables"] == [
            {"name": "value", "value": "42", "type": "int", "reference": 0}
        ]
        assert "1 passed" in (await debug.ok(action="continue")).data["output"]
        # the console script is a python script by its shebang: debugpy takes it without adapter=
        script = await debug.ok(action="launch", program=".venv/bin/pytest", args=args)
        assert script.data["stopped"]["line"] == 7
        await debug.ok(action="terminate")


async def test_a_signal_death_is_reported_as_the_signal(
    pyproject, write_files, open_debug, no_leftover_processes
):
    write_files(
        pyproject,
        {
            "crash.py": "import os\nimport signal\n\nprint('before', flush=True)\nos.kill(os.getpid(), signal.SIGSEGV)\n"
        },
    )
    async with open_debug(pyproject) as debug:
        ended = await debug.ok(action="launch", program="crash.py")
    assert "killed by SIGSEGV (signal 11" in ended.plain
    assert ended.data["ended"]["signal"] == "SIGSEGV" and ended.data["ended"]["signal_number"] == 11


# -- bad input -------------------------------------------------------------------------------------


async def test_a_condition_that_does_not_compile(loop):
    await loop.ok(
        action="breakpoints", file="loop.py", points=[{"line": 11, "condition": "i ==="}, {"line": 16}]
    )
    stopped = await loop.ok(action="launch", program="loop.py")
    assert "line 11 (if i ===) not verified: the condition does not compile: SyntaxError" in stopped.plain
    assert stopped.data["stopped"]["line"] == 16  # the session is alive, the other breakpoint holds
    listed = (await loop.ok(action="breakpoints")).data["files"][0]["breakpoints"]
    assert listed[0]["verified"] is False and "SyntaxError" in listed[0]["message"]
    assert (await loop.ok(action="continue")).data["ended"]["exit_code"] == 0


async def test_a_log_message_with_an_unbalanced_brace(loop):
    refused = await loop.err(
        action="breakpoints", file="loop.py", points=[{"line": 5, "log_message": "i={i"}]
    )
    assert "unbalanced brace" in refused.plain and "i={i} total={total}" in refused.plain
    assert refused.data["error"] == "bad_log_message"
    assert (await loop.ok(action="breakpoints")).data["files"] == []  # nothing kept


async def test_breakpoints_arguments_that_do_not_go_together(loop):
    no_file = await loop.err(action="breakpoints", lines=[3])
    assert "needs file" in no_file.plain
    bad_point = await loop(action="breakpoints", file="loop.py", points=[{"line": 0}])
    assert bad_point.is_error and "points[0].line: must be at least 1" in bad_point.plain
    unknown = await loop(action="breakpoints", exceptions="sometimes")
    assert unknown.is_error and "exceptions" in unknown.plain


def test_the_search_for_a_function_skips_big_files_and_is_bounded_in_bytes(tmp_path, monkeypatch):
    from tether_debug import adapters

    find = next(a for a in adapters.BUILTIN if a.id == "debugpy").find_functions
    assert find is not None
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\nversion = '0'\n")
    (tmp_path / "app.py").write_text("def small():\n    pass\n")
    padding = "#" * 100 + "\n"
    big = "def generated():\n    pass\n" + padding * (adapters.FUNCTION_SEARCH_FILE_BYTES // len(padding) + 1)
    (tmp_path / "tables.py").write_text(big)  # a generated module over the bound: not read
    said = find(tmp_path, ["small", "generated"])
    assert list(said) == ["generated"]
    assert said["generated"].startswith(
        "no `def generated` in 1 of the project's 2 Python files (1 over 2,000,000 bytes skipped);"
    )
    # in all: past the byte bound the other files are not read, and that is said too
    for n in range(3):
        (tmp_path / f"m{n}.py").write_text(f"def f{n}():\n    pass\n" + padding * 50)
    monkeypatch.setattr(adapters, "FUNCTION_SEARCH_BYTES", 5000)
    said = find(tmp_path, ["nowhere"])
    assert said["nowhere"].startswith(
        "no `def nowhere` in 2 of the project's 5 Python files (3 not read past the first 5,000 bytes);"
    )
