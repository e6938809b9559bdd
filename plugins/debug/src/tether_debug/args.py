"""The `debug` tool's arguments: one action and what each action takes.

Kept apart from the tool (`tether_debug.tools`) and its handler (`tether_debug.dispatch`), so the modules that act on them import the
argument types without importing the tool.
"""

from __future__ import annotations

from typing import Literal

import attrs
from tether import arg

Action = Literal[
    "adapters",
    "status",
    "breakpoints",
    "launch",
    "attach",
    "continue",
    "pause",
    "step_over",
    "step_in",
    "step_out",
    "threads",
    "stack",
    "scopes",
    "variables",
    "evaluate",
    "output",
    "terminate",
]


@attrs.frozen
class LinePoint:
    line: int = arg("1-based line number", minimum=1)
    condition: str | None = arg(
        "stop only when this expression (in the program's language) is true, e.g. 'i == 3'",
        default=None,
        min_length=1,
    )
    hit_condition: str | None = arg(
        "stop only at these hits, in the adapter's syntax: '3' (debugpy, lldb: the 3rd hit on), '>=3', '%2' (debugpy)",
        default=None,
        min_length=1,
    )
    log_message: str | None = arg(
        "a logpoint: print this line instead of stopping, with {expression} interpolated, e.g. 'i={i}'",
        default=None,
        min_length=1,
    )


@attrs.frozen
class DebugArgs:
    action: Action = arg(
        "what to do; the other arguments are needed only by the actions that name them"
    )  # arg() declares an attrs field
    program: str | None = arg(
        "launch: the program to debug (a .py file or python script, a native binary, a Go package dir, .go file or Go binary), relative to the root",
        default=None,
    )
    args: list[str] | None = arg(
        "launch: command-line arguments for the program", default=None
    )  # arg() declares an attrs field
    module: str | None = arg(
        "launch: a Python module to run instead of a program (`python -m pytest` is module='pytest', args=[...])",
        default=None,
        min_length=1,
    )
    test: bool = arg(
        "launch: Go: debug the package's tests (delve's test mode; args such as ['-test.run', 'TestX'])",
        default=False,
    )
    cwd: str | None = arg(
        "launch: the program's working directory, relative to the root (default: the root)", default=None
    )
    env: dict[str, str] | None = arg(
        "launch: environment variables added for the program", default=None
    )  # arg() declares an attrs field
    stop_on_entry: bool = arg("launch: stop at the program's first line before running", default=False)
    restart: bool = arg(
        "launch: end the live session (if any) and start again; program/args/module/test/cwd/env default to the last launch's",
        default=False,
    )
    adapter: str | None = arg(
        "launch/attach: force an adapter id (see action='adapters'); default: chosen from the program",
        default=None,
    )
    port: int | None = arg(
        "attach: the local port a debugger listens on", default=None, minimum=1, maximum=65535
    )
    pid: int | None = arg(
        "attach: the id of a running native process to attach lldb to", default=None, minimum=1
    )
    file: str | None = arg("breakpoints: the source file, relative to the root", default=None)
    lines: list[int] | None = arg(
        "breakpoints: 1-based line numbers; an empty list clears the file's breakpoints", default=None
    )  # arg() declares an attrs field
    points: list[LinePoint] | None = arg(
        "breakpoints: lines of file with a condition, hit_condition or log_message (with or instead of lines)",
        default=None,
    )  # arg() declares an attrs field
    functions: list[str] | None = arg(
        "breakpoints: function names to stop in (Go: qualified, e.g. 'main.add'); replaces the last list, [] clears",
        default=None,
    )  # arg() declares an attrs field
    exceptions: Literal["none", "uncaught", "raised"] | None = arg(
        "breakpoints: when to stop on exceptions (default 'uncaught')", default=None
    )
    thread_id: int | None = arg(
        "continue/pause/step_*/stack: the thread (default: the thread that stopped)", default=None
    )
    frame_id: int | None = arg("scopes/evaluate: a frame id from 'stack' at the current stop", default=None)
    reference: int | None = arg(
        "variables: a reference from 'scopes' or from a variable with children", default=None, minimum=1
    )
    expression: str | None = arg(
        "evaluate: the expression, evaluated in the frame's scope (an assignment 'name = value' sets a variable)",
        default=None,
        min_length=1,
    )
