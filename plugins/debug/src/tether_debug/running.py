"""Actions that let the program run: launch, attach, continue/step/pause, and what came of it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tether import ToolError, ToolResult

from tether_debug.adapters import adapter_table, handles_safely
from tether_debug.breakpoints import bp_summary
from tether_debug.options import attach_wait, launch_timeout, request_timeout, stop_timeout, ttl
from tether_debug.render import cap_output, ended_words, stop_result

if TYPE_CHECKING:
    from tether.run import CallContext, Run

    from tether_debug.session import Session
    from tether_debug.supervisor import DebugSupervisor
    from tether_debug.tool import DebugArgs


def refuse_second(run: Run, session: Session) -> ToolError:
    age = (time.monotonic() - session.started) / 60
    where = f", stopped at {run.relpath(session.stop.file)}:{session.stop.line}" if session.stop and session.stop.file else ""
    return ToolError(
        f"a debug session is already running in this conversation ({session.program}, started {age:.1f} min ago{where}); "
        "a second launch/attach does not replace it. End it first with action='terminate', then launch again.",
        data={"error": "session_exists", "program": session.program},
    )


def pick_adapter(run: Run, program: Path, forced: str | None):
    known = adapter_table(run)
    if forced is not None:
        if forced not in known:
            raise ToolError(f"unknown adapter '{forced}'; known adapters: {', '.join(known)}. See action='adapters'.")
        return known[forced]
    for adapter in known.values():
        if handles_safely(adapter, program):
            return adapter
    raise ToolError(
        f"no debug adapter handles '{run.relpath(program)}': give a .py file (debugpy), a native binary built with -g (lldb), "
        "a Go package directory or .go file (delve), or a .dart file; or force one with adapter='<id>'.",
        data={"error": "no_adapter"},
    )


async def launch(ctx: CallContext, supervisor: DebugSupervisor, conversation: str, session: Session | None, args: DebugArgs) -> ToolResult:
    from tether_debug.dap import DapError
    from tether_debug.session import Session, SessionError

    run = ctx.run
    if session is not None:
        raise refuse_second(run, session)
    if not args.program:
        raise ToolError("action='launch' needs program: the file to debug, relative to the root (e.g. 'app.py').")
    program = run.resolve_path(args.program)
    if not program.exists():
        raise ToolError(
            f"no such program: '{args.program}' (paths are relative to the root). Build it first, or check the name.",
            data={"error": "no_program"},
        )
    adapter = pick_adapter(run, program, args.adapter)
    availability = adapter.availability(run.root)
    if not availability.usable or availability.located is None:
        raise ToolError(
            f"the {adapter.id} adapter cannot start here: {availability.reason}. See action='adapters'.",
            data={"error": "adapter_unavailable", "adapter": adapter.id},
        )
    new = Session(adapter, conversation_id=conversation, ttl=ttl(run), request_timeout=request_timeout(run))
    new.program = run.relpath(program)
    new.root = run.root
    timeout = launch_timeout(run)
    try:
        await new.start(availability.located, run.root, run, timeout)
        await new.initialize()
        config = adapter.launch_config(program, list(args.args or ()), run.root, availability.located)
        await new.configure("launch", config, dict(supervisor.pending_for(conversation)), timeout)
        outcome = await new.wait_stop(0, stop_timeout(run))
    except (SessionError, DapError) as exc:
        output, _ = new.output.take()
        await new.close()
        message = exc.message if isinstance(exc, DapError) else str(exc)
        more = f"\nprogram output:\n{cap_output(output, 0)[0]}" if output.strip() else ""
        raise ToolError(
            f"could not launch {run.relpath(program)} under {adapter.id}: {message}{more}",
            data={"error": "launch_failed", "adapter": adapter.id},
        ) from None
    except BaseException:
        await asyncio.shield(new.close())
        raise
    supervisor.adopt(new)
    return await after_run(run, supervisor, conversation, new, outcome, prefix=bp_summary(run, new))


async def attach(ctx: CallContext, supervisor: DebugSupervisor, conversation: str, session: Session | None, args: DebugArgs) -> ToolResult:
    from tether_debug.dap import DapError
    from tether_debug.session import Session, SessionError

    run = ctx.run
    if session is not None:
        raise refuse_second(run, session)
    if args.port is None:
        raise ToolError("action='attach' needs port: the local port a debugger listens on (e.g. from `python -m debugpy --listen 127.0.0.1:5678`).")
    known = adapter_table(run)
    adapter = known.get(args.adapter or "debugpy")
    if adapter is None or adapter.attach_config is None:
        can = [a.id for a in known.values() if a.attach_config is not None]
        raise ToolError(f"adapter '{args.adapter}' cannot attach; adapters that can: {', '.join(can)}.")
    new = Session(adapter, conversation_id=conversation, ttl=ttl(run), request_timeout=request_timeout(run))
    new.program = f"process on port {args.port}"
    new.root = run.root
    timeout = launch_timeout(run)
    try:
        await new.connect("127.0.0.1", args.port, min(timeout, 10.0))
        await new.initialize()
        await new.configure("attach", adapter.attach_config(args.port), dict(supervisor.pending_for(conversation)), timeout)
        # an attached program usually keeps running: wait briefly for a breakpoint, not the full bound
        outcome = await new.wait_stop(0, min(stop_timeout(run), attach_wait(run)))
    except (SessionError, DapError) as exc:
        await new.close()
        message = exc.message if isinstance(exc, DapError) else str(exc)
        raise ToolError(f"could not attach to port {args.port}: {message}", data={"error": "attach_failed"}) from None
    except BaseException:
        await asyncio.shield(new.close())
        raise
    supervisor.adopt(new)
    prefix = f"attached to the process on port {args.port}.\n" + bp_summary(run, new)
    return await after_run(run, supervisor, conversation, new, outcome, prefix=prefix)


async def after_run(run: Run, supervisor: DebugSupervisor, conversation: str, session: Session, outcome, prefix: str = "") -> ToolResult:
    """The result of anything that let the program run: a stop, the end (session closed), or still running."""
    from tether_debug.session import Ended

    if outcome is None:
        bound = stop_timeout(run)
        return ToolResult.text(
            prefix + f"the program is running and has not stopped (waited up to {bound:g} s). Use action='pause' to stop it, "
            "'status' to check, or 'output' to read what it printed.",
            data={"stopped": None, "running": True},
        )
    if isinstance(outcome, Ended):
        await supervisor.end(conversation, session)  # first: output still in flight arrives while it closes
        output, dropped = session.output.take()
        shown, cut = cap_output(output, dropped)
        supervisor.remember_end(conversation, session, outcome, "", 0)
        text = prefix + f"{ended_words(outcome)}; the debug session is over."
        text += f"\noutput:\n{shown}" if shown.strip() else "\n(no output)"
        return ToolResult.text(
            text, data={"stopped": None, "ended": {"exit_code": outcome.exit_code, "how": outcome.how}, "output": shown, "cut": cut}
        )
    return stop_result(run, session, outcome, prefix)


async def resume(run: Run, supervisor: DebugSupervisor, conversation: str, session: Session, command: str, thread_id: int | None, need_stop: bool) -> ToolResult:
    assert session.client is not None
    if need_stop and session.stop is None:
        raise ToolError(
            f"the program is running, so there is nothing to {command}; use action='pause' to stop it first.",
            data={"error": "running"},
        )
    if not need_stop and session.stop is not None:
        return stop_result(run, session, session.stop, prefix="already stopped; nothing to pause.\n")
    thread = thread_id if thread_id is not None else (session.stop.thread_id if session.stop else None)
    if thread is None:
        threads = (await session.client.request("threads")).get("threads") or []
        if not threads:
            raise ToolError("the program has no threads to act on; it may have ended. Use action='status'.")
        thread = threads[0]["id"]
    after = len(session.client.events)
    await session.client.request(command, {"threadId": thread})
    session.stop = None
    session.frames = {}
    session.references = set()
    outcome = await session.wait_stop(after, stop_timeout(run))
    return await after_run(run, supervisor, conversation, session, outcome)
