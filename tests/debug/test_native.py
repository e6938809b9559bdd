"""C through lldb-dap and Go through delve: breakpoint, stack, variables, stepping, output, teardown."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support import require_binary

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
    (root / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.10)\nproject(demo C)\nadd_executable(demo main.c)\n")
    (root / "main.c").write_text(C_SOURCE)
    subprocess.run([gcc, "-g", "-O0", "-o", str(root / "demo"), str(root / "main.c")], check=True, timeout=60)
    (root / "crash.c").write_text('#include <stdio.h>\nint main(void) {\n    int *p = 0;\n    puts("before");\n    *p = 42;\n    return 0;\n}\n')
    subprocess.run([gcc, "-g", "-O0", "-o", str(root / "crash"), str(root / "crash.c")], check=True, timeout=60)
    return root


@pytest.fixture(scope="module")
def go_project(tmp_path_factory) -> Path:
    require_binary("dlv")
    require_binary("go")
    root = tmp_path_factory.mktemp("goproj")
    (root / "go.mod").write_text("module example.com/demo\n\ngo 1.19\n")
    (root / "main.go").write_text(GO_SOURCE)
    (root / "panicky").mkdir()
    (root / "panicky" / "main.go").write_text('package main\n\nfunc main() {\n\tvar m map[string]int\n\tm["x"] = 1\n}\n')
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
        assert [(f["name"], f["file"], f["line"]) for f in frames[:2]] == [("add", "main.c", 6), ("main", "main.c", 13)]
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
        main_locals = _by_name(await debug.ok(action="variables", reference=main_scopes.data["scopes"][0]["reference"]))
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
