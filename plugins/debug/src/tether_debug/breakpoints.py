"""The `breakpoints` action: checked against the source, kept per conversation, sent when a session lives."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether import ToolError, ToolResult

from tether_debug.adapters import adapter_table, handles_safely

if TYPE_CHECKING:
    from tether.run import Run

    from tether_debug.session import Session
    from tether_debug.supervisor import DebugSupervisor
    from tether_debug.tool import DebugArgs


def check_lines(run: Run, path: Path, lines: list[int], comment_prefixes: tuple[str, ...]) -> None:
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
            nxt = next((i for i in range(n + 1, len(source) + 1) if is_code(source[i - 1], comment_prefixes)), None)
            hints.append(f"{n} (next line with code: {nxt})" if nxt else str(n))
        raise ToolError(
            f"no code on line(s) {', '.join(hints)} of '{run.relpath(path)}' (blank or comment): a breakpoint there "
            "would never be hit. Put it on a line with a statement.",
            data={"error": "no_code", "lines": empty},
        )


def is_code(text: str, comment_prefixes: tuple[str, ...]) -> bool:
    stripped = text.strip()
    return bool(stripped) and not any(stripped.startswith(p) for p in comment_prefixes)


def prefixes_for(run: Run, path: Path, session: Session | None) -> tuple[str, ...]:
    if session is not None:
        return session.adapter.comment_prefixes
    for adapter in adapter_table(run).values():
        if handles_safely(adapter, path):
            return adapter.comment_prefixes
    return ("//",) if path.suffix in (".c", ".h", ".cc", ".cpp", ".rs", ".go", ".dart") else ("#",)


def describe_answers(run: Run, path: str, answers: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
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


async def breakpoints_action(run: Run, supervisor: DebugSupervisor, conversation: str, session: Session | None, args: DebugArgs) -> ToolResult:
    if args.file is None or args.lines is None:
        raise ToolError("action='breakpoints' needs file (relative to the root) and lines (a list of 1-based line numbers; [] clears the file).")
    path = run.resolve_path(args.file, must_exist=True)
    if not path.is_file():
        raise ToolError(f"'{run.relpath(path)}' is not a file; breakpoints go on lines of a source file.")
    lines = sorted(set(args.lines))
    if lines:
        check_lines(run, path, lines, prefixes_for(run, path, session))
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
    text, rows = describe_answers(run, str(path), answers)
    return ToolResult.text(text, data={"file": rel, "breakpoints": rows, "sent": True})


def bp_summary(run: Run, session: Session) -> str:
    if not session.breakpoints:
        return ""
    parts = [describe_answers(run, path, answers)[0] for path, answers in session.breakpoints.items()]
    return "breakpoints: " + " | ".join(parts) + "\n"
