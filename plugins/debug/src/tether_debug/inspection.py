"""Actions that look without running: adapters, status, output, threads, stack, scopes, variables, evaluate.

Frame ids and variable references are only accepted from the current stop: adapters reuse or drop
them at every stop, and an old one would silently show the wrong frame.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from tether import ToolError, ToolResult
from tether.output import cap_items

from tether_debug.adapters import adapter_table, handles_safely
from tether_debug.breakpoints import listing
from tether_debug.render import (
    MAX_EVAL,
    MAX_FRAMES,
    MAX_THREADS,
    cap_output,
    cap_value,
    ended_words,
    no_session,
    shown_path,
    stop_text,
    variable_rows,
)

if TYPE_CHECKING:
    from pathlib import Path

    from tether.run import Run

    from tether_debug.session import Session
    from tether_debug.supervisor import DebugSupervisor


def adapters_action(run: Run) -> ToolResult:
    rows = []
    lines = []
    for adapter in adapter_table(run).values():
        a = adapter.availability(run.root)
        rows.append(
            {
                "id": a.adapter,
                "usable": a.usable,
                "reason": a.reason,
                "markers": list(adapter.markers),
                "takes": adapter.takes,
            }
        )
        lines.append(
            f"{a.adapter}: {'usable' if a.usable else 'not usable'} - {a.reason} (root markers looked for: {', '.join(adapter.markers)})"
        )
    data: dict[str, Any] = {"adapters": rows}
    table = adapter_table(run)
    uncovered = [
        language
        for language, (suffixes, _) in _UNCOVERED.items()
        if _in_project(run.root, language)
        and not any(
            handles_safely(a, run.root / f"main{suffix}") for a in table.values() for suffix in suffixes
        )
    ]
    if uncovered:
        lines.append(
            f"{' and '.join(uncovered)}: no debug adapter for {'them' if len(uncovered) > 1 else 'it'} is installed "
            "or available, so such programs cannot be launched or attached here. "
            + " ".join(_UNCOVERED[language][1] for language in uncovered)
        )
        data["no_adapter"] = uncovered
    return ToolResult.text("\n".join(lines), data=data)


# languages of projects no built-in adapter debugs: their sources' suffixes, and what would be needed
_UNCOVERED = {
    "JavaScript/TypeScript": (
        (".js", ".mjs", ".cjs", ".ts", ".mts", ".tsx", ".jsx"),
        "It would take a DAP server for Node.js (vscode-js-debug's standalone dapDebugServer) added to the "
        "run as an adapter through the tether_debug_adapters hook; without one, run the code with eval's "
        "JavaScript kernel or node --inspect in a shell.",
    ),
}
_JS_MARKERS = ("package.json", "tsconfig.json", "jsconfig.json", "deno.json", "deno.jsonc")


def _in_project(root: Path, language: str) -> bool:
    """Whether the root looks like a project of ``language``: one of its markers, or a source at the top."""
    import os

    suffixes = _UNCOVERED[language][0]
    try:
        with os.scandir(root) as entries:
            names = [e.name for _, e in zip(range(2000), entries, strict=False)]
    except OSError:
        return False
    return any(n in _JS_MARKERS for n in names) or any(n.endswith(suffixes) for n in names)


async def status_action(
    run: Run, supervisor: DebugSupervisor, conversation: str, session: Session | None
) -> ToolResult:
    if session is None:
        last = supervisor.last.get(conversation)
        text = "no debug session is running."
        data: dict[str, Any] = {"session": None}
        if last is not None:
            text += f" The last one ({last[0]}) ended: {ended_words(last[1])}."
            data["ended"] = {"program": last[0], "exit_code": last[1].exit_code}
        listed, data["breakpoints"] = listing(run, supervisor, conversation, None)
        return ToolResult.text(text + "\nKept for the next launch:\n" + listed, data=data)
    left = max(0.0, session.deadline - time.monotonic())
    head = f"debug session: {session.program} ({session.adapter.id}), {left / 60:.1f} min left before the time limit.\n"
    listed, breakpoints = listing(run, supervisor, conversation, session)
    data = {
        "session": {"program": session.program, "adapter": session.adapter.id, "seconds_left": round(left)},
        "breakpoints": breakpoints,
    }
    if session.stop is not None:
        data["stopped"] = session.stop.data(run.relpath)
        if session.stop.description:
            data["exception"] = session.stop.description
            data["exceptionInfo"] = session.stop.exception
        return ToolResult.text(head + stop_text(run, session.stop) + "\n" + listed, data=data)
    data["stopped"] = None
    return ToolResult.text(
        head + "the program is running (not stopped); use action='pause' to stop it.\n" + listed, data=data
    )


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
    return ToolResult.text(
        "\n".join(lines) or "(no threads)",
        data={"threads": [{"id": t["id"], "name": t.get("name", "")} for t in shown], "total": len(threads)},
    )


MAX_SHOWN_PATHS = 10_000  # source paths remembered for one session


def frame_path(run: Run, session: Session, path: str) -> str:
    """`shown_path`, remembered for the session: every stack call shows the same few sources, and a
    path outside the root (lldb's libc frames) costs a relpath of ~5-10 us each time.

    A link under the root that changes during the session is not followed again.
    """
    shown = session.shown_paths.get(path)
    if shown is None:
        if len(session.shown_paths) >= MAX_SHOWN_PATHS:
            session.shown_paths.clear()
        shown = session.shown_paths[path] = shown_path(run, path)
    return shown


async def stack_action(run: Run, session: Session, thread_id: int | None) -> ToolResult:
    thread = thread_id if thread_id is not None else (session.stop.thread_id if session.stop else None)
    if thread is None:
        raise ToolError("no thread given and the stop named none; pass thread_id from action='threads'.")
    frames = await session.stack_trace(thread, MAX_FRAMES)
    total = max(session.total_frames, len(frames))
    rows, lines = [], []
    for f in frames:
        path = (f.get("source") or {}).get("path")
        file = frame_path(run, session, path) if path else None
        rows.append({"id": f["id"], "name": f.get("name", ""), "file": file, "line": f.get("line")})
        lines.append(f"#{f['id']} {f.get('name', '')} at {file or '<no source>'}:{f.get('line')}")
    if total > len(frames):
        lines.append(
            f"[{total - len(frames)} more frames not shown (showing {len(frames)} of {total}, innermost first)]"
        )
    return ToolResult.text(
        "\n".join(lines) or "(no frames)", data={"frames": rows, "thread_id": thread, "total": total}
    )


def check_frame(session: Session, frame_id: int | None) -> int:
    if frame_id is None:
        raise ToolError("this action needs frame_id: an id from action='stack' at the current stop.")
    if frame_id not in session.frames:
        known = ", ".join(map(str, list(session.frames)[:10])) or "none yet"
        raise ToolError(
            f"frame_id {frame_id} is not a frame of the current stop (frame ids change at every stop; current ones: {known}). "
            "Call action='stack' and use an id from it.",
            code="stale_frame",
            frame_id=frame_id,
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
        raise ToolError(
            "action='variables' needs reference: a scope's reference from action='scopes', or a variable's."
        )
    if reference not in session.references:
        raise ToolError(
            f"reference {reference} is not from the current stop (references change at every stop). "
            "Get a fresh one with action='scopes' (frame_id from 'stack') or from a variable listed at this stop.",
            code="stale_reference",
            reference=reference,
        )
    body = await session.client.request("variables", {"variablesReference": reference})
    everything: list[dict[str, Any]] = list(body.get("variables") or [])
    rows, lines = variable_rows(session, everything)
    return ToolResult.text(
        "\n".join(lines) or "(no variables)",
        data={"variables": rows, "total": len(everything), "shown": len(rows)},
    )


def frame_words(run: Run, session: Session, frame_id: int, given: bool) -> str:
    """A frame as the model saw it: 'frame 3 (main at app.py:13)', or 'the top frame (...)' when none was given."""
    f = session.frames.get(frame_id) or {}
    path = (f.get("source") or {}).get("path")
    where = (
        f"{f.get('name', '?')} at {frame_path(run, session, path) if path else '<no source>'}:{f.get('line')}"
    )
    return f"frame {frame_id} ({where})" if given else f"the top frame ({where})"


ASSIGNMENT = re.compile(r"\s*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*=(?!=)\s*(.+?)\s*")


async def set_variable(run: Run, session: Session, frame: int, target: str, value: str) -> ToolResult:
    """``name = value`` through setVariable, for an adapter whose evaluate does not assign (delve)."""
    from tether_debug.dap import DapError

    assert session.client is not None
    names = target.split(".")
    scopes = (await session.client.request("scopes", {"frameId": frame})).get("scopes") or ()
    reference = None
    for scope in scopes:
        if scope.get("name") in session.adapter.skip_scopes or not scope.get("variablesReference"):
            continue
        variables = (
            await session.client.request("variables", {"variablesReference": scope["variablesReference"]})
        ).get("variables") or ()
        if any(v.get("name") == names[0] for v in variables):
            reference = scope["variablesReference"]
            break
    for name in names[:-1]:  # a field: walk down to the variable that holds it
        if reference is None:
            break
        variables = (await session.client.request("variables", {"variablesReference": reference})).get(
            "variables"
        ) or ()
        reference = next(
            (v.get("variablesReference") or None for v in variables if v.get("name") == name), None
        )
    if reference is None:
        raise ToolError(
            f"cannot set {target}: no variable '{target}' in {frame_words(run, session, frame, True)}; see its locals with action='scopes'.",
            code="evaluate_failed",
            frame_id=frame,
        )
    try:
        body = await session.client.request(
            "setVariable", {"variablesReference": reference, "name": names[-1], "value": value}
        )
    except DapError as exc:
        raise ToolError(
            f"setting {target} = {value} failed: {exc.message}",
            code="evaluate_failed",
            frame_id=frame,
        ) from None
    shown, cut = cap_value(str(body.get("value", value)), MAX_EVAL)
    return ToolResult.text(
        f"{target} = {shown} (set with setVariable)",
        data={"result": shown, "type": body.get("type"), "reference": 0, "frame_id": frame, "cut": cut},
    )


async def evaluate_action(
    run: Run, session: Session, expression: str | None, frame_id: int | None
) -> ToolResult:
    from tether_debug.dap import DapError

    assert session.client is not None
    if not expression:
        raise ToolError("action='evaluate' needs expression, e.g. expression='len(items)'.")
    if frame_id is None:
        top = session.top_frame
        if top is None or top not in session.frames:
            no_stack = session.stop.no_stack if session.stop and not session.stop.stack_late else None
            if no_stack:
                raise ToolError(
                    f"no frame to evaluate in: the adapter gives no stack at this stop ({no_stack}). Set a "
                    "breakpoint and 'continue' to a stop with frames."
                )
            raise ToolError("no frame to evaluate in; call action='stack' and pass frame_id.")
        frame = top
    else:
        frame = check_frame(session, frame_id)
    assignment = ASSIGNMENT.fullmatch(expression)
    if (
        assignment
        and not session.adapter.evaluate_assigns
        and session.capabilities.get("supportsSetVariable")
    ):
        return await set_variable(run, session, frame, assignment.group(1), assignment.group(2))
    try:
        body = await session.client.request(
            "evaluate",
            {"expression": expression, "frameId": frame, "context": session.adapter.evaluate_context},
        )
    except DapError as exc:
        # debugpy answers with the debuggee's whole traceback; its last line is the error itself
        lines = [line for line in exc.message.strip().splitlines() if line.strip()]
        message = lines[-1] if lines and lines[0].startswith("Traceback") else exc.message.strip()
        raise ToolError(
            f"evaluating {expression!r} in {frame_words(run, session, frame, frame_id is not None)} failed: {message}",
            code="evaluate_failed",
            frame_id=frame,
        ) from None
    value, cut = cap_value(str(body.get("result", "")), MAX_EVAL)
    ref = body.get("variablesReference", 0) or 0
    if ref:
        session.references.add(ref)
    kind = f" ({body['type']})" if body.get("type") else ""
    text = f"{expression}{kind} = {value}" + (f"  [reference {ref}: use action='variables']" if ref else "")
    return ToolResult.text(
        text,
        data={"result": value, "type": body.get("type"), "reference": ref, "frame_id": frame, "cut": cut},
    )
