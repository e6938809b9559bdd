"""The `debug` tool's handler: one action at a time, in the conversation's session.

Loaded at the first call of the handler `tools.make_tools` binds to the run's supervisor, with
every action module: the per-call imports cost ~8 us of a 0.5 ms stack + scopes + variables round
on lldb. Every wait on the adapter is bounded
(see `tether_debug.options`); every result is bounded and says what it cut.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether import Text, ToolError, ToolResult

from tether_debug.args import DebugArgs
from tether_debug.breakpoints import breakpoints_action
from tether_debug.dap import DapError
from tether_debug.inspection import (
    adapters_action,
    evaluate_action,
    output_action,
    scopes_action,
    stack_action,
    status_action,
    threads_action,
    variables_action,
)
from tether_debug.render import no_session
from tether_debug.running import after_run, attach, launch, resume
from tether_debug.session import Ended, Session

if TYPE_CHECKING:
    from tether.run import CallContext, Run

    from tether_debug.supervisor import DebugSupervisor


async def handle(ctx: CallContext, supervisor: DebugSupervisor, args: DebugArgs) -> ToolResult:
    """One call of the tool, in the session ``supervisor`` holds for the call's conversation."""
    run = ctx.run
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
            code="adapter",
            command=exc.command,
        ) from None
    except ToolError as exc:
        if note:
            fields = {k: v for k, v in (exc.data or {}).items() if k != "error"}
            raise ToolError(f"{note}\n{exc.message}", code=exc.code, **fields) from None
        raise
    if note:
        result = ToolResult(
            (Text(note + "\n"), *result.content), result.is_error, {**(result.data or {}), "note": note}
        )
    from tether.sandbox import egress_notes

    if blocked := egress_notes(run):  # what the sandbox's egress proxy refused the program since
        result = ToolResult((*result.content, Text("\n" + "\n".join(blocked))), result.is_error, result.data)
    return result


async def _dispatch(
    ctx: CallContext,
    supervisor: DebugSupervisor,
    conversation: str,
    session: Session | None,
    args: DebugArgs,
    note: str | None,
) -> ToolResult:
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
    async with session.lock:
        outcome = await session.wait_stop(session.consumed, 0)
        if outcome is None:
            return None
        return await after_run(run, supervisor, conversation, session, outcome)


async def _in_session(
    run: Run, supervisor: DebugSupervisor, conversation: str, session: Session, args: DebugArgs
) -> ToolResult:
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
            code="running",
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
