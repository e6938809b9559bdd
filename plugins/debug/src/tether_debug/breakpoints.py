"""Breakpoints: the `breakpoints` action checks them against the source and keeps them per
conversation; they are sent to a live session's adapter (now, or at its launch), whose answers the
session keeps; and they are listed as the model reads them."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether import ToolError, ToolResult

from tether_debug.adapters import adapter_table, handles_safely
from tether_debug.args import DebugArgs

if TYPE_CHECKING:
    from tether.run import Run

    from tether_debug.session import Session
    from tether_debug.supervisor import DebugSupervisor


@attrs.define
class Plan:
    """A conversation's breakpoints, kept across sessions and sent at every launch."""

    lines: dict[str, list[dict[str, Any]]] = attrs.field(
        factory=dict
    )  # absolute path -> DAP SourceBreakpoints
    functions: list[str] = attrs.field(factory=list)
    exceptions: str = "uncaught"  # none / uncaught / raised


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
                    await set_breakpoints(live, str(path), [])
            said.append(f"{rel}: breakpoints cleared.")
            data["breakpoints"] = []
        elif live is not None:
            async with live.lock:
                rows = await set_breakpoints(live, str(path), specs)
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
                rows = await set_function_breakpoints(live, plan.functions)
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
                said.append(await set_exceptions(live, args.exceptions))
        else:
            said.append(f"exceptions={args.exceptions}: set when the program launches.")
        data["exceptions"] = args.exceptions
    if not said:  # no change asked for: the list
        text, listed = listing(run, supervisor, conversation, session)
        return ToolResult.text(text, data={**listed, "sent": live is not None})
    return ToolResult.text("\n".join(said), data=data)


# -- sent to a live session's adapter, its answers kept there ------------------------------------

OPTION_CAPABILITY = {
    "condition": "supportsConditionalBreakpoints",
    "hitCondition": "supportsHitConditionalBreakpoints",
    "logMessage": "supportsLogPoints",
}
OPTION_NAME = {"condition": "condition", "hitCondition": "hit_condition", "logMessage": "log_message"}
LLDB_CONDITION_ERROR = re.compile(
    r"error evaluating condition of breakpoint (\S+): \"(.*)\"\n(?:Couldn't parse conditional expression:\n)?((?:error: .*\n?)+)"
)


async def set_exceptions(session: Session, mode: str) -> str:
    """Choose when the program stops on exceptions: the adapter's filters for ``mode``; what was done, said."""
    assert session.client is not None
    offered = {
        f.get("filter"): f.get("label") or f.get("filter")
        for f in session.capabilities.get("exceptionBreakpointFilters") or ()
    }
    note = f" ({session.adapter.exception_note})" if session.adapter.exception_note else ""
    if not offered:
        said = f"exceptions={mode}: the {session.adapter.id} adapter offers no exception filters{note}."
    else:
        wanted = session.adapter.exception_modes.get(mode, ())
        filters = [f for f in wanted if f in offered]
        await session.client.request("setExceptionBreakpoints", {"filters": filters})
        if filters:
            said = (
                f"exceptions={mode}: filters "
                + ", ".join(f"{f} ({offered[f]})" for f in filters)
                + f"{note}."
            )
        elif mode == "none":
            said = f"exceptions=none: no exception filter is on{note}."
        else:
            said = (
                f"exceptions={mode}: the {session.adapter.id} adapter has no filter for this mode (it offers "
                + ", ".join(f"{f} ({label})" for f, label in offered.items())
                + f"){note}."
            )
    session.exceptions = (mode, said)
    return said


async def set_breakpoints(session: Session, path: str, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Send a file's breakpoints; one row per requested line: the adapter's answer and what was not sent."""
    assert session.client is not None
    rows: list[dict[str, Any]] = []
    sent: list[dict[str, Any]] = []
    for spec in specs:
        row: dict[str, Any] = {
            "requested": spec["line"],
            **{k: v for k, v in spec.items() if k != "line"},
        }
        unsupported = [
            k for k, cap in OPTION_CAPABILITY.items() if k in spec and not session.capabilities.get(cap)
        ]
        problem = (
            session.adapter.check_condition(spec["condition"])
            if "condition" in spec and session.adapter.check_condition
            else None
        )
        if problem:
            row.update(verified=False, message=f"the condition does not compile: {problem}")
        else:
            if unsupported:
                row["unsupported"] = [OPTION_NAME[k] for k in unsupported]
            sent.append({k: v for k, v in spec.items() if k not in unsupported})
        rows.append(row)
    body = await session.client.request(
        "setBreakpoints",
        {
            "source": {"path": path, "name": Path(path).name},
            "breakpoints": sent,
            "lines": [b["line"] for b in sent],
        },
    )
    answers = iter(body.get("breakpoints") or ())
    for row in rows:
        if "verified" not in row:
            row.update(
                next(answers, {"verified": False, "message": "the adapter did not answer for this line"})
            )
    if specs:
        session.breakpoints[path] = rows
    else:
        session.breakpoints.pop(path, None)
    messages = [r["logMessage"] for rs in session.breakpoints.values() for r in rs if r.get("logMessage")]
    session.logpoint = logpoint_pattern(messages, session.adapter.logpoint_prefix) if messages else None
    return rows


async def set_function_breakpoints(session: Session, names: list[str]) -> list[dict[str, Any]]:
    """Send the function breakpoints; one row per name: the adapter's answer, or why there is none."""
    assert session.client is not None
    if not session.capabilities.get("supportsFunctionBreakpoints"):
        rows = [
            {
                "function": n,
                "verified": False,
                "message": f"the {session.adapter.id} adapter has no function breakpoints",
            }
            for n in names
        ]
    else:
        answers = await _function_answers(session, names)
        rows = [
            {"function": n, **(answers[i] if i < len(answers) else {"verified": False})}
            for i, n in enumerate(names)
        ]
        look = session.adapter.find_functions
        verified = [r["function"] for r in rows if r.get("verified")]
        if look is not None and verified:
            # an adapter that verifies any name (debugpy): look for the functions ourselves
            missing = await asyncio.to_thread(look, session.root, verified)
            for row in rows:
                if row["function"] in missing:
                    row.update(found=False, message=missing[row["function"]])
    session.function_breakpoints = rows
    return rows


async def _function_answers(session: Session, names: list[str]) -> list[dict[str, Any]]:
    """The adapter's answers in the order of ``names``.

    lldb-dap answers in the order of its own map, not the request's: the names are then sent one
    more at a time, and each answer is known by the breakpoint id that appeared with its name.
    """
    client = session.client
    assert client is not None

    def send(some: list[str]):
        return client.request("setFunctionBreakpoints", {"breakpoints": [{"name": n} for n in some]})

    if not session.adapter.function_answers_unordered or len(names) < 2:
        return list((await send(names)).get("breakpoints") or ())
    ids: list[Any] = []
    answers: list[dict[str, Any]] = []
    for k in range(1, len(names) + 1):
        answers = list((await send(names[:k])).get("breakpoints") or ())
        ids.append(next((a.get("id") for a in answers if a.get("id") not in ids), None))
    by_id = {a.get("id"): a for a in answers}
    return [by_id.get(i, {"verified": False}) for i in ids]


def condition_failures(session: Session, text: str) -> list[str]:
    """lldb-dap accepts any condition and fails at the hit: mark those breakpoints unverified, say why."""
    said = []
    for m in LLDB_CONDITION_ERROR.finditer(text):
        for rows in session.breakpoints.values():
            for row in rows:
                if row.get("condition") == m.group(2) and row.get("verified"):
                    row.update(
                        verified=False, message=f"the condition does not compile: {m.group(3).strip()}"
                    )
                    said.append(
                        f"line {row['requested']}: the condition {m.group(2)!r} does not compile ({m.group(3).strip()})"
                    )
    return said


def logpoint_pattern(messages: list[str], prefix: str) -> re.Pattern[str]:
    """The lines logpoints print: an adapter's prefix, then one message's text with each {expression} any value."""

    def one(message: str) -> str:
        return ".*?".join(re.escape(p) for p in re.split(r"\{[^{}]*\}", message))

    return re.compile(f"{prefix}({'|'.join(f'(?:{one(m)})' for m in messages)})", re.DOTALL)


def bp_summary(run: Run, session: Session) -> str:
    if not session.breakpoints and not session.function_breakpoints:
        return ""
    parts = [describe_answers(run, path, answers)[0] for path, answers in session.breakpoints.items()]
    if session.function_breakpoints:
        parts.append(describe_functions(session.function_breakpoints, run, session.adapter.function_hint)[0])
    return "breakpoints: " + " | ".join(parts) + "\n"
