"""C through lldb-dap and Go through delve: breakpoint, stack, variables, stepping, output, teardown."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from support import require_binary, write_tree

C_SOURCE = """\
#include <stdio.h>

struct point { int x; int y; };

int add(int a, int b) {
    int c = a + b;
    return c;
}

int main(void) {
    int values[3] = {1, 2, 3};
    struct point p = {4, 5};
    int total = add(values[0], p.y);
    printf("total %d\\n", total);
    return 0;
}
"""

GO_SOURCE = """\
package main

import "fmt"

type point struct {
	X, Y int
}

func add(a, b int) int {
	c := a + b
	return c
}

func main() {
	values := []int{1, 2, 3}
	p := point{4, 5}
	total := add(values[0], p.Y)
	fmt.Println("total", total)
}
"""


@pytest.fixture(scope="module")
def c_project(tmp_path_factory) -> Path:
    require_binary("lldb-dap", "lldb-dap-19", "/usr/lib/llvm-19/bin/lldb-dap")
    gcc = require_binary("gcc", "cc")
    root = tmp_path_factory.mktemp("cproj")
    (root / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.10)\nproject(demo C)\nadd_executable(demo main.c)\n"
    )
    (root / "main.c").write_text(C_SOURCE)
    subprocess.run([gcc, "-g", "-O0", "-o", str(root / "demo"), str(root / "main.c")], check=True, timeout=60)
    (root / "crash.c").write_text(
        '#include <stdio.h>\nint main(void) {\n    int *p = 0;\n    puts("before");\n    *p = 42;\n    return 0;\n}\n'
    )
    subprocess.run(
        [gcc, "-g", "-O0", "-o", str(root / "crash"), str(root / "crash.c")], check=True, timeout=60
    )
    return root


@pytest.fixture(scope="module")
def go_project(tmp_path_factory) -> Path:
    require_binary("dlv")
    require_binary("go")
    root = tmp_path_factory.mktemp("goproj")
    (root / "go.mod").write_text("module example.com/demo\n\ngo 1.19\n")
    (root / "main.go").write_text(GO_SOURCE)
    (root / "panicky").mkdir()
    (root / "panicky" / "main.go").write_text(
        'package main\n\nfunc main() {\n\tvar m map[string]int\n\tm["x"] = 1\n}\n'
    )
    return root


def _by_name(variables):
    return {v["name"]: v for v in variables.data["variables"]}


async def test_c_breakpoint_stack_variables_through_lldb(c_project, open_debug, no_leftover_processes):
    async with open_debug(c_project, debug_stop_timeout=20) as debug:
        adapters = {r["id"]: r for r in (await debug.ok(action="adapters")).data["adapters"]}
        assert adapters["lldb"]["usable"] and "CMakeLists.txt" in adapters["lldb"]["reason"]
        placed = await debug.ok(action="breakpoints", file="main.c", lines=[6, 14])
        assert placed.data["sent"] is False
        stopped = await debug.ok(action="launch", program="demo")
        assert "main.c: line 6 verified" in stopped.plain
        assert stopped.data["stopped"]["file"] == "main.c" and stopped.data["stopped"]["line"] == 6
        assert stopped.data["stopped"]["reason"] == "breakpoint"
        assert "int c = a + b;" in stopped.plain

        frames = (await debug.ok(action="stack")).data["frames"]
        assert [(f["name"], f["file"], f["line"]) for f in frames[:2]] == [
            ("add", "main.c", 6),
            ("main", "main.c", 13),
        ]
        scopes = await debug.ok(action="scopes", frame_id=frames[0]["id"])
        names = [s["name"] for s in scopes.data["scopes"]]
        assert "Locals" in names and "Registers" not in names  # Registers are skipped: noise for a model
        local_ref = next(s["reference"] for s in scopes.data["scopes"] if s["name"] == "Locals")
        local = _by_name(await debug.ok(action="variables", reference=local_ref))
        assert (local["a"]["value"], local["b"]["value"], local["a"]["type"]) == ("1", "5", "int")

        assert (await debug.ok(action="evaluate", expression="a + b")).data["result"] == "6"
        main_scopes = await debug.ok(action="scopes", frame_id=frames[1]["id"])
        main_ref = next(s["reference"] for s in main_scopes.data["scopes"] if s["name"] == "Locals")
        main_locals = _by_name(await debug.ok(action="variables", reference=main_ref))
        assert main_locals["values"]["reference"] > 0
        values = await debug.ok(action="variables", reference=main_locals["values"]["reference"])
        assert [v["value"] for v in values.data["variables"]] == ["1", "2", "3"]
        point = await debug.ok(action="variables", reference=main_locals["p"]["reference"])
        assert {v["name"]: v["value"] for v in point.data["variables"]} == {"x": "4", "y": "5"}

        stepped = await debug.ok(action="step_over")
        assert stepped.data["stopped"]["line"] == 7
        at_print = await debug.ok(action="continue")
        assert at_print.data["stopped"]["line"] == 14
        ended = await debug.ok(action="continue")
        assert ended.data["ended"]["exit_code"] == 0
        assert "total 6" in ended.data["output"]


async def test_c_terminate_while_stopped_leaves_nothing(c_project, open_debug, no_leftover_processes):
    async with open_debug(c_project) as debug:
        await debug.ok(action="breakpoints", file="main.c", lines=[6])
        await debug.ok(action="launch", program="demo")
        threads = await debug.ok(action="threads")
        assert threads.data["threads"][0]["name"]
        await debug.ok(action="terminate")
        assert "no debug session" in (await debug.err(action="stack")).plain


async def test_go_breakpoint_stack_variables_through_delve(go_project, open_debug, no_leftover_processes):
    async with open_debug(go_project, debug_stop_timeout=60, debug_launch_timeout=120) as debug:
        await debug.ok(action="breakpoints", file="main.go", lines=[10])
        stopped = await debug.ok(action="launch", program=".")
        assert stopped.data["stopped"]["file"] == "main.go" and stopped.data["stopped"]["line"] == 10
        frames = (await debug.ok(action="stack")).data["frames"]
        assert [(f["name"], f["line"]) for f in frames[:2]] == [("main.add", 10), ("main.main", 17)]
        scopes = await debug.ok(action="scopes", frame_id=frames[0]["id"])
        local_ref = scopes.data["scopes"][0]["reference"]
        local = _by_name(await debug.ok(action="variables", reference=local_ref))
        assert (local["a"]["value"], local["b"]["value"], local["a"]["type"]) == ("1", "5", "int")

        main_scopes = await debug.ok(action="scopes", frame_id=frames[1]["id"])
        main_locals = _by_name(
            await debug.ok(action="variables", reference=main_scopes.data["scopes"][0]["reference"])
        )
        assert main_locals["values"]["reference"] > 0
        values = await debug.ok(action="variables", reference=main_locals["values"]["reference"])
        assert [v["value"] for v in values.data["variables"]] == ["1", "2", "3"]
        assert (await debug.ok(action="evaluate", expression="a + b")).data["result"] == "6"
        in_main = await debug.ok(action="evaluate", expression="p.X + values[2]", frame_id=frames[1]["id"])
        assert in_main.data["result"] == "7"

        threads = await debug.ok(action="threads")  # goroutines
        assert threads.data["total"] >= 1 and len(threads.data["threads"]) <= 50
        stepped = await debug.ok(action="step_over")
        assert stepped.data["stopped"]["line"] == 11
        ended = await debug.ok(action="continue")
        assert ended.data["stopped"] is None
        assert "total 6" in ended.data["output"]  # delve has no output events: drained from its stdout


async def test_c_segfault_stops_with_the_signal(c_project, open_debug, no_leftover_processes):
    async with open_debug(c_project) as debug:
        stopped = await debug.ok(action="launch", program="crash")
        assert stopped.data["stopped"]["reason"] == "exception"
        assert (stopped.data["stopped"]["file"], stopped.data["stopped"]["line"]) == ("crash.c", 5)
        assert "SIGSEGV" in (await debug.ok(action="status")).plain
        assert (await debug.ok(action="output")).data["output"] == "before\n"


async def test_go_panic_stops_and_names_the_project_frame(go_project, open_debug, no_leftover_processes):
    async with open_debug(go_project, debug_stop_timeout=60, debug_launch_timeout=120) as debug:
        stopped = await debug.ok(action="launch", program="panicky")
        assert stopped.data["stopped"]["reason"] == "exception"
        assert "assignment to entry in nil map" in stopped.data["exception"]
        assert stopped.data["project_frame"] == {"file": "panicky/main.go", "line": 5, "name": "main.main"}
        assert "innermost frame in the project: panicky/main.go:5" in stopped.plain


# -- breakpoints with options, entry, restart, attach, signals (lldb-dap) ------------------------------

C_LOOP = """\
#include <stdio.h>

int f(int i) {
    return i * 2;
}

int main(void) {
    int total = 0;
    int unused;
    for (int i = 0; i < 10; i++) {
        total += f(i);
    }
    printf("done %d\\n", total);
    return 0;
}
"""

C_WAIT = """\
#include <unistd.h>

int tick(int n) {
    return n + 1;
}

int main(void) {
    int n = 0;
    for (;;) {
        n = tick(n);
        usleep(20000);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def c_loop(c_project) -> Path:
    gcc = require_binary("gcc", "cc")
    for name, source in (("loop", C_LOOP), ("wait", C_WAIT)):
        (c_project / f"{name}.c").write_text(source)
        subprocess.run(
            [gcc, "-g", "-O0", "-o", str(c_project / name), str(c_project / f"{name}.c")],
            check=True,
            timeout=60,
        )
    return c_project


async def test_c_condition_hit_count_and_logpoint(c_loop, open_debug, no_leftover_processes):
    async with open_debug(c_loop, debug_stop_timeout=30) as debug:
        await debug.ok(
            action="breakpoints",
            file="loop.c",
            points=[
                {"line": 4, "log_message": "f got {i}"},
                {"line": 11, "condition": "i == 3"},
                {"line": 13, "hit_condition": "1"},
            ],
        )
        stopped = await debug.ok(action="launch", program="loop")
        assert "line 11 (if i == 3) verified" in stopped.plain
        assert stopped.data["stopped"]["line"] == 11
        assert {v["name"]: v["value"] for v in stopped.data["locals"]["variables"]}["i"] == "3"
        assert stopped.data["logged"] == ["f got 0", "f got 1", "f got 2"]  # lldb-dap logs to its console
        at_print = await debug.ok(action="continue")
        assert at_print.data["stopped"]["line"] == 13
        assert at_print.data["logged"] == [f"f got {i}" for i in range(3, 10)]
        assert "f got 9" in (await debug.ok(action="output")).data["output"]
        assert (await debug.ok(action="continue")).data["ended"]["exit_code"] == 0


async def test_c_hit_count_skips_the_first_hits(c_loop, open_debug, no_leftover_processes):
    async with open_debug(c_loop, debug_stop_timeout=30) as debug:
        await debug.ok(action="breakpoints", file="loop.c", points=[{"line": 11, "hit_condition": "3"}])
        third = await debug.ok(action="launch", program="loop")
        assert "line 11 (hits 3) verified" in third.plain
        locals_ = {v["name"]: v["value"] for v in third.data["locals"]["variables"]}
        assert (third.data["stopped"]["line"], locals_["i"], locals_["total"]) == (11, "2", "2")
        # lldb's hit count is an ignore count: the first two hits skipped, every one from the third on stops
        fourth = await debug.ok(action="continue")
        assert {v["name"]: v["value"] for v in fourth.data["locals"]["variables"]}["i"] == "3"


CPP_THROW = """\
#include <cstdio>
#include <stdexcept>

int risky(int i) {
    if (i == 2) {
        throw std::runtime_error("two is bad");
    }
    return i;
}

int main() {
    int total = 0;
    for (int i = 0; i < 4; i++) {
        try {
            total += risky(i);
        } catch (const std::runtime_error &e) {
            std::printf("caught %s\\n", e.what());
        }
    }
    std::printf("total %d\\n", total);
    return 0;
}
"""


@pytest.fixture(scope="module")
def cpp_throw(c_project) -> Path:
    compiler = require_binary("g++", "c++", "clang++")
    (c_project / "throw.cpp").write_text(CPP_THROW)
    subprocess.run(
        [compiler, "-g", "-O0", "-o", str(c_project / "throw"), str(c_project / "throw.cpp")],
        check=True,
        timeout=120,
    )
    return c_project


async def test_c_exception_modes_with_a_program_that_throws_and_catches(
    cpp_throw, open_debug, no_leftover_processes
):
    async with open_debug(cpp_throw, debug_stop_timeout=30) as debug:
        await debug.ok(action="breakpoints", exceptions="raised")
        thrown = await debug.ok(action="launch", program="throw")
        assert thrown.data["stopped"]["reason"] == "exception"
        assert thrown.data["exceptionInfo"]["type"] == "cpp_throw"
        # the stop is in the C++ runtime (__cxa_throw): the project's frame is named beside it
        assert thrown.data["project_frame"] == {"file": "throw.cpp", "line": 6, "name": "risky(int)"}
        status = await debug.ok(action="status")
        assert (
            "exceptions=raised: filters cpp_throw (C++ Throw) (a signal (SIGSEGV, SIGABRT) stops the program "
            "whatever the mode)." in status.plain
        )
        uncaught = await debug.ok(action="breakpoints", exceptions="uncaught")
        assert uncaught.data["sent"] is True
        assert (
            "exceptions=uncaught: the lldb adapter has no filter for this mode (it offers " in uncaught.plain
        )
        assert "cpp_throw (C++ Throw)" in uncaught.plain
        ended = await debug.ok(action="continue")  # the throw is caught: nothing stops it now
        assert ended.data["ended"]["exit_code"] == 0
        assert "caught two is bad" in ended.data["output"] and "total 4" in ended.data["output"]
        await debug.ok(action="breakpoints", exceptions="none")
        again = await debug.ok(action="launch", program="throw")
        assert again.data["ended"]["exit_code"] == 0 and "caught two is bad" in again.data["output"]


async def test_c_function_breakpoints_and_the_live_list_of_a_moved_line(
    c_loop, open_debug, no_leftover_processes
):
    async with open_debug(c_loop, debug_stop_timeout=30) as debug:
        await debug.ok(action="breakpoints", file="loop.c", lines=[9])  # `int unused;` has no code of its own
        await debug.ok(action="breakpoints", functions=["f", "no_such_function"])
        stopped = await debug.ok(action="launch", program="loop")
        assert "line 9 verified, bound to line 10" in stopped.plain
        assert (
            "no_such_function not verified" in stopped.plain
            and "Write names as the adapter expects" in stopped.plain
        )
        assert stopped.data["stopped"]["line"] == 10
        listed = await debug.ok(action="status")
        (row,) = listed.data["breakpoints"]["files"][0]["breakpoints"]
        assert (row["requested"], row["line"], row["verified"]) == (9, 10, True)
        functions = {r["function"]: r for r in listed.data["breakpoints"]["functions"]}
        assert functions["f"]["verified"] is True and functions["f"]["line"] == 4
        assert functions["no_such_function"]["verified"] is False
        in_f = await debug.ok(action="continue")
        assert in_f.data["stopped"]["line"] == 4 and "in f," in in_f.plain  # lldb-dap's reason: 'breakpoint'


async def test_c_a_condition_that_does_not_compile(c_loop, open_debug, no_leftover_processes):
    async with open_debug(c_loop, debug_stop_timeout=30) as debug:
        await debug.ok(action="breakpoints", file="loop.c", points=[{"line": 11, "condition": "i == ((("}])
        stopped = await debug.ok(action="launch", program="loop")
        # lldb-dap accepts any condition and stops where it fails: its message, the breakpoint unverified
        assert "the condition 'i == (((' does not compile (error:" in stopped.plain
        assert stopped.data["stopped"]["line"] == 11
        (row,) = (await debug.ok(action="breakpoints")).data["files"][0]["breakpoints"]
        assert row["verified"] is False and "does not compile" in row["message"]
        assert (await debug.ok(action="evaluate", expression="i")).data[
            "result"
        ] == "0"  # the session is alive


async def test_c_stop_on_entry_and_restart_keeping_breakpoints(c_loop, open_debug, no_leftover_processes):
    async with open_debug(c_loop, debug_stop_timeout=30) as debug:
        entry = await debug.ok(action="launch", program="loop", stop_on_entry=True)
        assert entry.data["stopped"]["reason"] == "entry" and "exception" not in entry.data
        await debug.ok(action="breakpoints", file="loop.c", lines=[13])
        restarted = await debug.ok(action="launch", restart=True)
        assert "restarted" in restarted.plain and restarted.data["stopped"]["line"] == 13
        assert (await debug.ok(action="evaluate", expression="total")).data["result"] == "90"


async def test_c_attach_by_pid(c_loop, open_debug, no_leftover_processes):
    from tether_debug.running import ptrace_problem

    proc = subprocess.Popen([str(c_loop / "wait")])
    try:
        async with open_debug(c_loop, debug_stop_timeout=30) as debug:
            await debug.ok(action="breakpoints", file="wait.c", lines=[4])
            problem = ptrace_problem(proc.pid)
            if problem:  # the OS forbids it here: a clear refusal, nothing started
                refused = await debug.err(action="attach", pid=proc.pid)
                assert "cannot attach to process" in refused.plain and "action='launch'" in refused.plain
                return
            attached = await debug.ok(action="attach", pid=proc.pid)
            assert f"attached to the process {proc.pid}" in attached.plain
            assert (attached.data["stopped"]["file"], attached.data["stopped"]["line"]) == ("wait.c", 4)
            await debug.ok(action="terminate")  # detaches: the process goes on
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(timeout=10)


async def test_c_attach_to_no_such_process(c_loop, open_debug, no_leftover_processes):
    async with open_debug(c_loop) as debug:
        refused = await debug.err(action="attach", pid=2**22 + 12345)
        assert "no such process" in refused.plain
        both = await debug.err(action="attach", pid=1, port=5678)
        assert "needs port" in both.plain and "not both" in both.plain


async def test_c_attach_where_ptrace_is_forbidden_is_refused_clearly(
    c_loop, open_debug, no_leftover_processes, tmp_path, monkeypatch
):
    from tether_debug import running

    scope = tmp_path / "ptrace_scope"
    scope.write_text("2\n")
    monkeypatch.setattr(running, "YAMA_PTRACE_SCOPE", scope)
    proc = subprocess.Popen([str(c_loop / "wait")])
    try:
        async with open_debug(c_loop) as debug:
            refused = await debug.err(action="attach", pid=proc.pid)
            assert (
                f"cannot attach to process {proc.pid}: ptrace is restricted (kernel.yama.ptrace_scope=2)"
                in refused.plain
            )
            assert "action='launch'" in refused.plain and refused.data["error"] == "attach_refused"
            assert debug.supervisor.sessions == {}
    finally:
        proc.kill()
        proc.wait(timeout=10)


async def test_c_attach_the_kernel_refuses_is_one_paragraph_naming_the_fix(
    c_loop, open_debug, no_leftover_processes, tmp_path, monkeypatch
):
    """A real EPERM: lldb-dap without CAP_SYS_PTRACE attaching to another user's process.

    Root may trace anything, so the adapter is started with CAP_SYS_PTRACE out of its bounding set
    (what a container or sandbox does to a debugger) and the target runs as nobody. The kernel
    refuses PTRACE_ATTACH with EPERM; lldb-19 says only "lost connection".
    """
    from tether_debug.adapters import BUILTIN

    setpriv, sleep = shutil.which("setpriv"), shutil.which("sleep")
    if os.geteuid() != 0 or setpriv is None or sleep is None:
        pytest.skip("needs root and setpriv to make a process the debugger may not trace")
    lldb = next(b for b in BUILTIN if b.id == "lldb")
    real = next((found for name in lldb.binaries if (found := shutil.which(name))), None)
    if real is None:
        pytest.skip("lldb-dap not installed")
    shim = tmp_path / "bin" / "lldb-dap"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {setpriv} --bounding-set=-sys_ptrace -- {real} "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    target = subprocess.Popen([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sleep, "300"])
    try:
        async with open_debug(c_loop, debug_launch_timeout=60) as debug:
            refused = await debug.err(action="attach", pid=target.pid)
            assert refused.data["error"] == "attach_failed"
            assert refused.plain.startswith(
                f"could not attach to process {target.pid}: lldb's debug server could not attach"
            )
            assert "kernel refuses ptrace with EPERM" in refused.plain
            assert "CAP_SYS_PTRACE for the debugger" in refused.plain and "action='launch'" in refused.plain
            assert "\n" not in refused.plain  # one paragraph
            assert debug.supervisor.sessions == {}
            assert (await debug.ok(action="status")).plain.startswith("no debug session is running")
        assert target.poll() is None  # the refused attach left the process alone
    finally:
        target.kill()
        target.wait(timeout=10)


async def test_c_attach_to_a_process_another_tracer_holds_names_that_tracer(
    c_loop, open_debug, no_leftover_processes
):
    """lldb says "lost connection" here too; the kernel shows why (TracerPid), and that is what is said."""
    import asyncio

    strace, sleep = shutil.which("strace"), shutil.which("sleep")
    if strace is None or sleep is None:
        pytest.skip("needs strace to hold a process as its tracer")
    target = subprocess.Popen([sleep, "300"])
    tracer = subprocess.Popen([strace, "-p", str(target.pid)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while f"TracerPid:\t{tracer.pid}" not in Path(f"/proc/{target.pid}/status").read_text():
            assert time.monotonic() < deadline and tracer.poll() is None, "strace never attached"
            await asyncio.sleep(0.05)
        async with open_debug(c_loop, debug_launch_timeout=60) as debug:
            refused = await debug.err(action="attach", pid=target.pid)
            assert refused.data["error"] == "attach_failed"
            assert (
                f"process {target.pid} is already traced by pid {tracer.pid} (strace), and a process can have "
                "only one tracer. Detach that one" in refused.plain
            )
            assert "EPERM" not in refused.plain and "CAP_SYS_PTRACE" not in refused.plain
            assert "\n" not in refused.plain
            assert debug.supervisor.sessions == {}
        assert target.poll() is None
    finally:
        tracer.kill()
        tracer.wait(timeout=10)
        target.kill()
        target.wait(timeout=10)


def test_a_lost_connection_without_evidence_says_both_causes():
    """No other tracer, and a debugger that may trace: lldb's two words could be either cause."""
    from tether_debug.running import lost_connection

    sleep = subprocess.Popen(["sleep", "300"])
    try:
        said = lost_connection(sleep.pid, None)
    finally:
        sleep.kill()
        sleep.wait(timeout=10)
    assert "what it says when the kernel refuses ptrace, or when its debug server failed" in said
    assert "If ptrace is refused:" in said and f"run `lldb -p {sleep.pid}`" in said
    assert "already traced" not in said and "EPERM here" not in said


async def test_c_sigsegv_is_reported_as_the_signal(c_project, open_debug, no_leftover_processes):
    async with open_debug(c_project) as debug:
        await debug.ok(action="launch", program="crash")
        ended = await debug.ok(action="continue")
    assert (
        "the program was killed by SIGSEGV (signal 11)" in ended.plain and "exit code 11" not in ended.plain
    )
    assert ended.data["ended"]["signal"] == "SIGSEGV"


# -- delve: conditions, logpoints, functions, test mode, test binaries, build errors -------------------

GO_LOOP = """\
package main

import "fmt"

func f(i int) int {
	return i * 2
}

func main() {
	total := 0
	for i := 0; i < 10; i++ {
		total += f(i)
	}
	fmt.Println("done", total)
}
"""


@pytest.fixture(scope="module")
def go_more(go_project) -> Path:
    files = {
        "loop/main.go": GO_LOOP,
        "broken/main.go": 'package main\n\nfunc main() {\n\tvar x int = "s"\n\t_ = x\n}\n',
        "lib/lib.go": "package lib\n\nfunc Double(i int) int {\n\treturn i * 2\n}\n",
        "lib/lib_test.go": 'package lib\n\nimport "testing"\n\nfunc TestDouble(t *testing.T) {\n\tif Double(2) != 4 {\n\t\tt.Fatal("bad")\n\t}\n}\n',
    }
    write_tree(go_project, files)
    build = ["go", "test", "-c", "-gcflags=all=-N -l", "-o", "lib.test", "./lib"]
    subprocess.run(build, cwd=go_project, check=True, timeout=300, capture_output=True)
    return go_project


async def test_go_condition_logpoint_and_set_variable(go_more, open_debug, no_leftover_processes):
    async with open_debug(go_more, debug_stop_timeout=60, debug_launch_timeout=120) as debug:
        await debug.ok(
            action="breakpoints",
            file="loop/main.go",
            points=[
                {"line": 6, "log_message": "f got {i}"},
                {"line": 12, "condition": "i == 3"},
                {"line": 14},
            ],
        )
        stopped = await debug.ok(action="launch", program="loop")
        assert stopped.data["stopped"]["line"] == 12
        assert {v["name"]: v["value"] for v in stopped.data["locals"]["variables"]}["i"] == "3"
        assert stopped.data["logged"] == ["f got 0", "f got 1", "f got 2"]
        set_total = await debug.ok(action="evaluate", expression="total = 1000")  # delve: through setVariable
        assert "set with setVariable" in set_total.plain
        at_print = await debug.ok(action="continue")
        assert at_print.data["stopped"]["line"] == 14
        assert (await debug.ok(action="evaluate", expression="total")).data["result"] == str(
            1000 + sum(2 * i for i in range(3, 10))
        )


async def test_go_function_breakpoints_qualified_and_not(go_more, open_debug, no_leftover_processes):
    async with open_debug(go_more, debug_stop_timeout=60, debug_launch_timeout=120) as debug:
        await debug.ok(action="breakpoints", functions=["main.f", "nosuch"])
        stopped = await debug.ok(action="launch", program="loop")
        assert (stopped.data["stopped"]["reason"], stopped.data["stopped"]["file"]) == (
            "function breakpoint",
            "loop/main.go",
        )
        assert 'nosuch not verified: location "nosuch" not found' in stopped.plain
        assert "Go function breakpoints take qualified names: 'main.add'" in stopped.plain
        unqualified = await debug.ok(
            action="breakpoints", functions=["f"]
        )  # delve binds a unique short name too
        assert unqualified.data["functions"] == [
            {"function": "f", "verified": True, "file": "loop/main.go", "line": 5}
        ]


async def test_go_test_mode_and_a_test_binary(go_more, open_debug, no_leftover_processes):
    async with open_debug(go_more, debug_stop_timeout=60, debug_launch_timeout=120) as debug:
        library = await debug.err(action="launch", program="lib")
        assert "is a library package (no package main)" in library.plain and "test=true" in library.plain
        await debug.ok(action="breakpoints", file="lib/lib.go", lines=[4])
        in_test = await debug.ok(action="launch", program="lib", test=True, args=["-test.run", "TestDouble"])
        assert (in_test.data["stopped"]["file"], in_test.data["stopped"]["line"]) == ("lib/lib.go", 4)
        assert in_test.data["locals"]["variables"][0] == {
            "name": "i",
            "value": "2",
            "type": "int",
            "reference": 0,
        }
        await debug.ok(action="terminate")
        binary = await debug.ok(action="launch", program="lib.test")  # a `go test -c` binary goes to delve
        assert binary.data["stopped"]["line"] == 4
        assert (await debug.ok(action="status")).data["session"]["adapter"] == "delve"


async def test_go_stop_on_entry_then_a_breakpoint(go_more, open_debug, no_leftover_processes):
    async with open_debug(go_more, debug_stop_timeout=60, debug_launch_timeout=120) as debug:
        entry = await debug.ok(action="launch", program="loop", stop_on_entry=True)
        # delve holds the program before the Go runtime has a goroutine: a stop without frames, said
        assert entry.data["stopped"]["reason"] == "entry"
        assert entry.data["no_stack"] and "no stack at this stop" in entry.plain
        no_frame = await debug.err(action="evaluate", expression="1")
        assert "the adapter gives no stack at this stop" in no_frame.plain
        await debug.ok(action="breakpoints", file="loop/main.go", lines=[12])
        at_loop = await debug.ok(action="continue")
        assert (at_loop.data["stopped"]["file"], at_loop.data["stopped"]["line"]) == ("loop/main.go", 12)
        assert {v["name"]: v["value"] for v in at_loop.data["locals"]["variables"]}["i"] == "0"


async def test_go_build_error_is_answered_at_once(go_more, open_debug, no_leftover_processes):

    async with open_debug(go_more, debug_launch_timeout=60) as debug:
        started = time.monotonic()
        failed = await debug.err(action="launch", program="broken")
        elapsed = time.monotonic() - started
        # tether builds before delve starts: the answer is go build's own output, paths relative
        # the command as it ran (its output in the run's private directory)
        assert "the build failed (`go build -o " in failed.plain
        assert "/broken -gcflags 'all=-N -l' -trimpath=false ./broken`, exit status 2)" in failed.plain
        assert 'broken/main.go:4:14: cannot use "s" (untyped string constant) as int value' in failed.plain
        assert str(go_more) not in failed.plain
        assert failed.data["error"] == "launch_failed"
        assert not list(debug.run.private_dir().glob("debug-build-*"))  # the build's directory is gone
    # not the launch bound (benchmarks/debug_bench.py measures it against `dlv debug`)
    assert elapsed < 20, elapsed
    assert not (go_more / "__debug_bin").exists()


def _many_errors(root: Path) -> None:
    """A program whose build prints over a hundred lines: eight packages of twelve errors each."""
    files = {
        f"many/p{i}/p.go": f"package p{i}\n\n" + "".join(f'var V{j} int = "s"\n' for j in range(12))
        for i in range(8)
    }
    imports = "".join(f'\t_ "example.com/demo/many/p{i}"\n' for i in range(8))
    files["many/main.go"] = f"package main\n\nimport (\n{imports})\n\nfunc main() {{}}\n"
    write_tree(root, files)


async def test_a_long_build_failure_says_the_whole_command_and_a_hint_that_leaves_nothing(
    go_more, open_debug, no_leftover_processes
):
    _many_errors(go_more)
    async with open_debug(go_more, debug_launch_timeout=120) as debug:
        # a long value is cut in the command shown, the argv never; the hint then cannot say "run"
        long = (await debug.err(action="launch", program="many", env={"LONG": "x" * 900})).plain
        assert "`LONG=" + "x" * 80 + "…[820 more characters cut] go build -o " in long
        assert "/many -gcflags 'all=-N -l' -trimpath=false ./many`, exit status " in long
        assert "x" * 81 not in long
        assert "more lines cut: build as `LONG=" in long and "run `" not in long
        assert "go build -o /dev/null " in long
        # nothing cut: the hint is a command to type in the root, and it leaves nothing behind
        plain = (await debug.err(action="launch", program="many")).plain
        hint = plain.rsplit("more lines cut: run `", 1)[1].split("` in the root to see them all]")[0]
        assert hint == "go build -o /dev/null -gcflags 'all=-N -l' -trimpath=false ./many"
    before = sorted(go_more.rglob("*"))
    rerun = subprocess.run(hint, shell=True, cwd=go_more, capture_output=True, text=True, timeout=300)
    assert rerun.returncode != 0 and len(rerun.stderr.splitlines()) > 60
    assert sorted(go_more.rglob("*")) == before


GO_ENV = """package main

import (
	"fmt"
	"os"
)

func main() {
	dir, _ := os.Getwd()
	fmt.Println("tag:", tag, "greeting:", os.Getenv("GREETING"), "args:", os.Args[1:], "in:", dir)
}
"""


async def test_go_env_cwd_args_reach_the_build_and_the_program_and_restart_rebuilds(
    go_more, open_debug, no_leftover_processes
):
    files = {
        "envy/main.go": GO_ENV,
        "envy/plain.go": '//go:build !extra\n\npackage main\n\nvar tag = "plain"\n',
        "envy/extra.go": '//go:build extra\n\npackage main\n\nvar tag = "extra"\n',
    }
    write_tree(go_more, files)
    async with open_debug(go_more, debug_stop_timeout=60, debug_launch_timeout=120) as debug:
        await debug.ok(action="breakpoints", file="envy/main.go", lines=[10])
        stopped = await debug.ok(
            action="launch",
            program="envy",
            args=["one", "two"],
            cwd="lib",
            env={"GOFLAGS": "-tags=extra", "GREETING": "hi"},  # delve's build had the launch env too
        )
        assert (stopped.data["stopped"]["file"], stopped.data["stopped"]["line"]) == ("envy/main.go", 10)
        built = list(debug.run.private_dir().glob("debug-build-*/envy"))
        assert len(built) == 1  # the binary lives outside the project while the session does
        ended = await debug.ok(action="continue")
        assert f"tag: extra greeting: hi args: [one two] in: {go_more / 'lib'}" in ended.data["output"]
        assert not list(debug.run.private_dir().glob("debug-build-*"))
        # restart builds again: an edit made meanwhile is what runs
        (go_more / "envy/extra.go").write_text('//go:build extra\n\npackage main\n\nvar tag = "edited"\n')
        again = await debug.ok(action="launch", restart=True)
        assert again.data["stopped"]["line"] == 10
        assert (await debug.ok(action="evaluate", expression="tag")).data["result"] == '"edited"'
        await debug.ok(action="terminate")
        assert not list(debug.run.private_dir().glob("debug-build-*"))
    assert not (go_more / "envy" / "__debug_bin").exists() and not (go_more / "__debug_bin").exists()


GO_SLOW_BUILD = """\
package main

import (
	"fmt"
	"net/http"
)

func main() {
	fmt.Println(http.StatusOK)
}
"""


async def test_a_go_build_over_the_launch_bound_is_stopped_mid_compile_and_said(
    go_more, open_debug, no_leftover_processes
):
    import asyncio
    import re

    write_tree(go_more, {"slow/main.go": GO_SLOW_BUILD})
    async with open_debug(go_more, debug_launch_timeout=5) as debug:
        # -a rebuilds net/http and the standard library under it: far more than 5 s of compiling
        launch = asyncio.create_task(debug(action="launch", program="slow", env={"GOFLAGS": "-a"}))
        compiling = False
        while not launch.done():
            compiling = compiling or "compile" in _tagged(debug.run)
            await asyncio.sleep(0.05)
        slow = launch.result()
        assert compiling, "the bound ran out before go started a compiler"
        assert (
            slow.is_error
            and "could not launch slow under delve: the launch did not finish within 5 s" in slow.plain
        )
        assert "the time ran out in the build (`GOFLAGS=-a go build -o " in slow.plain, slow.plain
        # the build had the bound but for what ran before it (making the build folder: a moment, longer on
        # a loaded machine), and the two together are the bound
        took = re.search(
            r"-trimpath=false \./slow`\) \(time taken: the build (\d+\.\d) s, other (\d+\.\d) s\)", slow.plain
        )
        assert took, slow.plain
        assert float(took[1]) >= 2.0 and float(took[1]) + float(took[2]) >= 4.9, slow.plain
        assert "debug_launch_timeout bounds the whole launch" in slow.plain
        # while the run is still open: the build and every compiler it started are gone, and what it wrote
        assert _tagged(debug.run) == []
        assert not list(debug.run.private_dir().glob("debug-build-*"))


async def test_the_launch_bound_is_shared_a_slow_build_leaves_the_adapter_only_the_rest(
    go_more, open_debug, no_leftover_processes, tmp_path, monkeypatch
):
    """A long build, then a delve slow to start: each within the bound, together over it."""
    import asyncio
    import re

    bound = 30.0
    # delve reads its configuration before it listens: from a FIFO, it waits until the test writes one
    config = tmp_path / "config"
    (config / "dlv").mkdir(parents=True)
    os.mkfifo(config / "dlv" / "config.yml")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    async with open_debug(go_more, debug_launch_timeout=bound) as debug:
        began = time.monotonic()
        # -a: a real build of seconds (the standard library under fmt, compiled again)
        launch = asyncio.create_task(debug(action="launch", program="loop", env={"GOFLAGS": "-a"}))
        built = None
        while not launch.done():
            if built is None and "dlv" in _tagged(debug.run):
                built = time.monotonic() - began
            if time.monotonic() - began > bound + 1:
                # delve gets its configuration: its start alone took less than the bound
                with contextlib.suppress(OSError):
                    os.close(os.open(config / "dlv" / "config.yml", os.O_WRONLY | os.O_NONBLOCK))
            await asyncio.sleep(0.05)
        said = launch.result()
        elapsed = time.monotonic() - began
        assert built is not None and 1 < built < bound - 1, built
        assert said.is_error and "the time ran out in the delve adapter's start" in said.plain, said.plain
        took = re.search(
            r"time taken: the build ([\d.]+) s, the delve adapter's start ([\d.]+) s", said.plain
        )
        assert took, said.plain
        assert float(took.group(1)) + float(took.group(2)) >= bound - 0.5
        assert elapsed < bound + 10  # not the build's time plus a whole bound more
        assert "debug_launch_timeout bounds the whole launch" in said.plain
        assert _tagged(debug.run) == []


def _tagged(run) -> list[str]:
    """The names of the live processes that carry the run's tag (what it started, and what they started)."""
    import psutil
    from tether.procs import tagged

    names = []
    for proc in tagged(run.id):
        with contextlib.suppress(psutil.Error):
            names.append(proc.name())
    return names


async def test_a_go_launch_cancelled_mid_build_stops_the_build_and_leaves_no_binary(
    go_more, open_debug, no_leftover_processes
):
    import asyncio

    async with open_debug(go_more, debug_launch_timeout=300) as debug:
        # -a rebuilds the standard library too: seconds of compiling, cancelled while go's compilers run
        launch = asyncio.create_task(debug(action="launch", program="loop", env={"GOFLAGS": "-a"}))
        deadline = time.monotonic() + 120
        while "compile" not in _tagged(debug.run):
            assert time.monotonic() < deadline and not launch.done(), "go build never started compiling"
            await asyncio.sleep(0.05)
        launch.cancel()
        await asyncio.gather(launch, return_exceptions=True)
        # while the run is still open: nothing of the build runs on, nothing it wrote is left
        assert _tagged(debug.run) == []
        assert not [p for p in debug.run.private_dir().rglob("*") if p.name != ".owner"]
        assert (await debug.ok(action="status")).plain.startswith("no debug session is running")


async def test_a_go_build_killed_by_a_signal_is_said_as_one(go_more, open_debug, no_leftover_processes):
    import asyncio
    import signal

    import psutil

    async with open_debug(go_more, debug_launch_timeout=300) as debug:
        launch = asyncio.create_task(debug(action="launch", program="loop", env={"GOFLAGS": "-a"}))
        deadline = time.monotonic() + 120
        while not (
            go := [
                p
                for p in psutil.process_iter(["cmdline"])
                if (p.info["cmdline"] or [])[:2] == ["go", "build"]
                and str(debug.run.private_dir()) in " ".join(p.info["cmdline"])
            ]
        ):
            assert time.monotonic() < deadline and not launch.done(), "go build never started"
            await asyncio.sleep(0.05)
        go[0].send_signal(signal.SIGKILL)  # what the OOM killer does
        killed = await launch
        assert killed.is_error and "`GOFLAGS=-a go build -o " in killed.plain
        assert "-trimpath=false ./loop` was killed by SIGKILL" in killed.plain
        assert _tagged(debug.run) == []  # its compilers did not run on
        assert not list(debug.run.private_dir().glob("debug-build-*"))


NOEXEC_LAUNCH = """
import asyncio, json, pathlib, sys
import tether

async def main():
    root = pathlib.Path(sys.argv[1])
    options = {"debug_launch_timeout": 120, "debug_stop_timeout": 60}
    async with tether.open_run(root, conversation_id="c", options=options) as run:
        said = {}
        await run.call("debug", {"action": "breakpoints", "file": "loop/main.go", "lines": [12]})
        said["loop"] = (await run.call("debug", {"action": "launch", "program": "loop"})).plain
        said["scratch"] = [p.name for p in root.glob(".tether-debug-build-*")]
        await run.call("debug", {"action": "terminate"})
        said["left"] = [p.name for p in root.glob(".tether-debug-build-*")]
        said["lib"] = (await run.call("debug", {"action": "launch", "program": "lib"})).plain
    print(json.dumps(said))

asyncio.run(main())
"""


def _under_a_noexec_tmpdir(tmp_path: Path, script: str, root: Path) -> list[str]:
    """The command that runs ``script`` (a Python program, given ``root``) with TMPDIR on a noexec tmpfs."""
    import sys

    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("needs root and unshare to mount a noexec temporary directory")
    noexec = tmp_path / "noexec"
    noexec.mkdir()
    mount = 'mount -t tmpfs -o noexec tmpfs "$1" && TMPDIR="$1" exec "$2" -c "$3" "$4"'
    return [unshare, "--mount", "sh", "-c", mount, "sh", str(noexec), sys.executable, script, str(root)]


def test_a_go_program_builds_and_runs_where_the_temporary_directory_is_noexec(go_more, tmp_path):
    """TMPDIR on a noexec mount: the program is built where it can run, and a library is told by content."""
    import json

    command = _under_a_noexec_tmpdir(tmp_path, NOEXEC_LAUNCH, go_more)
    done = subprocess.run(command, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.splitlines()[-1])
    assert "stopped (breakpoint) at loop/main.go:12" in said["loop"], said["loop"]
    assert len(said["scratch"]) == 1 and said["left"] == []  # in the root while it runs, gone after
    assert "'lib' is a library package (no package main)" in said["lib"]


NOEXEC_HOLD = """
import asyncio, json, pathlib, sys
import tether

async def main():
    root = pathlib.Path(sys.argv[1])
    options = {"debug_launch_timeout": 120, "debug_stop_timeout": 60}
    async with tether.open_run(root, conversation_id="c", options=options) as run:
        await run.call("debug", {"action": "breakpoints", "file": "loop/main.go", "lines": [12]})
        said = (await run.call("debug", {"action": "launch", "program": "loop"})).plain
        print(json.dumps([said, [p.name for p in root.glob(".tether-debug-build-*")]]), flush=True)
        await asyncio.sleep(300)

asyncio.run(main())
"""


def test_the_build_folder_in_the_root_is_removed_when_the_server_is_sigkilled(go_more, tmp_path):
    """The noexec fallback folder in the root is the run's (Run.scratch_dir): a SIGKILL leaves nothing."""
    import json
    import signal

    command = _under_a_noexec_tmpdir(tmp_path, NOEXEC_HOLD, go_more)
    held = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)  # unshare and sh exec: it is python
    try:
        assert held.stdout is not None
        said, folders = json.loads(held.stdout.readline())
        assert "stopped (breakpoint) at loop/main.go:12" in said, said
        assert len(folders) == 1 and (go_more / folders[0]).is_dir()
    finally:
        held.send_signal(signal.SIGKILL)
        held.wait()
    deadline = time.monotonic() + 30
    while list(go_more.glob(".tether-debug-build-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not list(go_more.glob(".tether-debug-build-*"))


async def test_go_trimpath_in_the_launch_env_still_binds_breakpoints(
    go_more, open_debug, no_leftover_processes
):
    async with open_debug(go_more, debug_stop_timeout=60, debug_launch_timeout=120) as debug:
        await debug.ok(action="breakpoints", file="loop/main.go", lines=[12])
        stopped = await debug.ok(action="launch", program="loop", env={"GOFLAGS": "-trimpath"})
        assert (stopped.data["stopped"]["file"], stopped.data["stopped"]["line"]) == ("loop/main.go", 12)
        await debug.ok(action="terminate")


async def test_go_tests_run_in_their_package_directory_as_under_go_test(
    go_more, open_debug, no_leftover_processes
):
    files = {
        "datat/data.go": "package datat\n",
        "datat/testdata/in.txt": "from testdata\n",
        "datat/data_test.go": (
            'package datat\n\nimport (\n\t"os"\n\t"testing"\n)\n\nfunc TestData(t *testing.T) {\n'
            '\tb, err := os.ReadFile("testdata/in.txt")\n\tif err != nil {\n\t\tt.Fatal(err)\n\t}\n'
            "\tt.Log(string(b))\n}\n"
        ),
    }
    write_tree(go_more, files)
    async with open_debug(go_more, debug_stop_timeout=60, debug_launch_timeout=120) as debug:
        ended = await debug.ok(action="launch", program="datat", test=True, args=["-test.v"])
        assert "from testdata" in ended.data["output"] and "PASS" in ended.data["output"], ended.plain
        # a cwd the model names still wins
        elsewhere = await debug.ok(action="launch", program="datat", test=True, cwd="lib")
        assert "no such file or directory" in elsewhere.data["output"], elsewhere.plain


async def test_go_program_in_a_nested_module_builds_in_that_module(
    go_more, open_debug, no_leftover_processes
):
    files = {
        "tools/go.mod": "module example.com/tools\n\ngo 1.19\n",
        "tools/cmd/hello/main.go": 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hello from tools")\n}\n',
        "tools/cmd/bad/main.go": 'package main\n\nfunc main() {\n\tvar x int = "s"\n\t_ = x\n}\n',
    }
    write_tree(go_more, files)
    async with open_debug(go_more, debug_stop_timeout=60, debug_launch_timeout=120) as debug:
        await debug.ok(action="breakpoints", file="tools/cmd/hello/main.go", lines=[6])
        stopped = await debug.ok(action="launch", program="tools/cmd/hello")
        assert (stopped.data["stopped"]["file"], stopped.data["stopped"]["line"]) == (
            "tools/cmd/hello/main.go",
            6,
        )
        ended = await debug.ok(action="continue")
        assert "hello from tools" in ended.data["output"]
        bad = await debug.err(action="launch", program="tools/cmd/bad")
    # go's own words, its paths relative to the root, the command as run from it
    assert "`cd tools && go build -o " in bad.plain and "-trimpath=false ./cmd/bad`" in bad.plain
    assert "tools/cmd/bad/main.go:4:14: cannot use" in bad.plain and str(go_more) not in bad.plain


async def test_go_tests_of_a_package_without_any_are_refused(go_more, open_debug, no_leftover_processes):
    async with open_debug(go_more, debug_launch_timeout=60) as debug:
        none = await debug.err(action="launch", program="loop", test=True)
    assert "could not launch loop under delve: ./loop has no test files" in none.plain


async def test_go_build_in_a_run_that_does_not_trust_its_root_downloads_nothing(
    tmp_path, open_debug, no_leftover_processes
):
    require_binary("dlv")
    require_binary("go")
    (tmp_path / "go.mod").write_text("module example.com/u\n\ngo 1.19\n")
    (tmp_path / "main.go").write_text(
        'package main\n\nimport "example.com/nosuch"\n\nfunc main() { nosuch.F() }\n'
    )
    (tmp_path / "typo" / "main.go").parent.mkdir()
    (tmp_path / "typo" / "main.go").write_text(
        'package main\n\nfunc main() {\n\tvar x int = "s"\n\t_ = x\n}\n'
    )
    async with open_debug(tmp_path, trust=False, debug_launch_timeout=60) as debug:
        # -mod=mod would look the module up; the untrusted run's GOPROXY=off forbids it, also over
        # a GOPROXY of the launch's own env
        env = {"GOFLAGS": "-mod=mod", "GOPROXY": "https://proxy.golang.org"}
        failed = await debug.err(action="launch", program=".", env=env)
        # a build error of the code itself is not blamed on the variables
        typo = await debug.err(action="launch", program="typo")
    assert "module lookup disabled by GOPROXY=off" in failed.plain
    assert "GOTOOLCHAIN=local GOPROXY=off GOVCS=*:off: nothing is downloaded" in failed.plain
    assert "cannot use" in typo.plain and "does not trust its root" not in typo.plain


async def test_go_bad_condition_unsupported_hit_count_and_no_exception_filters(
    go_more, open_debug, no_leftover_processes
):
    async with open_debug(go_more, debug_stop_timeout=60, debug_launch_timeout=120) as debug:
        await debug.ok(
            action="breakpoints",
            file="loop/main.go",
            points=[{"line": 6, "hit_condition": "3"}, {"line": 12, "condition": "i == ((("}, {"line": 14}],
        )
        await debug.ok(action="breakpoints", exceptions="raised")
        stopped = await debug.ok(action="launch", program="loop")
        # delve refuses the condition itself: its message, the breakpoint unverified, the others hold
        assert "line 12 (if i == ((() not verified: 1:" in stopped.plain
        assert (
            "line 6 (hits 3) verified (hit_condition not supported by this adapter: not sent)"
            in stopped.plain
        )
        assert stopped.data["stopped"]["line"] == 6  # no hit count: the first hit stops
        status = await debug.ok(action="status")
        assert (
            "exceptions=raised: the delve adapter offers no exception filters (an unrecovered panic stops"
            in status.plain
        )
        rows = {r["requested"]: r for r in status.data["breakpoints"]["files"][0]["breakpoints"]}
        assert rows[12]["verified"] is False and rows[6]["unsupported"] == ["hit_condition"]
        assert (await debug.ok(action="evaluate", expression="i")).data[
            "result"
        ] == "0"  # the session is alive
