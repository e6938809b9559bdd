"""The `breakpoints` action: checked against the source, kept per conversation, sent when a session lives."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether import ToolError, ToolResult

from tether_debug.adapters import adapter_table, handles_safely
from tether_debug.args import DebugArgs

if TYPE_CHECKING:
    from tether.run import Run

    from tether_debug.session import Session
    from tether_debug.supervisor import DebugSupervisor


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
            code="bad_line",
            lines=bad_range,
        )
    empty = []
    for n in lines:
        text = source[n - 1].strip()
        if not text or any(text.startswith(p) for p in comment_prefixes):
            empty.append(n)
    if empty:
        hints = []
        for n in empty:
            nxt = next(
                (i for i in range(n + 1, len(source) + 1) if is_code(source[i - 1], comment_prefixes)), None
            )
            hints.append(f"{n} (next line with code: {nxt})" if nxt else str(n))
        raise ToolError(
            f"no code on line(s) {', '.join(hints)} of '{run.relpath(path)}' (blank or comment): a breakpoint there "
            "would never be hit. Put it on a line with a statement.",
            code="no_code",
            lines=empty,
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


def check_log_message(message: str) -> None:
    depth = 0
    for ch in message:
        depth += (ch == "{") - (ch == "}")
        if depth not in (0, 1):
            break
    if depth != 0:
        raise ToolError(
            f"log_message {message!r} has an unbalanced brace: each {{expression}} needs its closing brace (and no "
            "brace may stand alone or nest). Write e.g. 'i={i} total={total}'.",
            code="bad_log_message",
        )


def specs_from(args: DebugArgs) -> list[dict[str, Any]]:
    """The DAP SourceBreakpoints of one call: `lines` plain, `points` with their options (a point wins a line)."""
    specs = {n: {"line": n} for n in args.lines or ()}
    for p in args.points or ():
        spec: dict[str, Any] = {"line": p.line}
        if p.condition:
            spec["condition"] = p.condition
        if p.hit_condition:
            spec["hitCondition"] = p.hit_condition
        if p.log_message:
            check_log_message(p.log_message)
            spec["logMessage"] = p.log_message
        specs[p.line] = spec
    return [specs[n] for n in sorted(specs)]


def row_words(r: dict[str, Any]) -> str:
    """One breakpoint as a model reads it: its line, options, and what the adapter made of it."""
    requested, line, verified = r.get("requested"), r.get("line"), r.get("verified")
    opts = []
    if r.get("condition"):
        opts.append(f"if {r['condition']}")
    if r.get("hitCondition"):
        opts.append(f"hits {r['hitCondition']}")
    if r.get("logMessage"):
        opts.append(f"logs {r['logMessage']!r}")
    text = f"line {requested}" + (f" ({', '.join(opts)})" if opts else "")
    if verified is None:
        text += " kept, sent at launch"
    elif not verified:
        text += " not verified" + (f": {r['message']}" if r.get("message") else "")
    elif line and line != requested:
        text += f" verified, bound to line {line}"
    else:
        text += " verified"
    if r.get("unsupported"):
        text += f" ({', '.join(r['unsupported'])} not supported by this adapter: not sent)"
    return text


def public_row(r: dict[str, Any]) -> dict[str, Any]:
    row = {
        "requested": r.get("requested"),
        "line": r.get("line") or r.get("requested"),
        "verified": r.get("verified"),
    }
    for key, name in (
        ("condition", "condition"),
        ("hitCondition", "hit_condition"),
        ("logMessage", "log_message"),
        ("message", "message"),
        ("unsupported", "unsupported"),
    ):
        if r.get(key):
            row[name] = r[key]
    return row


def describe_answers(run: Run, path: str, answers: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    return f"{run.relpath(path)}: " + "; ".join(row_words(a) for a in answers), [
        public_row(a) for a in answers
    ]


def describe_functions(rows: list[dict[str, Any]], run: Run, hint: str) -> tuple[str, list[dict[str, Any]]]:
    parts, out = [], []
    for r in rows:
        verified = r.get("verified")
        path = (r.get("source") or {}).get("path")
        shown = run.relpath(path) if verified and path else None
        where = f" at {shown}:{r.get('line')}" if shown else ""
        if verified is None:
            state = "kept, sent at launch"
        elif verified:
            state = "verified" + where + (f", but {r['message']}" if r.get("found") is False else "")
        else:
            state = "not verified" + (f": {r['message']}" if r.get("message") else "")
        parts.append(f"{r['function']} {state}")
        row = {"function": r["function"], "verified": verified}
        if shown:
            row.update(file=shown, line=r.get("line"))
        if r.get("message"):
            row["message"] = r["message"]
        if r.get("found") is False:
            row["found"] = False
        out.append(row)
    text = "function breakpoints: " + "; ".join(parts)
    if hint and any(r.get("verified") is False or r.get("found") is False for r in rows):
        text += f". Write names as the adapter expects: {hint}"
    return text, out


def listing(
    run: Run, supervisor: DebugSupervisor, conversation: str, session: Session | None
) -> tuple[str, dict[str, Any]]:
    """Every breakpoint: from the live session (verified, bound line) or kept for the next launch."""
    plan = supervisor.plan_for(conversation)
    if session is not None and session.client is not None:
        files = [(p, rows) for p, rows in session.breakpoints.items()]
        functions = session.function_breakpoints
        exceptions = session.exceptions[1] or f"exceptions={plan.exceptions}"
    else:
        files = [
            (p, [{"requested": s["line"], "verified": None, **s} for s in specs])
            for p, specs in plan.lines.items()
        ]
        functions = [{"function": n, "verified": None} for n in plan.functions]
        exceptions = f"exceptions={plan.exceptions}"
    lines, data_files = [], []
    for path, rows in files:
        text, public = describe_answers(run, path, rows)
        lines.append(text)
        data_files.append({"file": run.relpath(path), "breakpoints": public})
    data: dict[str, Any] = {"files": data_files, "exceptions": plan.exceptions}
    if functions:
        hint = session.adapter.function_hint if session is not None else ""
        text, data["functions"] = describe_functions(functions, run, hint)
        lines.append(text)
    lines.append(exceptions)
    return "\n".join(lines), data


async def breakpoints_action(
    run: Run, supervisor: DebugSupervisor, conversation: str, session: Session | None, args: DebugArgs
) -> ToolResult:
    live = session if session is not None and session.client is not None else None  # sent now, not kept
    plan = supervisor.plan_for(conversation)
    said: list[str] = []
    data: dict[str, Any] = {"sent": live is not None}
    if (args.file is None) != (args.lines is None and args.points is None):
        raise ToolError(
            "action='breakpoints' needs file (relative to the root) and lines (a list of 1-based line numbers; [] clears "
            "the file) or points together; functions=[...] and exceptions=... stand alone; with none of them it lists "
            "the breakpoints."
        )
    if args.file is not None:
        path = run.resolve_path(args.file, must_exist=True)
        if not path.is_file():
            raise ToolError(f"'{run.relpath(path)}' is not a file; breakpoints go on lines of a source file.")
        specs = specs_from(args)
        if specs:
            check_lines(run, path, [s["line"] for s in specs], prefixes_for(run, path, session))
        rel = run.relpath(path)
        if specs:
            plan.lines[str(path)] = specs
        else:
            plan.lines.pop(str(path), None)
        data["file"] = rel
        if not specs:
            if live is not None:
                async with live.lock:
                    await live.set_breakpoints(str(path), [])
            said.append(f"{rel}: breakpoints cleared.")
            data["breakpoints"] = []
        elif live is not None:
            async with live.lock:
                rows = await live.set_breakpoints(str(path), specs)
            text, data["breakpoints"] = describe_answers(run, str(path), rows)
            said.append(text)
        else:
            rows = [{"requested": s["line"], "verified": None, **s} for s in specs]
            text, data["breakpoints"] = describe_answers(run, str(path), rows)
            said.append(text + " (they are sent when the program launches)")
    if args.functions is not None:
        plan.functions = list(dict.fromkeys(n.strip() for n in args.functions if n.strip()))
        if live is not None:
            async with live.lock:
                rows = await live.set_function_breakpoints(plan.functions)
            hint = live.adapter.function_hint
        else:
            rows, hint = [{"function": n, "verified": None} for n in plan.functions], ""
        text, data["functions"] = (
            describe_functions(rows, run, hint) if rows else ("function breakpoints cleared.", [])
        )
        said.append(text)
    if args.exceptions is not None:
        plan.exceptions = args.exceptions
        if live is not None:
            async with live.lock:
                said.append(await live.set_exceptions(args.exceptions))
        else:
            said.append(f"exceptions={args.exceptions}: set when the program launches.")
        data["exceptions"] = args.exceptions
    if not said:  # no change asked for: the list
        text, listed = listing(run, supervisor, conversation, session)
        return ToolResult.text(text, data={**listed, "sent": live is not None})
    return ToolResult.text("\n".join(said), data=data)


def bp_summary(run: Run, session: Session) -> str:
    if not session.breakpoints and not session.function_breakpoints:
        return ""
    parts = [describe_answers(run, path, answers)[0] for path, answers in session.breakpoints.items()]
    if session.function_breakpoints:
        parts.append(describe_functions(session.function_breakpoints, run, session.adapter.function_hint)[0])
    return "breakpoints: " + " | ".join(parts) + "\n"
