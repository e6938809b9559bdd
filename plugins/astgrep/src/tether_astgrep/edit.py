"""ast_edit: a structural rewrite, staged (the core's resolve accepts or discards it), refused where it breaks the parse."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
from tether import ToolError, ToolResult

from tether_astgrep.query import plan_query, plural, target_of

if TYPE_CHECKING:
    from tether.run import CallContext, Run

    from tether_astgrep.args import EditArgs
    from tether_astgrep.grammars import Grammar
    from tether_astgrep.mixed import Plan
    from tether_astgrep.parsers import ParserPool
    from tether_astgrep.pattern import Pattern
    from tether_astgrep.rules import Rule

log = logging.getLogger("tether.astgrep")


async def _matches_anywhere(pool: ParserPool, plan: Plan, ctx: CallContext) -> bool:
    for c in plan.searched:
        if any(r.matches for r in await pool.search(c.pattern, c.grammar, c.files, ctx.progress)):
            return True
    return False


async def ast_edit(ctx: CallContext, args: EditArgs, pool: ParserPool) -> ToolResult:
    from tether.atomic import Snapshot

    from tether_astgrep import mixed
    from tether_astgrep.rewrite import template_names

    run = pool.run
    target = await target_of(pool, args)
    plan = plan_query(pool, args, target)
    try:
        plan = mixed.for_rewrite(plan, template_names(args.rewrite))
    except ToolError as exc:
        # a rewrite naming what the pattern does not capture would write "$B" as text where the pattern
        # matches: refused there. Where it matches nothing there is nothing to refuse (ast-grep answers
        # no match): said so, with the reason it would have been refused
        if exc.code != "unbound_metavariable" or await _matches_anywhere(pool, plan, ctx):
            raise
        return ToolResult.text(
            f"no replacements: the pattern matches nothing in '{target.base}'; nothing was staged. Note: "
            + exc.message,
            {"edit_id": None, "replacements": 0, "files": [], "unbound": exc.data and exc.data.get("names")},
        )
    done = _Rewrites([], [], [])
    for c in plan.searched:  # each language's files, as that language reads the pattern
        results = await pool.search(c.pattern, c.grammar, c.files, ctx.progress)
        paths = [r.path for r in results if r.matches]
        part = await asyncio.to_thread(_rewrite_files, c.pattern, c.grammar, paths, args.rewrite)
        done.changes.extend(part.changes)
        done.untouched.extend(part.untouched)
        done.failed.extend(part.failed)
    notes = []
    if plan.mixed:
        notes.append(mixed.languages_of(plan))
    if done.untouched:
        grammars = sorted({plan.of(p).grammar.id for p, _ in done.untouched})
        notes.append(
            f"left as they were ({len(done.untouched)}): matches holding code the {'/'.join(grammars)} grammar "
            f"could not parse, which the rewrite would drop: {_places(run, done.untouched)}. Edit those by hand."
        )
    if done.failed:
        notes.append(
            "not rewritten (the rewrite failed there; see the log): "
            + "; ".join(f"{run.relpath(p)} ({why})" for p, why in done.failed[:5])
        )
    changed = done.changes
    if not changed:
        return ToolResult.text(
            "\n".join(
                [
                    f"no replacements: the pattern matches nothing in '{target.base}' that the rewrite would change; "
                    "nothing was staged",
                    *notes,
                ]
            ),
            {"edit_id": None, "replacements": 0, "files": []},
        )
    broken = [(c.path, line, what) for c in changed for line, what in c.errors]
    tails = [(c.path, line) for c in changed for line in c.tails]
    if broken and not args.allow_parse_errors:
        kept = [t for t in tails if any(t[0] == p for p, *_ in broken)]
        why = (
            f" The matches at {_places(run, kept)} went on past the pattern and that code was kept after the "
            "replacement (add $$$REST to the pattern and the rewrite to move it yourself)."
            if kept
            else ""
        )
        listing = "; ".join(f"{run.relpath(p)}:{line} ({what})" for p, line, what in broken[:20])
        more = f" (and {len(broken) - 20} more)" if len(broken) > 20 else ""
        raise ToolError(
            f"refused: the rewrite adds syntax errors to {plural(len({p for p, *_ in broken}), 'file')} (lines of "
            f"the rewritten file): {listing}{more}. Nothing was staged.{why} Fix the rewrite template, narrow path, or "
            "pass allow_parse_errors=true to stage it anyway",
            code="breaks_parse",
            errors=[{"file": run.relpath(p), "line": line, "what": what} for p, line, what in broken],
        )
    from tether.staging import diff_lines, preview

    replacements = sum(c.replacements for c in changed)
    snapshots = [Snapshot.of(Path(c.path), c.old) for c in changed]
    contents: dict[Path, bytes | None] = {Path(c.path): c.new for c in changed}
    found = await preview(run, contents)
    what = plural(replacements, "replacement")
    edit = run.staging.stage("ast_edit", contents, snapshots, what, found)
    rels = [run.relpath(c.path) for c in changed]
    lines = [
        (
            f"(proposed) {what} in {plural(len(changed), 'file')}; nothing is written until you call resolve "
            f'with edit_id "{edit.edit_id}" and action "accept" (or "discard"; with if_clean: true it writes only '
            "if this preview found no new errors)."
        )
    ]
    if broken:
        lines.append(
            "WARNING: staged with allow_parse_errors; the rewrite adds syntax errors at (lines of the rewritten file): "
            + "; ".join(f"{run.relpath(p)}:{line} ({what})" for p, line, what in broken[:20])
        )
    if tails:
        lines.append(
            f"{len(tails)} of the matched nodes went on past the end of the pattern; that code is kept after the "
            f"replacement (add $$$REST to the pattern and the rewrite to move it yourself), at (new) {_places(run, tails)}"
        )
    lines.extend(notes)
    lines.extend(found.render(rels))
    lines.extend(diff_lines(run, {Path(c.path): c.old for c in changed}, contents))
    data = {
        "edit_id": edit.edit_id,
        "replacements": replacements,
        "files": rels,
        "preview": found.to_json(),
        "kept_tails": len(tails),
        "tails": [{"file": run.relpath(p), "line": line} for p, line in tails],
    }
    if broken:
        data["parse_errors"] = [
            {"file": run.relpath(p), "line": line, "what": what} for p, line, what in broken
        ]
    if done.untouched:
        data["untouched"] = [{"file": run.relpath(p), "line": line} for p, line in done.untouched]
    return ToolResult.text("\n".join(lines), data)


@attrs.frozen
class _Rewrites:
    changes: list[_Change]
    untouched: list[tuple[str, int]]  # (path, line) of matches left as they were: unparsed code inside
    failed: list[tuple[str, str]]  # (path, what went wrong)


@attrs.frozen
class _Change:
    path: str
    old: bytes
    new: bytes
    replacements: int
    tails: tuple[int, ...]  # lines (of the new content) of replacements whose match went on past the pattern
    errors: tuple[tuple[int, str], ...]  # syntax errors the rewrite added (`rewrite.added_errors`)


def _rewrite_files(pattern: Pattern | Rule, grammar: Grammar, paths: list[str], template: str) -> _Rewrites:
    """Each file the rewrite changes, re-parsed: the syntax errors the rewrite added to it.

    Each file is read once more and matched again here, so the change and the snapshot taken for
    `resolve` come from the same bytes.
    """
    from tether_astgrep import engine, rewrite

    out = _Rewrites([], [], [])
    for path in paths:
        data = engine.read_file(path)
        if isinstance(data, str) or engine.classify(data) is not None:
            continue
        try:
            tree, matches = engine.search_source(data, pattern, grammar.language)
            root = tree.root_node
            safe = []
            for m in matches:
                if rewrite.unparsed_inside(root, m):
                    out.untouched.append((path, m.start[0]))
                else:
                    safe.append(m)
            if not safe:
                continue
            done = rewrite.apply(data, safe, template)
            if done.content == data:
                continue
            errors = rewrite.added_errors(
                root, engine.parse(done.content, pattern, grammar.language).root_node, done
            )
        except Exception as exc:  # one file never fails the whole rewrite
            log.warning("rewriting %s failed", path, exc_info=True)
            out.failed.append((path, f"{type(exc).__name__}: {exc}"[:200]))
            continue
        tails = tuple(_line(done.content, b) for b in done.tails)
        out.changes.append(_Change(path, data, done.content, done.replacements, tails, tuple(errors)))
    return out


def _line(data: bytes, byte: int) -> int:
    return data.count(b"\n", 0, byte) + 1


def _places(run: Run, where: list[tuple[str, int]], limit: int = 10) -> str:
    """`a.py:3, b.py:10, ... (and N more)`."""
    shown = ", ".join(f"{run.relpath(p)}:{line}" for p, line in where[:limit])
    return shown + (f" (and {len(where) - limit} more)" if len(where) > limit else "")
