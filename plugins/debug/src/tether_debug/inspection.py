"""Actions that look without running: adapters, status, output, threads, stack, scopes, variables, evaluate.

Frame ids and variable references are only accepted from the current stop: adapters reuse or drop
them at every stop, and an old one would silently show the wrong frame.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tether import ToolError, ToolResult
from tether.output import cap_items

from tether_debug.adapters import adapter_table
from tether_debug.render import (
    MAX_EVAL,
    MAX_FRAMES,
    MAX_THREADS,
    MAX_VALUE,
    MAX_VARIABLES,
    cap_output,
    cap_value,
    ended_words,
    no_session,
    shown_path,
    stop_text,
)

if TYPE_CHECKING:
    from tether.run import Run

    from tether_debug.session import Session
    from tether_debug.supervisor import DebugSupervisor


def adapters_action(run: Run) -> ToolResult:
    rows = []
    lines = []
    for adapter in adapter_table(run).values():
        a = adapter.availability(run.root)
        rows.append({"id": a.adapter, "usable": a.usable, "reason": a.reason})
        lines.append(f"{a.adapter}: {'usable' if a.usable else 'not usable'} - {a.reason}")
    return ToolResult.text("\n".join(lines), data={"adapters": rows})


async def status_action(run: Run, supervisor: DebugSupervisor, conversation: str, session: Session | None) -> ToolResult:
    if session is None:
        last = supervisor.last.get(conversation)
        text = "no debug session is running."
        data: dict[str, Any] = {"session": None}
        if last is not None:
            text += f" The last one ({last[0]}) ended: {ended_words(last[1])}."
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
        return ToolResult.text(head + stop_text(run, session.stop), data=data)
    data["stopped"] = None
    return ToolResult.text(head + "the program is running (not stopped); use action='pause' to stop it.", data=data)


def output_action(supervisor: DebugSupervisor, conversation: str, session: Session | None) -> ToolResult:
    if session is not None:
        text, dropped = session.output.take()
    elif conversation in supervisor.last:
        program, ended, text, dropped = supervisor.last[conversation]
        supervisor.last[conversation] = (program, ended, "", 0)
    else:
        raise no_session("output", supervisor, conversation, None)
    shown, cut = cap_output(text, dropped)
    body = shown if shown else "(no new output since the last read)"
    return ToolResult.text(body, data={"output": shown, "cut": cut})


async def threads_action(session: Session) -> ToolResult:
    assert session.client is not None
    threads = (await session.client.request("threads")).get("threads") or []
    shown, note = cap_items(threads, MAX_THREADS, "threads")
    lines = [f"{t['id']}: {t.get('name', '')}" for t in shown]
    if note:
        lines.append(note)
    return ToolResult.text("\n".join(lines) or "(no threads)", data={"threads": [{"id": t["id"], "name": t.get("name", "")} for t in shown], "total": len(threads)})


async def stack_action(run: Run, session: Session, thread_id: int | None) -> ToolResult:
    thread = thread_id if thread_id is not None else (session.stop.thread_id if session.stop else None)
    if thread is None:
        raise ToolError("no thread given and the stop named none; pass thread_id from action='threads'.")
    frames = await session.stack_trace(thread, MAX_FRAMES)
    total = max(session.total_frames, len(frames))
    rows, lines = [], []
    for f in frames:
        path = (f.get("source") or {}).get("path")
        file = shown_path(run, path) if path else None
        rows.append({"id": f["id"], "name": f.get("name", ""), "file": file, "line": f.get("line")})
        lines.append(f"#{f['id']} {f.get('name', '')} at {file or '<no source>'}:{f.get('line')}")
    if total > len(frames):
        lines.append(f"[{total - len(frames)} more frames not shown (showing {len(frames)} of {total}, innermost first)]")
    return ToolResult.text("\n".join(lines) or "(no frames)", data={"frames": rows, "thread_id": thread, "total": total})


def check_frame(session: Session, frame_id: int | None) -> int:
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


async def scopes_action(session: Session, frame_id: int | None) -> ToolResult:
    assert session.client is not None
    frame = check_frame(session, frame_id)
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


async def variables_action(session: Session, reference: int | None) -> ToolResult:
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
        value, cut = cap_value(str(v.get("value", "")), MAX_VALUE)
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


async def evaluate_action(session: Session, expression: str | None, frame_id: int | None) -> ToolResult:
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
        frame = check_frame(session, frame_id)
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
    value, cut = cap_value(str(body.get("result", "")), MAX_EVAL)
    ref = body.get("variablesReference", 0) or 0
    if ref:
        session.references.add(ref)
    kind = f" ({body['type']})" if body.get("type") else ""
    text = f"{expression}{kind} = {value}" + (f"  [reference {ref}: use action='variables']" if ref else "")
    return ToolResult.text(text, data={"result": value, "type": body.get("type"), "reference": ref, "frame_id": frame, "cut": cut})
