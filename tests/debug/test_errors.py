"""Bad input to the debug tool: one clear paragraph each, no traceback, no hang, the session unharmed."""

from __future__ import annotations

import socket

import pytest


@pytest.mark.parametrize(
    "action, extra",
    [
        ("continue", {}),
        ("pause", {}),
        ("step_over", {}),
        ("step_in", {}),
        ("step_out", {}),
        ("threads", {}),
        ("stack", {}),
        ("scopes", {"frame_id": 1}),
        ("variables", {"reference": 1}),
        ("evaluate", {"expression": "1"}),
        ("terminate", {}),
        ("output", {}),
    ],
)
async def test_operations_without_a_session(debug, action, extra):
    result = await debug.err(action=action, **extra)
    assert "no debug session is running" in result.plain
    assert "action='launch'" in result.plain
    assert result.data["error"] == "no_session"


async def test_status_without_a_session_is_not_an_error(debug):
    result = await debug.ok(action="status")
    assert result.data["session"] is None and "no debug session" in result.plain


async def test_unknown_program(debug):
    result = await debug.err(action="launch", program="nope.py")
    assert "no such program: 'nope.py'" in result.plain
    assert result.data["error"] == "no_program"
    assert debug.supervisor.sessions == {}


async def test_launch_needs_a_program(debug):
    result = await debug.err(action="launch")
    assert "needs program" in result.plain


async def test_program_outside_the_root(debug):
    result = await debug.err(action="launch", program="../elsewhere.py")
    assert "outside the root" in result.plain


async def test_program_no_adapter_handles(debug, pyproject):
    (pyproject / "notes.txt").write_text("hello\n")
    result = await debug.err(action="launch", program="notes.txt")
    assert "no debug adapter handles 'notes.txt'" in result.plain


async def test_adapter_without_its_marker_is_refused_with_the_reason(debug, pyproject):
    (pyproject / "main.go").write_text("package main\n\nfunc main() {}\n")
    result = await debug.err(action="launch", program="main.go")
    assert "delve adapter cannot start here" in result.plain and "go.mod" in result.plain
    assert result.data["error"] == "adapter_unavailable"


async def test_unknown_forced_adapter(debug):
    result = await debug.err(action="launch", program="app.py", adapter="gdb")
    assert "unknown adapter 'gdb'" in result.plain and "debugpy" in result.plain


async def test_breakpoints_in_a_missing_file(debug):
    result = await debug.err(action="breakpoints", file="missing.py", lines=[3])
    assert "no such file: 'missing.py'" in result.plain


async def test_breakpoints_need_file_and_lines(debug):
    result = await debug.err(action="breakpoints", file="app.py")
    assert "needs file" in result.plain and "lines" in result.plain


async def test_breakpoint_on_a_line_with_no_code(debug):
    blank = await debug.err(action="breakpoints", file="app.py", lines=[2])
    assert "no code on line(s) 2 (next line with code: 4)" in blank.plain
    assert blank.data == {"error": "no_code", "lines": [2]}
    beyond = await debug.err(action="breakpoints", file="app.py", lines=[5, 400])
    assert "400" in beyond.plain and "has 18 lines" in beyond.plain
    status = await debug.ok(action="status")  # nothing was kept from the refused calls
    assert status.data["breakpoints"]["files"] == []


async def test_comment_line_is_no_code(debug, pyproject, write_files):
    write_files(pyproject, {"c.py": "x = 1\n# just a comment\ny = 2\n"})
    result = await debug.err(action="breakpoints", file="c.py", lines=[2])
    assert "no code on line(s) 2 (next line with code: 3)" in result.plain


async def test_frame_id_and_reference_from_an_old_stop(debug):
    await debug.ok(action="breakpoints", file="app.py", lines=[5, 14])
    await debug.ok(action="launch", program="app.py")
    frames = (await debug.ok(action="stack")).data["frames"]
    old_frame = frames[0]["id"]  # add(): gone once it returned
    scopes = await debug.ok(action="scopes", frame_id=old_frame)
    old_ref = scopes.data["scopes"][0]["reference"]
    await debug.ok(action="continue")
    stale = await debug.err(action="scopes", frame_id=old_frame)
    assert (
        f"frame_id {old_frame} is not a frame of the current stop" in stale.plain
        and "action='stack'" in stale.plain
    )
    assert stale.data["error"] == "stale_frame"
    stale_eval = await debug.err(action="evaluate", expression="a", frame_id=old_frame)
    assert "not a frame of the current stop" in stale_eval.plain
    stale_ref = await debug.err(action="variables", reference=old_ref)
    assert f"reference {old_ref} is not from the current stop" in stale_ref.plain
    # the session is unharmed: the current stop still answers
    fresh = (await debug.ok(action="stack")).data["frames"][0]
    assert (fresh["name"], fresh["line"]) == ("main", 14)


async def test_per_action_arguments_are_required(debug):
    await debug.ok(action="breakpoints", file="app.py", lines=[13])
    await debug.ok(action="launch", program="app.py")
    assert "needs frame_id" in (await debug.err(action="scopes")).plain
    assert "needs reference" in (await debug.err(action="variables")).plain
    assert "needs expression" in (await debug.err(action="evaluate")).plain


async def test_bad_argument_types_are_rejected_by_the_schema(debug):
    result = await debug(action="launch", program="app.py", args="--flag")
    assert result.is_error and "args" in result.plain
    unknown = await debug(action="explode")
    assert unknown.is_error and "action" in unknown.plain


async def test_attach_to_a_port_nobody_listens_on(debug):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = await debug.err(action="attach", port=port)
    assert f"could not attach to port {port}" in result.plain and "debugpy --listen" in result.plain
    assert debug.supervisor.sessions == {}


async def test_attach_needs_a_port(debug):
    assert "needs port" in (await debug.err(action="attach")).plain


async def test_program_with_a_syntax_error_ends_with_its_traceback(debug, pyproject, write_files):
    write_files(pyproject, {"broken.py": "def f(:\n    pass\n"})
    result = await debug.ok(action="launch", program="broken.py")
    assert result.data["ended"]["exit_code"] not in (0, None)
    assert "SyntaxError" in result.data["output"]
