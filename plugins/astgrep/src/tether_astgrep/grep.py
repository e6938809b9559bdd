"""ast_grep: find code by its syntax shape, answered as file:line:col, the matched code and its captures."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

import attrs
from tether import ToolResult
from tether.output import cap_items

from tether_astgrep.args import MAX_RESULTS
from tether_astgrep.query import plan_query, plural, target_of

if TYPE_CHECKING:
    from tether.run import CallContext

    from tether_astgrep.args import GrepArgs
    from tether_astgrep.engine import FileResult
    from tether_astgrep.matcher import Match
    from tether_astgrep.mixed import Plan
    from tether_astgrep.parsers import ParserPool

SHOWN_LINES = 3  # of a long match
LINE_CHARS = 200
CAPTURE_CHARS = 80
_LOWER_VAR = re.compile(r"\$[a-z]")
DATA_TEXT_CHARS = 2000  # of a match's text or a capture in the structured data


async def ast_grep(ctx: CallContext, args: GrepArgs, pool: ParserPool) -> ToolResult:
    from tether_astgrep import mixed

    run = pool.run
    target = await target_of(pool, args)
    plan = plan_query(pool, args, target)
    pattern = plan.searched[0].pattern  # the only one, unless plan.mixed
    results = await mixed.search(pool, plan, ctx.progress)
    read = await asyncio.to_thread(_materialize, results, args.max_results, plan)
    for path in read.changed:
        pool.cache.drop(plan.of(path).pattern.key, path)
    results = read.results
    spans = [(r.path, span) for r in results for span in r.matches]
    total = len(spans)
    _, cut = cap_items(
        spans,
        args.max_results,
        "matches",
        f"Narrow path or the pattern, or raise max_results (at most {MAX_RESULTS}).",
    )
    shown = [(run.relpath(p), m) for p, m in read.shown]
    files_with = len({path for path, _ in spans})
    skipped = _skipped(results)
    searched = len(results) - sum(skipped.values())
    contexts = [p.rung for p in pattern.readings]
    if plan.mixed:
        said = f"{plural(searched, 'file')} searched, "
        said += mixed.languages_note(plan, results, _skip_note(skipped, target.ignored))
    else:
        read_as = mixed.reading(target.grammar, contexts)
        said = (
            f"{target.grammar.id}, {plural(searched, 'file')} searched{_skip_note(skipped, target.ignored)}"
        )
        said += f"; {read_as}" if read_as else ""
    head = f"{plural(total, 'match')} in {plural(files_with, 'file')} ({said})"
    lines = [head]
    failed = [r for r in results if r.status == "failed"]
    if failed:
        lines.append(
            f"could not search {plural(len(failed), 'file')} (an internal fault, logged; the other files were "
            "searched): "
            + "; ".join(f"{run.relpath(r.path)} ({r.detail})" for r in failed[:5])
            + (f" (and {len(failed) - 5} more)" if len(failed) > 5 else "")
        )
    if read.changed:
        lines.append(
            "note: changed during the search, so searched again and shown as they are now: "
            + ", ".join(run.relpath(p) for p in read.changed)
        )
    if not total and args.pattern and _LOWER_VAR.search(args.pattern):
        lines.append("note: $name in lowercase is literal text; metavariables are uppercase ($NAME, $$$NAME)")
    for rel, m in shown:
        if m is None:
            lines.append(f"{rel}: (deleted or unreadable since it was searched; search again)")
            continue
        text = _show_text(m.text)
        lines.append(f"{rel}:{m.start[0]}:{m.start[1]}: {text[0]}")
        lines.extend(f"    {t}" for t in text[1:])
        caps = [f"${'$$' if c.multi else ''}{name}={_show_capture(c.text)}" for name, c in m.captures.items()]
        if caps:
            lines.append("    " + "  ".join(caps))
    if cut:
        lines.append(cut)
    data = {
        "matches": [
            {
                "file": rel,
                "start": {"line": m.start[0], "column": m.start[1]},
                "end": {"line": m.end[0], "column": m.end[1]},
                "byte_range": [m.start_byte, m.end_byte],
                "text": _cut(m.text),
                "captures": {name: _cut(c.text) for name, c in m.captures.items()},
            }
            for rel, m in shown
            if m is not None
        ],
        "total": total,
        "files_searched": searched,
        "skipped": skipped,
        "ignored": target.ignored,
        # over several languages: None, and each language's reading in contexts_by_language
        "language": None if plan.mixed else target.grammar.id,
        "languages": {c.grammar.id: len(c.files) for c in plan.searched},
        "not_searched": {gid: n for gid, (n, _) in plan.refused.items()},
        "context": None if plan.mixed else pattern.rung,
        "contexts": [] if plan.mixed else contexts,
    }
    if plan.mixed:  # each language's reading, and why the others refused the pattern
        data["contexts_by_language"] = {
            c.grammar.id: [p.rung for p in c.pattern.readings] for c in plan.searched
        }
        data["refused"] = {gid: why for gid, (_, why) in plan.refused.items()}
    if read.changed:
        data["changed_while_searched"] = [run.relpath(p) for p in read.changed]
    return ToolResult.text("\n".join(lines), data)


@attrs.frozen
class _ReadBack:
    results: list[FileResult]  # those searched, a file's replaced by its search of the bytes read back
    shown: list[tuple[str, Match | None]]  # (path, its match, or None: the file could not be read again)
    changed: list[str]  # files that held other bytes when read back than when searched


def _materialize(results: list[FileResult], limit: int, plan: Plan) -> _ReadBack:
    """The first ``limit`` matches, their texts and positions read back from the files.

    Spans index the bytes that were searched, so they are shown only on those bytes: a file whose bytes read
    back differ (`engine.digest`; a rewrite since its search, also one that kept its stamp) is searched again
    from the bytes just read, its new result replaces the old one, and the matches shown are chosen again.
    """
    import itertools

    from tether_astgrep import engine
    from tether_astgrep.matcher import materialize

    read: dict[str, bytes | None] = {}
    changed: list[str] = []
    while True:
        shown = list(itertools.islice(((r.path, span) for r in results for span in r.matches), limit))
        wanted = {path for path, _ in shown}
        again: dict[str, FileResult] = {}
        for r in results:
            if r.path in wanted and r.path not in read:
                data = read[r.path] = _read_back(r.path)
                if data is not None and engine.digest(data) != r.digest:
                    c = plan.of(r.path)
                    again[r.path] = engine.search_data(r.path, data, c.pattern, c.grammar.language)
        if not again:
            break
        changed.extend(again)
        results = [again.get(r.path, r) for r in results]
    return _ReadBack(
        results,
        [(path, None if (data := read[path]) is None else materialize(span, data)) for path, span in shown],
        changed,
    )


def _read_back(path: str) -> bytes | None:
    """A file's bytes now, to show its matches from (None: deleted, unreadable, too large, or no longer a
    regular file: a path swapped for a FIFO is never waited on)."""
    from tether_astgrep import engine

    data = engine.read_file(path)
    return None if isinstance(data, str) else data


def _skipped(results: list[FileResult]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in results:
        if r.status != "searched":
            out[r.status] = out.get(r.status, 0) + 1
    return out


def _skip_note(skipped: dict[str, int], ignored: int) -> str:
    parts = [f"{n} {why}" for why, n in sorted(skipped.items())]
    if ignored:
        parts.append(f"{ignored} ignored (.gitignore, hidden, venv, node_modules)")
    return f"; skipped: {', '.join(parts)}" if parts else ""


def _show_text(text: str) -> list[str]:
    lines = text.split("\n")
    shown = [ln if len(ln) <= LINE_CHARS else ln[: LINE_CHARS - 3] + "..." for ln in lines[:SHOWN_LINES]]
    if len(lines) > SHOWN_LINES:
        shown.append(f"... ({len(lines) - SHOWN_LINES} more lines)")
    return shown


def _show_capture(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= CAPTURE_CHARS else one[: CAPTURE_CHARS - 3] + "..."


def _cut(text: str) -> str:
    return (
        text
        if len(text) <= DATA_TEXT_CHARS
        else text[:DATA_TEXT_CHARS] + f"... [{len(text) - DATA_TEXT_CHARS} more characters]"
    )
