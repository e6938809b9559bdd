"""The `debug` tool: its arguments, and the handler that dispatches one action at a time.

Imported when tools are registered, so it stays light: the actions (`inspection`, `running`,
`breakpoints`), sessions and the DAP client load on the first call. Every wait on the adapter is
bounded (see `tether_debug.options`); every result is bounded and says what it cut.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import attrs
from tether import Text, ToolError, ToolResult, arg

from tether_debug.hookspecs import tether_debug_supervisor

if TYPE_CHECKING:
    from tether.run import CallContext, Run

    from tether_debug.session import Session
    from tether_debug.supervisor import DebugSupervisor

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

DESCRIPTION = (
    "Drive a real debugger (Debug Adapter Protocol: debugpy for Python, lldb-dap for C/C++/Rust binaries, "
    "delve for Go, dart) - one session per conversation. Typical use: action='breakpoints' (file, lines; or "
    "points=[{line, condition, hit_condition, log_message}] for conditional breakpoints and logpoints; "
    "functions=[...] for function breakpoints; exceptions='none'|'uncaught'|'raised') then action='launch' "
    "(program, args; or module='pytest' for `python -m pytest`; test=true for Go tests; stop_on_entry) which "
    "runs to the first stop and says where it stopped, with the top frame's locals; "
    "then 'stack', 'scopes' (frame_id), 'variables' (reference), 'evaluate' (expression, frame_id; an "
    "assignment such as 'x = 5' sets a variable); 'step_over'/'step_in'/'step_out'/'continue'/'pause' each "
    "wait for the next stop and return it with its locals and any logpoint lines; "
    "'output' gives the program's stdout/stderr since the last read; 'terminate' ends the session; "
    "launch with restart=true starts the same program again with the same breakpoints. "
    "'adapters' lists which debuggers are usable in this project and why not; 'status' says where it "
    "stopped and lists every breakpoint (verified, the line it bound to); 'attach' connects to a program "
    "already listening for a debugger (port: python -m debugpy --listen 127.0.0.1:PORT) or to a running "
    "native process (pid, lldb). A second launch while a session lives is refused: terminate first (or "
    "restart=true). Sessions end after a time limit (30 min by default)."
)


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


async def handle(ctx: CallContext, args: DebugArgs) -> ToolResult:
    from tether_debug.dap import DapError

    run = ctx.run
    supervisor = run.resource(tether_debug_supervisor)
    conversation = run.conversation_id or ""
    action = args.action
    session = supervisor.session(conversation)
    note = supervisor.take_note(conversation)
    try:
        caught = None
        if session is not None and session.stop is None and action not in ("output", "adapters"):
            # the program stopped or ended while nobody waited (a wait gave up): that comes first
            caught = await _caught_up(run, supervisor, conversation, session)
            session = supervisor.session(conversation)
        if caught is not None and action not in ("status", "breakpoints", "launch", "attach"):
            what = "ended" if caught.data and caught.data.get("ended") else "stopped"
            prefix = (
                f"the program {what} while running, before this '{action}' call, which was not carried out:\n"
            )
            result = ToolResult((Text(prefix), *caught.content), caught.is_error, caught.data)
        elif caught is not None and action == "status":
            result = caught
        else:
            result = await _dispatch(ctx, supervisor, conversation, session, args, note)
            if caught is not None:
                result = ToolResult(
                    (*caught.content, Text("\n"), *result.content), result.is_error, result.data
                )
    except DapError as exc:
        raise ToolError(
            f"the {action} request failed in the debug adapter: {exc.message}",
            data={"error": "adapter", "command": exc.command},
        ) from None
    except ToolError as exc:
        if note:
            raise ToolError(f"{note}\n{exc.message}", data=exc.data) from None
        raise
    if note:
        result = ToolResult(
            (Text(note + "\n"), *result.content), result.is_error, {**(result.data or {}), "note": note}
        )
    return result


async def _dispatch(
    ctx: CallContext,
    supervisor: DebugSupervisor,
    conversation: str,
    session: Session | None,
    args: DebugArgs,
    note: str | None,
) -> ToolResult:
    from tether_debug.breakpoints import breakpoints_action
    from tether_debug.inspection import adapters_action, output_action, status_action
    from tether_debug.render import no_session
    from tether_debug.running import attach, launch

    run, action = ctx.run, args.action
    if action == "adapters":
        return adapters_action(run)
    if action == "status":
        return await status_action(run, supervisor, conversation, session)
    if action == "breakpoints":
        return await breakpoints_action(run, supervisor, conversation, session, args)
    if action == "launch":
        return await launch(ctx, supervisor, conversation, session, args)
    if action == "attach":
        return await attach(ctx, supervisor, conversation, session, args)
    if action == "output":
        return output_action(supervisor, conversation, session)
    if session is None:
        raise no_session(action, supervisor, conversation, note)
    async with session.lock:
        return await _in_session(run, supervisor, conversation, session, args)


async def _caught_up(
    run: Run, supervisor: DebugSupervisor, conversation: str, session: Session
) -> ToolResult | None:
    """A stop or an end that arrived after the last wait gave up (a program left running), as a result."""
    from tether_debug.running import after_run

    async with session.lock:
        outcome = await session.wait_stop(session.consumed, 0)
        if outcome is None:
            return None
        return await after_run(run, supervisor, conversation, session, outcome)


async def _in_session(
    run: Run, supervisor: DebugSupervisor, conversation: str, session: Session, args: DebugArgs
) -> ToolResult:
    from tether_debug.inspection import (
        evaluate_action,
        scopes_action,
        stack_action,
        threads_action,
        variables_action,
    )
    from tether_debug.running import resume
    from tether_debug.session import Ended

    action = args.action
    if action == "terminate":
        output, dropped = session.output.take()
        await supervisor.end(conversation, session)
        supervisor.remember_end(
            conversation, session, Ended(session.exit_code, "was terminated"), output, dropped
        )
        return ToolResult.text(
            f"debug session ended: {session.program} and its adapter were stopped."
            + (" Unread output is still available with action='output'." if output.strip() else ""),
            data={"terminated": True},
        )
    if action == "pause":
        return await resume(run, supervisor, conversation, session, "pause", args.thread_id, need_stop=False)
    if action in ("continue", "step_over", "step_in", "step_out"):
        command = {"continue": "continue", "step_over": "next", "step_in": "stepIn", "step_out": "stepOut"}[
            action
        ]
        return await resume(run, supervisor, conversation, session, command, args.thread_id, need_stop=True)
    if action == "threads":
        return await threads_action(session)
    if session.stop is None:
        raise ToolError(
            f"'{action}' needs the program to be stopped, and it is running. Use action='pause' first (or set a breakpoint and wait).",
            data={"error": "running"},
        )
    if action == "stack":
        return await stack_action(run, session, args.thread_id)
    if action == "scopes":
        return await scopes_action(session, args.frame_id)
    if action == "variables":
        return await variables_action(session, args.reference)
    if action == "evaluate":
        return await evaluate_action(run, session, args.expression, args.frame_id)
    raise ToolError(f"unknown action '{action}'")  # unreachable: the Literal argument guards it
