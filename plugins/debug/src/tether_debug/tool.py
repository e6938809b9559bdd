"""The `debug` tool: its arguments, and the handler that dispatches one action at a time.

Imported when tools are registered, so it stays light: sessions and the DAP client load on first use.
Every wait on the adapter is bounded (run options `debug_stop_timeout`, `debug_launch_timeout`,
`debug_request_timeout`, `debug_ttl`); every result is bounded and says what it cut.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
from tether import Text, ToolError, ToolResult, arg

if TYPE_CHECKING:
    from tether.run import CallContext, Run

    from tether_debug.session import Ended, Session, Stop
    from tether_debug.supervisor import DebugSupervisor

Action = Literal[
    "adapters", "status", "breakpoints", "launch", "attach", "continue", "pause", "step_over", "step_in",
    "step_out", "threads", "stack", "scopes", "variables", "evaluate", "output", "terminate",
]

log = logging.getLogger("tether.debug")

MAX_THREADS = 50
MAX_FRAMES = 30
MAX_VARIABLES = 50
MAX_VALUE = 400
MAX_EVAL = 2000
MAX_OUTPUT = 8000
MAX_LINES = 200

DESCRIPTION = (
    "Drive a real debugger (Debug Adapter Protocol: debugpy for Python, lldb-dap for C/C++/Rust binaries, "
    "delve for Go, dart) - one session per conversation. Typical use: action='breakpoints' (file, lines) "
    "then action='launch' (program, args) which runs to the first breakpoint and says where it stopped; "
    "then 'stack', 'scopes' (frame_id), 'variables' (reference), 'evaluate' (expression, frame_id); "
    "'step_over'/'step_in'/'step_out'/'continue'/'pause' each wait for the next stop and return it; "
    "'output' gives the program's stdout/stderr since the last read; 'terminate' ends the session. "
    "'adapters' lists which debuggers are usable in this project and why not; 'status' says where it "
    "stopped; 'attach' (port) connects to a program already listening for a debugger "
    "(python -m debugpy --listen 127.0.0.1:PORT). A second launch while a session lives is refused: "
    "terminate first. Sessions end after a time limit (30 min by default)."
)


@attrs.frozen
class DebugArgs:
    action: Action = arg("what to do; the other arguments are needed only by the actions that name them")  # noqa: RUF009 - arg() declares an attrs field
    program: str | None = arg("launch: the program to debug (a .py file, a native binary, a Go package dir or .go file), relative to the root", default=None)
    args: list[str] | None = arg("launch: command-line arguments for the program", default=None)  # noqa: RUF009 - arg() declares an attrs field
    adapter: str | None = arg("launch/attach: force an adapter id (see action='adapters'); default: chosen from the program", default=None)
    port: int | None = arg("attach: the local port a debugger listens on", default=None, minimum=1, maximum=65535)
    file: str | None = arg("breakpoints: the source file, relative to the root", default=None)
    lines: list[int] | None = arg("breakpoints: 1-based line numbers; an empty list clears the file's breakpoints", default=None)  # noqa: RUF009 - arg() declares an attrs field
    thread_id: int | None = arg("continue/pause/step_*/stack: the thread (default: the thread that stopped)", default=None)
    frame_id: int | None = arg("scopes/evaluate: a frame id from 'stack' at the current stop", default=None)
    reference: int | None = arg("variables: a reference from 'scopes' or from a variable with children", default=None, minimum=1)
    expression: str | None = arg("evaluate: the expression, evaluated in the frame's scope", default=None, min_length=1)


# -- options -------------------------------------------------------------------------------------------


def _opt(run: Run, name: str, default: float) -> float:
    try:
        return float(run.options.get(name, default))
    except (TypeError, ValueError):
        return default


def _stop_timeout(run: Run) -> float:
    return _opt(run, "debug_stop_timeout", 30.0)


def _launch_timeout(run: Run) -> float:
    return _opt(run, "debug_launch_timeout", 60.0)


def _request_timeout(run: Run) -> float:
    return _opt(run, "debug_request_timeout", 10.0)


def _ttl(run: Run) -> float:
    from tether_debug.supervisor import DEFAULT_TTL

    return _opt(run, "debug_ttl", DEFAULT_TTL)


# -- entry -------------------------------------------------------------------------------------------


async def handle(ctx: CallContext, args: DebugArgs) -> ToolResult:
    from tether_debug.dap import DapError

    run = ctx.run
    supervisor: DebugSupervisor = run.resource("tether_debug_supervisor")
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
            prefix = f"the program {what} while running, before this '{action}' call, which was not carried out:\n"
            result = ToolResult((Text(prefix), *caught.content), caught.is_error, caught.data)
        elif caught is not None and action == "status":
            result = caught
        else:
            result = await _dispatch(ctx, supervisor, conversation, session, args, note)
            if caught is not None:
                result = ToolResult((*caught.content, Text("\n"), *result.content), result.is_error, result.data)
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
        result = ToolResult((Text(note + "\n"), *result.content), result.is_error, {**(result.data or {}), "note": note})
    return result


async def _dispatch(
    ctx: CallContext, supervisor: DebugSupervisor, conversation: str, session: Session | None, args: DebugArgs, note: str | None
) -> ToolResult:
    run, action = ctx.run, args.action
    if action == "adapters":
        return _adapters(run)
    if action == "status":
        return await _status(run, supervisor, conversation, session)
    if action == "breakpoints":
        return await _breakpoints(run, supervisor, conversation, session, args)
    if action == "launch":
        return await _launch(ctx, supervisor, conversation, session, args)
    if action == "attach":
        return await _attach(ctx, supervisor, conversation, session, args)
    if action == "output":
        return _output(supervisor, conversation, session)
    if session is None:
        raise _no_session(action, supervisor, conversation, note)
    async with session.lock:
        return await _in_session(run, supervisor, conversation, session, args)


async def _caught_up(run: Run, supervisor: DebugSupervisor, conversation: str, session: Session) -> ToolResult | None:
    """A stop or an end that arrived after the last wait gave up (a program left running), as a result."""
    async with session.lock:
        outcome = await session.wait_stop(session.consumed, 0)
        if outcome is None:
            return None
        return await _after_run(run, supervisor, conversation, session, outcome)


def _no_session(action: str, supervisor: DebugSupervisor, conversation: str, note: str | None) -> ToolError:
    last = supervisor.last.get(conversation)
    why = "no debug session is running in this conversation"
    if last is not None:
        why = f"no debug session is running: the last one ({last[0]}) ended ({_ended_words(last[1])})"
    return ToolError(
        f"{why}, so '{action}' has nothing to act on. Start one with action='launch' and program='<file>' "
        "(set breakpoints first with action='breakpoints'), or action='attach' with port=<port>.",
        data={"error": "no_session"},
    )


# -- adapters, status, output --------------------------------------------------------------------------


def _adapter_table(run: Run):
    from tether_debug.adapters import merge

    return merge(run.hook.tether_debug_adapters(run=run))


def _adapters(run: Run) -> ToolResult:
    rows = []
    lines = []
    for adapter in _adapter_table(run).values():
        a = adapter.availability(run.root)
        rows.append({"id": a.adapter, "usable": a.usable, "reason": a.reason})
        lines.append(f"{a.adapter}: {'usable' if a.usable else 'not usable'} - {a.reason}")
    return ToolResult.text("\n".join(lines), data={"adapters": rows})


def _source_line(path: str | None, line: int | None) -> str | None:
    if not path or not line:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, text in enumerate(f, 1):
                if i == line:
                    return text.rstrip("\n")[:MAX_VALUE]
    except OSError:
        return None
    return None


def _stop_text(run: Run, stop: Stop) -> str:
    where = f"{run.relpath(stop.file)}:{stop.line}" if stop.file else "an unknown location (no source)"
    func = f" in {stop.function}" if stop.function else ""
    text = f"stopped ({stop.reason}) at {where}{func}, thread {stop.thread_id}"
    source = _source_line(stop.file, stop.line)
    if source is not None:
        text += f"\n{stop.line:>6} | {source}"
    if stop.description:
        text += f"\nexception: {stop.description[:MAX_EVAL]}"
    if stop.project_frame is not None:
        file, line, function = stop.project_frame
        text += f"\ninnermost frame in the project: {run.relpath(file)}:{line} in {function}"
        source = _source_line(file, line)
        if source is not None:
            text += f"\n{line:>6} | {source}"
    return text


def _stop_result(run: Run, session: Session, stop: Stop, prefix: str = "") -> ToolResult:
    data = {"stopped": stop.data(run.relpath)}
    if stop.description:
        data["exception"] = stop.description
    if stop.project_frame is not None:
        data["project_frame"] = {"file": run.relpath(stop.project_frame[0]), "line": stop.project_frame[1], "name": stop.project_frame[2]}
    text = prefix + _stop_text(run, stop)
    text += "\nNext: action='stack' for frames, 'scopes' with a frame_id, 'step_over', 'continue'."
    return ToolResult.text(text, data=data)


def _ended_words(ended: Ended) -> str:
    code = f" with exit code {ended.exit_code}" if ended.exit_code is not None else ""
    return f"the program {ended.how}{code}" if ended.how in ("exited", "terminated") else f"{ended.how}{code}"


def _cap_output(text: str, dropped: int) -> tuple[str, bool]:
    cut = False
    if len(text) > MAX_OUTPUT:
        dropped += len(text) - MAX_OUTPUT
        text = text[-MAX_OUTPUT:]
        cut = True
    if dropped:
        text = f"[{dropped:,} earlier characters of output dropped; the latest {len(text):,} follow]\n{text}"
        cut = True
    return text, cut


async def _status(run: Run, supervisor: DebugSupervisor, conversation: str, session: Session | None) -> ToolResult:
    if session is None:
        last = supervisor.last.get(conversation)
        text = "no debug session is running."
        data: dict[str, Any] = {"session": None}
        if last is not None:
            text += f" The last one ({last[0]}) ended: {_ended_words(last[1])}."
            data["ended"] = {"program": last[0], "exit_code": last[1].exit_code}
        pending = supervisor.describe_pending(conversation, run.relpath)
        if pending:
            text += " Breakpoints kept for the next launch: " + "; ".join(f"{p['file']} {p['lines']}" for p in pending)
        data["breakpoints"] = pending
        return ToolResult.text(text, data=data)
    left = max(0.0, session.deadline - time.monotonic())
    head = f"debug session: {session.program} ({session.adapter.id}), {left / 60:.1f} min left before the time limit.\n"
    data = {"session": {"program": session.program, "adapter": session.adapter.id, "seconds_left": round(left)}}
    if session.stop is not None:
        data["stopped"] = session.stop.data(run.relpath)
        if session.stop.description:
            data["exception"] = session.stop.description
        return ToolResult.text(head + _stop_text(run, session.stop), data=data)
    data["stopped"] = None
    return ToolResult.text(head + "the program is running (not stopped); use action='pause' to stop it.", data=data)


def _output(supervisor: DebugSupervisor, conversation: str, session: Session | None) -> ToolResult:
    if session is not None:
        text, dropped = session.output.take()
    elif conversation in supervisor.last:
        program, ended, text, dropped = supervisor.last[conversation]
        supervisor.last[conversation] = (program, ended, "", 0)
    else:
        raise _no_session("output", supervisor, conversation, None)
    shown, cut = _cap_output(text, dropped)
    body = shown if shown else "(no new output since the last read)"
    return ToolResult.text(body, data={"output": shown, "cut": cut})


# -- breakpoints ---------------------------------------------------------------------------------------


def _check_lines(run: Run, path: Path, lines: list[int], comment_prefixes: tuple[str, ...]) -> None:
    try:
        source = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise ToolError(f"cannot read '{run.relpath(path)}': {exc.strerror}") from None
    bad_range = [n for n in lines if n < 1 or n > len(source)]
    if bad_range:
        raise ToolError(
            f"line(s) {', '.join(map(str, bad_range))} are outside '{run.relpath(path)}', which has {len(source)} lines; "
            "give 1-based line numbers of lines with code.",
            data={"error": "bad_line", "lines": bad_range},
        )
    empty = []
    for n in lines:
        text = source[n - 1].strip()
        if not text or any(text.startswith(p) for p in comment_prefixes):
            empty.append(n)
    if empty:
        hints = []
        for n in empty:
            nxt = next((i for i in range(n + 1, len(source) + 1) if _is_code(source[i - 1], comment_prefixes)), None)
            hints.append(f"{n} (next line with code: {nxt})" if nxt else str(n))
        raise ToolError(
            f"no code on line(s) {', '.join(hints)} of '{run.relpath(path)}' (blank or comment): a breakpoint there "
            "would never be hit. Put it on a line with a statement.",
            data={"error": "no_code", "lines": empty},
        )


def _is_code(text: str, comment_prefixes: tuple[str, ...]) -> bool:
    stripped = text.strip()
    return bool(stripped) and not any(stripped.startswith(p) for p in comment_prefixes)


def _comment_prefixes(run: Run, path: Path, session: Session | None) -> tuple[str, ...]:
    if session is not None:
        return session.adapter.comment_prefixes
    for adapter in _adapter_table(run).values():
        if _handles(adapter, path):
            return adapter.comment_prefixes
    return ("//",) if path.suffix in (".c", ".h", ".cc", ".cpp", ".rs", ".go", ".dart") else ("#",)


def _describe_answers(run: Run, path: str, answers: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    parts = []
    rows = []
    for a in answers:
        requested, line, verified = a.get("requested"), a.get("line"), bool(a.get("verified"))
        row = {"requested": requested, "line": line or requested, "verified": verified}
        if a.get("message"):
            row["message"] = a["message"]
        rows.append(row)
        if not verified:
            parts.append(f"line {requested} not verified{': ' + a['message'] if a.get('message') else ''}")
        elif line and line != requested:
            parts.append(f"line {requested} verified, landed on line {line}")
        else:
            parts.append(f"line {requested} verified")
    return f"{run.relpath(path)}: " + "; ".join(parts), rows


async def _breakpoints(run: Run, supervisor: DebugSupervisor, conversation: str, session: Session | None, args: DebugArgs) -> ToolResult:
    if args.file is None or args.lines is None:
        raise ToolError("action='breakpoints' needs file (relative to the root) and lines (a list of 1-based line numbers; [] clears the file).")
    path = run.resolve_path(args.file, must_exist=True)
    if not path.is_file():
        raise ToolError(f"'{run.relpath(path)}' is not a file; breakpoints go on lines of a source file.")
    lines = sorted(set(args.lines))
    if lines:
        _check_lines(run, path, lines, _comment_prefixes(run, path, session))
    pending = supervisor.pending_for(conversation)
    if lines:
        pending[str(path)] = lines
    else:
        pending.pop(str(path), None)
    rel = run.relpath(path)
    if session is None or session.client is None:
        text = (f"{rel}: breakpoints on line(s) {', '.join(map(str, lines))} kept; they are sent when the program launches."
                if lines else f"{rel}: breakpoints cleared.")
        return ToolResult.text(text, data={"file": rel, "breakpoints": [{"requested": n, "line": n, "verified": None} for n in lines], "sent": False})
    async with session.lock:
        answers = await session.set_breakpoints(str(path), lines)
    if not lines:
        return ToolResult.text(f"{rel}: breakpoints cleared.", data={"file": rel, "breakpoints": [], "sent": True})
    text, rows = _describe_answers(run, str(path), answers)
    return ToolResult.text(text, data={"file": rel, "breakpoints": rows, "sent": True})


# -- launch and attach -----------------------------------------------------------------------------------


def _refuse_second(run: Run, session: Session) -> ToolError:
    age = (time.monotonic() - session.started) / 60
    where = f", stopped at {run.relpath(session.stop.file)}:{session.stop.line}" if session.stop and session.stop.file else ""
    return ToolError(
        f"a debug session is already running in this conversation ({session.program}, started {age:.1f} min ago{where}); "
        "a second launch/attach does not replace it. End it first with action='terminate', then launch again.",
        data={"error": "session_exists", "program": session.program},
    )


def _handles(adapter, path: Path) -> bool:
    try:
        return bool(adapter.handles(path))
    except Exception:
        log.warning("debug adapter %s failed to judge %s", adapter.id, path, exc_info=True)
        return False


def _pick_adapter(run: Run, program: Path, forced: str | None):
    table = _adapter_table(run)
    if forced is not None:
        if forced not in table:
            raise ToolError(f"unknown adapter '{forced}'; known adapters: {', '.join(table)}. See action='adapters'.")
        return table[forced]
    for adapter in table.values():
        if _handles(adapter, program):
            return adapter
    raise ToolError(
        f"no debug adapter handles '{run.relpath(program)}': give a .py file (debugpy), a native binary built with -g (lldb), "
        "a Go package directory or .go file (delve), or a .dart file; or force one with adapter='<id>'.",
        data={"error": "no_adapter"},
    )


async def _launch(ctx: CallContext, supervisor: DebugSupervisor, conversation: str, session: Session | None, args: DebugArgs) -> ToolResult:
    from tether_debug.dap import DapError
    from tether_debug.session import Session, SessionError

    run = ctx.run
    if session is not None:
        raise _refuse_second(run, session)
    if not args.program:
        raise ToolError("action='launch' needs program: the file to debug, relative to the root (e.g. 'app.py').")
    program = run.resolve_path(args.program)
    if not program.exists():
        raise ToolError(
            f"no such program: '{args.program}' (paths are relative to the root). Build it first, or check the name.",
            data={"error": "no_program"},
        )
    adapter = _pick_adapter(run, program, args.adapter)
    availability = adapter.availability(run.root)
    if not availability.usable or availability.located is None:
        raise ToolError(
            f"the {adapter.id} adapter cannot start here: {availability.reason}. See action='adapters'.",
            data={"error": "adapter_unavailable", "adapter": adapter.id},
        )
    new = Session(adapter, conversation_id=conversation, ttl=_ttl(run), request_timeout=_request_timeout(run))
    new.program = run.relpath(program)
    new.root = run.root
    timeout = _launch_timeout(run)
    try:
        await new.start(availability.located, run.root, run.track_process, timeout)
        await new.initialize()
        config = adapter.launch_config(program, list(args.args or ()), run.root, availability.located)
        await new.configure("launch", config, dict(supervisor.pending_for(conversation)), timeout)
        outcome = await new.wait_stop(0, _stop_timeout(run))
    except (SessionError, DapError) as exc:
        output, _ = new.output.take()
        await new.close()
        message = exc.message if isinstance(exc, DapError) else str(exc)
        more = f"\nprogram output:\n{_cap_output(output, 0)[0]}" if output.strip() else ""
        raise ToolError(
            f"could not launch {run.relpath(program)} under {adapter.id}: {message}{more}",
            data={"error": "launch_failed", "adapter": adapter.id},
        ) from None
    except BaseException:
        await asyncio.shield(new.close())
        raise
    supervisor.adopt(new)
    return await _after_run(run, supervisor, conversation, new, outcome, prefix=_bp_summary(run, new))


def _bp_summary(run: Run, session: Session) -> str:
    if not session.breakpoints:
        return ""
    parts = [_describe_answers(run, path, answers)[0] for path, answers in session.breakpoints.items()]
    return "breakpoints: " + " | ".join(parts) + "\n"


async def _attach(ctx: CallContext, supervisor: DebugSupervisor, conversation: str, session: Session | None, args: DebugArgs) -> ToolResult:
    from tether_debug.dap import DapError
    from tether_debug.session import Session, SessionError

    run = ctx.run
    if session is not None:
        raise _refuse_second(run, session)
    if args.port is None:
        raise ToolError("action='attach' needs port: the local port a debugger listens on (e.g. from `python -m debugpy --listen 127.0.0.1:5678`).")
    table = _adapter_table(run)
    adapter = table.get(args.adapter or "debugpy")
    if adapter is None or adapter.attach_config is None:
        can = [a.id for a in table.values() if a.attach_config is not None]
        raise ToolError(f"adapter '{args.adapter}' cannot attach; adapters that can: {', '.join(can)}.")
    new = Session(adapter, conversation_id=conversation, ttl=_ttl(run), request_timeout=_request_timeout(run))
    new.program = f"process on port {args.port}"
    new.root = run.root
    timeout = _launch_timeout(run)
    try:
        await new.connect("127.0.0.1", args.port, min(timeout, 10.0))
        await new.initialize()
        await new.configure("attach", adapter.attach_config(args.port), dict(supervisor.pending_for(conversation)), timeout)
        # an attached program usually keeps running: wait briefly for a breakpoint, not the full bound
        outcome = await new.wait_stop(0, min(_stop_timeout(run), _opt(run, "debug_attach_wait", 2.0)))
    except (SessionError, DapError) as exc:
        await new.close()
        message = exc.message if isinstance(exc, DapError) else str(exc)
        raise ToolError(f"could not attach to port {args.port}: {message}", data={"error": "attach_failed"}) from None
    except BaseException:
        await asyncio.shield(new.close())
        raise
    supervisor.adopt(new)
    prefix = f"attached to the process on port {args.port}.\n" + _bp_summary(run, new)
    return await _after_run(run, supervisor, conversation, new, outcome, prefix=prefix)


async def _after_run(run: Run, supervisor: DebugSupervisor, conversation: str, session: Session, outcome, prefix: str = "") -> ToolResult:
    """The result of anything that let the program run: a stop, the end (session closed), or still running."""
    from tether_debug.session import Ended

    if outcome is None:
        bound = _stop_timeout(run)
        return ToolResult.text(
            prefix + f"the program is running and has not stopped (waited up to {bound:g} s). Use action='pause' to stop it, "
            "'status' to check, or 'output' to read what it printed.",
            data={"stopped": None, "running": True},
        )
    if isinstance(outcome, Ended):
        await supervisor.end(conversation, session)  # first: output still in flight arrives while it closes
        output, dropped = session.output.take()
        shown, cut = _cap_output(output, dropped)
        supervisor.remember_end(conversation, session, outcome, "", 0)
        text = prefix + f"{_ended_words(outcome)}; the debug session is over."
        text += f"\noutput:\n{shown}" if shown.strip() else "\n(no output)"
        return ToolResult.text(
            text, data={"stopped": None, "ended": {"exit_code": outcome.exit_code, "how": outcome.how}, "output": shown, "cut": cut}
        )
    return _stop_result(run, session, outcome, prefix)


# -- actions on a live session -----------------------------------------------------------------------------


async def _in_session(run: Run, supervisor: DebugSupervisor, conversation: str, session: Session, args: DebugArgs) -> ToolResult:
    action = args.action
    if action == "terminate":
        output, dropped = session.output.take()
        await supervisor.end(conversation, session)
        from tether_debug.session import Ended

        supervisor.remember_end(conversation, session, Ended(session.exit_code, "was terminated"), output, dropped)
        return ToolResult.text(
            f"debug session ended: {session.program} and its adapter were stopped."
            + (" Unread output is still available with action='output'." if output.strip() else ""),
            data={"terminated": True},
        )
    if action == "pause":
        return await _resume(run, supervisor, conversation, session, "pause", args.thread_id, need_stop=False)
    if action in ("continue", "step_over", "step_in", "step_out"):
        command = {"continue": "continue", "step_over": "next", "step_in": "stepIn", "step_out": "stepOut"}[action]
        return await _resume(run, supervisor, conversation, session, command, args.thread_id, need_stop=True)
    if action == "threads":
        return await _threads(session)
    if session.stop is None:
        raise ToolError(
            f"'{action}' needs the program to be stopped, and it is running. Use action='pause' first (or set a breakpoint and wait).",
            data={"error": "running"},
        )
    if action == "stack":
        return await _stack(run, session, args.thread_id)
    if action == "scopes":
        return await _scopes(session, args.frame_id)
    if action == "variables":
        return await _variables(session, args.reference)
    if action == "evaluate":
        return await _evaluate(session, args.expression, args.frame_id)
    raise ToolError(f"unknown action '{action}'")  # unreachable: the Literal argument guards it


async def _resume(run: Run, supervisor: DebugSupervisor, conversation: str, session: Session, command: str, thread_id: int | None, need_stop: bool) -> ToolResult:
    assert session.client is not None
    if need_stop and session.stop is None:
        raise ToolError(
            f"the program is running, so there is nothing to {command}; use action='pause' to stop it first.",
            data={"error": "running"},
        )
    if not need_stop and session.stop is not None:
        return _stop_result(run, session, session.stop, prefix="already stopped; nothing to pause.\n")
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
    outcome = await session.wait_stop(after, _stop_timeout(run))
    return await _after_run(run, supervisor, conversation, session, outcome)


async def _threads(session: Session) -> ToolResult:
    assert session.client is not None
    threads = (await session.client.request("threads")).get("threads") or []
    shown = threads[:MAX_THREADS]
    lines = [f"{t['id']}: {t.get('name', '')}" for t in shown]
    if len(threads) > MAX_THREADS:
        lines.append(f"[{len(threads) - MAX_THREADS} more threads not shown (showing {MAX_THREADS} of {len(threads)})]")
    return ToolResult.text("\n".join(lines) or "(no threads)", data={"threads": [{"id": t["id"], "name": t.get("name", "")} for t in shown], "total": len(threads)})


async def _stack(run: Run, session: Session, thread_id: int | None) -> ToolResult:
    thread = thread_id if thread_id is not None else session.stop.thread_id  # type: ignore[union-attr]
    if thread is None:
        raise ToolError("no thread given and the stop named none; pass thread_id from action='threads'.")
    frames = await session.stack_trace(thread, MAX_FRAMES)
    total = max(session.total_frames, len(frames))
    rows, lines = [], []
    for f in frames:
        path = (f.get("source") or {}).get("path")
        file = _shown_path(run, path) if path else None
        rows.append({"id": f["id"], "name": f.get("name", ""), "file": file, "line": f.get("line")})
        lines.append(f"#{f['id']} {f.get('name', '')} at {file or '<no source>'}:{f.get('line')}")
    if total > len(frames):
        lines.append(f"[{total - len(frames)} more frames not shown (showing {len(frames)} of {total}, innermost first)]")
    return ToolResult.text("\n".join(lines) or "(no frames)", data={"frames": rows, "thread_id": thread, "total": total})


def _shown_path(run: Run, path: str) -> str:
    """A frame's path as the model sees it; adapters give resolved absolute paths, so most need no syscall."""
    root = str(run.root)
    if path.startswith(root + "/") and "/../" not in path:
        return path[len(root) + 1 :]
    return run.relpath(path)


def _check_frame(session: Session, frame_id: int | None) -> int:
    if frame_id is None:
        raise ToolError("this action needs frame_id: an id from action='stack' at the current stop.")
    if frame_id not in session.frames:
        known = ", ".join(map(str, list(session.frames)[:10])) or "none yet"
        raise ToolError(
            f"frame_id {frame_id} is not a frame of the current stop (frame ids change at every stop; current ones: {known}). "
            "Call action='stack' and use an id from it.",
            data={"error": "stale_frame", "frame_id": frame_id},
        )
    return frame_id


async def _scopes(session: Session, frame_id: int | None) -> ToolResult:
    assert session.client is not None
    frame = _check_frame(session, frame_id)
    body = await session.client.request("scopes", {"frameId": frame})
    rows, lines = [], []
    for s in body.get("scopes") or ():
        if s.get("name") in session.adapter.skip_scopes:
            continue
        ref = s.get("variablesReference", 0)
        if ref:
            session.references.add(ref)
        rows.append({"name": s.get("name", ""), "reference": ref})
        lines.append(f"{s.get('name', '')}: reference {ref}")
    return ToolResult.text("\n".join(lines) or "(no scopes)", data={"scopes": rows, "frame_id": frame})


def _cap_value(value: str, limit: int) -> tuple[str, bool]:
    if len(value) <= limit:
        return value, False
    return value[:limit] + f"... [value cut: showed {limit} of {len(value):,} characters]", True


async def _variables(session: Session, reference: int | None) -> ToolResult:
    assert session.client is not None
    if reference is None:
        raise ToolError("action='variables' needs reference: a scope's reference from action='scopes', or a variable's.")
    if reference not in session.references:
        raise ToolError(
            f"reference {reference} is not from the current stop (references change at every stop). "
            "Get a fresh one with action='scopes' (frame_id from 'stack') or from a variable listed at this stop.",
            data={"error": "stale_reference", "reference": reference},
        )
    body = await session.client.request("variables", {"variablesReference": reference})
    everything = list(body.get("variables") or ())
    total = len(everything)
    rows, lines = [], []
    values_cut = 0
    for v in everything[:MAX_VARIABLES]:
        value, cut = _cap_value(str(v.get("value", "")), MAX_VALUE)
        values_cut += cut
        ref = v.get("variablesReference", 0) or 0
        if ref:
            session.references.add(ref)
        row = {"name": v.get("name", ""), "value": value, "type": v.get("type"), "reference": ref}
        if cut:
            row["cut"] = True
        rows.append(row)
        kind = f" ({v['type']})" if v.get("type") else ""
        children = f"  [reference {ref}]" if ref else ""
        lines.append(f"{v.get('name', '')}{kind} = {value}{children}")
    if total > MAX_VARIABLES:
        # debugpy pages big containers itself and puts their length last, past our cap: say it
        length = next((v.get("value") for v in everything[MAX_VARIABLES:] if v.get("name") == "len()"), None)
        size = f"; the container's len() is {length}" if length is not None else ""
        lines.append(
            f"[{total - MAX_VARIABLES} more variables not shown (showing {MAX_VARIABLES} of {total}{size}). "
            "Use action='evaluate' with a slice or a specific name (e.g. items[50:100]) to see others.]"
        )
    if values_cut:
        lines.append(f"[{values_cut} value(s) cut at {MAX_VALUE} characters; evaluate a slice of the value to read more.]")
    return ToolResult.text("\n".join(lines) or "(no variables)", data={"variables": rows, "total": total, "shown": len(rows)})


async def _evaluate(session: Session, expression: str | None, frame_id: int | None) -> ToolResult:
    from tether_debug.dap import DapError

    assert session.client is not None
    if not expression:
        raise ToolError("action='evaluate' needs expression, e.g. expression='len(items)'.")
    if frame_id is None:
        top = session.top_frame
        if top is None or top not in session.frames:
            raise ToolError("no frame to evaluate in; call action='stack' and pass frame_id.")
        frame = top
    else:
        frame = _check_frame(session, frame_id)
    try:
        body = await session.client.request("evaluate", {"expression": expression, "frameId": frame, "context": session.adapter.evaluate_context})
    except DapError as exc:
        # debugpy answers with the debuggee's whole traceback; its last line is the error itself
        lines = [line for line in exc.message.strip().splitlines() if line.strip()]
        message = lines[-1] if lines and lines[0].startswith("Traceback") else exc.message.strip()
        raise ToolError(
            f"evaluating {expression!r} in frame {frame} failed: {message}",
            data={"error": "evaluate_failed", "frame_id": frame},
        ) from None
    value, cut = _cap_value(str(body.get("result", "")), MAX_EVAL)
    ref = body.get("variablesReference", 0) or 0
    if ref:
        session.references.add(ref)
    kind = f" ({body['type']})" if body.get("type") else ""
    text = f"{expression}{kind} = {value}" + (f"  [reference {ref}: use action='variables']" if ref else "")
    return ToolResult.text(text, data={"result": value, "type": body.get("type"), "reference": ref, "frame_id": frame, "cut": cut})
