"""The tools: ast_grep (search by shape) and ast_edit (stage a rewrite; the core's resolve accepts or discards it)."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import tether
from tether import Tool, ToolError, ToolResult
from tether.output import cap_items

if TYPE_CHECKING:
    from tether_astgrep.engine import FileResult
    from tether_astgrep.files import FileEntry
    from tether_astgrep.grammars import Grammar
    from tether_astgrep.mixed import Part, Plan
    from tether_astgrep.parsers import ParserPool
    from tether_astgrep.pattern import Pattern
    from tether_astgrep.rules import Rule

log = logging.getLogger("tether.astgrep")

MAX_RESULTS = 1000
SHOWN_LINES = 3  # of a long match
LINE_CHARS = 200
CAPTURE_CHARS = 80
_LOWER_VAR = re.compile(r"\$[a-z]")
DATA_TEXT_CHARS = 2000  # of a match's text or a capture in the structured data


def _cut(text: str) -> str:
    return (
        text
        if len(text) <= DATA_TEXT_CHARS
        else text[:DATA_TEXT_CHARS] + f"... [{len(text) - DATA_TEXT_CHARS} more characters]"
    )


_RULE_HELP = (
    "Instead of pattern: an ast-grep rule object (as JSON), for what a pattern cannot say: pattern, kind, "
    'regex; inside, has, follows, precedes (with stopBy "neighbor"|"end"|rule, and field); all, any, not, '
    'matches. Or {"rule": ..., "constraints": {"A": rule}, "utils": {"name": rule}}. Or the same as text: '
    "JSON, or YAML as in an ast-grep rule file"
)


@attrs.frozen
class GrepArgs:
    pattern: str | None = tether.arg(
        "Code with metavariables, parsed with the file's grammar: $NAME matches one node, $$$NAME a "
        "list of nodes (arguments, statements), $_ matches without capturing; a repeated $NAME must "
        "match the same code. Give pattern or rule",
        default=None,
        examples=["print($A)", "$X.append($Y)", "def $F($$$ARGS): $$$BODY"],
    )
    rule: dict[str, Any] | str | None = tether.arg(
        _RULE_HELP,
        default=None,
        examples=[{"pattern": "open($F)", "not": {"inside": {"kind": "with_statement", "stopBy": "end"}}}],
    )
    path: str = tether.arg("File or folder to search, relative to the root", default=".")
    language: str | None = tether.arg(
        "Grammar id (python, javascript, typescript, tsx, go, rust, c, cpp, java, csharp, kotlin, swift, php, "
        "ruby, lua, bash, ..., or any tree-sitter-language-pack grammar). Without it each file is read as the "
        "language of its extension, and in a folder of several languages every language the pattern parses "
        "in is searched (as the ast-grep CLI does); give language to search one",
        default=None,
    )
    max_results: int = tether.arg(
        "Matches to show (the total is always counted)", default=50, minimum=1, maximum=MAX_RESULTS
    )


@attrs.frozen
class EditArgs:
    pattern: str | None = tether.arg(
        "Code with metavariables, as for ast_grep (give pattern or rule)",
        default=None,
        examples=["$X.append($Y)"],
    )
    rule: dict[str, Any] | str | None = tether.arg(_RULE_HELP + "; as for ast_grep", default=None)
    rewrite: str = tether.arg(
        "Replacement template: $NAME and $$$NAME are replaced by what the pattern captured",
        examples=["$X.extend([$Y])"],
    )
    path: str = tether.arg("File or folder to rewrite, relative to the root", default=".")
    language: str | None = tether.arg(
        "Grammar id; without it each file is read as the language of its extension, as for ast_grep",
        default=None,
    )
    allow_parse_errors: bool = tether.arg(
        "Stage the rewrite even when it adds syntax errors to a file (more than it had before; refused "
        "otherwise; the preview then lists each file:line)",
        default=False,
    )


# -- shared: which grammar, which files ---------------------------------------------------------------


@attrs.frozen
class Target:
    grammar: Grammar
    files: list[FileEntry]
    ignored: int
    base: str  # the path as shown
    more: tuple[Part, ...] = ()  # a folder searched without a language: its other languages, most files first

    @property
    def parts(self) -> list[Part]:
        from tether_astgrep.mixed import Part

        return [Part(self.grammar, self.files), *self.more]


async def _target(pool: ParserPool, path: str, language: str | None) -> Target:
    from tether_astgrep.files import FileEntry, walk

    run = pool.run
    target = run.resolve_path(path or ".", must_exist=True)
    registry = pool.registry()
    known = ", ".join(sorted(registry.by_id))
    grammar = None
    if language is not None:
        grammar = registry.by_id.get(language.strip().lower()) or pool.extra_grammar(language.strip().lower())
        if grammar is None:
            import difflib

            from tether_astgrep.grammars import pack_ids

            others = sorted(set(pack_ids()) - set(registry.by_id))
            close = difflib.get_close_matches(language.lower(), [*registry.by_id, *others], n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ToolError(
                f"unknown language '{language}'{hint}. Languages: {known}; and these grammars of "
                f"tree-sitter-language-pack, where a pattern is parsed as a whole file: {', '.join(others)}",
                code="unknown_language",
                languages=sorted(registry.by_id),
                pack_languages=others,
            )
    shown = run.relpath(target)
    if target.is_file():
        if grammar is None:
            gid = registry.for_path(target.name)
            if gid is None:
                raise ToolError(
                    f"cannot tell the language of '{shown}' from its extension; pass language (one of: {known})",
                    code="unknown_language",
                )
            grammar = registry.by_id[gid]
        st = target.stat()
        return Target(grammar, [FileEntry.of(str(target), st)], 0, shown)
    if not target.is_dir():
        raise ToolError(f"'{shown}' is neither a file nor a folder", code="bad_path")
    if grammar is not None:
        gid = grammar.id
        if gid in registry.by_id:
            wanted = lambda name: registry.for_path(name) == gid  # noqa: E731
        else:  # a language-pack grammar asked for by id: its usual extensions
            exts = tuple(e.lower() for e in grammar.extensions)
            if not exts:
                raise ToolError(
                    f"tether does not know the file extensions of '{gid}'; give path as a file to search it",
                    code="no_extensions",
                )
            wanted = lambda name: name.lower().endswith(exts)  # noqa: E731
        found = await asyncio.to_thread(walk, run.root, target, wanted)
        return Target(grammar, found.files, found.ignored, shown)
    from tether_astgrep.mixed import Part

    found = await asyncio.to_thread(walk, run.root, target, lambda name: registry.for_path(name) is not None)
    by_language: dict[str, list[FileEntry]] = {}
    for f in found.files:  # each file is its extension's language, as the ast-grep CLI infers it
        if (gid := registry.for_path(Path(f.path).name)) is not None:
            by_language.setdefault(gid, []).append(f)
    if not by_language:
        raise ToolError(
            f"no source files of a known language under '{shown}' (after .gitignore); check the path, or pass "
            f"language (one of: {known})",
            code="no_files",
        )
    first, *more = (
        Part(registry.by_id[gid], files)
        for gid, files in sorted(by_language.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    )
    return Target(first.grammar, first.files, found.ignored, shown, tuple(more))


async def _target_of(pool: ParserPool, args: GrepArgs | EditArgs) -> Target:
    """`_target`, for the language argument, or else for the language a rule file names (`language:`).

    The two must agree, and a rule's language must be that of the file or of some files searched.
    """
    said = None
    # the rules module is imported for a rule only: a pattern's first search does without it
    if args.rule is not None:
        from tether_astgrep.rules import RuleError, rule_language

        try:
            said = rule_language(args.rule)
        except RuleError as exc:
            raise ToolError(str(exc), code="bad_rule") from None
    if said is None or args.language is not None:
        if said is not None and args.language is not None and args.language.strip().lower() != said:
            raise ToolError(
                f"the rule says language: {said}, but the language argument is '{args.language}'; drop one of "
                "them or make them agree",
                code="language_mismatch",
                language=args.language,
                rule_language=said,
            )
        return await _target(pool, args.path, args.language)
    try:
        target = await _target(pool, args.path, said)
    except ToolError as exc:
        if exc.code != "unknown_language":
            raise
        fields = {k: v for k, v in (exc.data or {}).items() if k != "error"}
        raise ToolError("the rule's language: " + exc.message, code=exc.code, **fields) from None
    if pool.run.resolve_path(args.path or ".").is_file():
        gid = pool.registry().for_path(Path(target.files[0].path).name)
        if gid is not None and gid != target.grammar.id:
            raise ToolError(
                f"the rule says language: {said}, but '{target.base}' is a {gid} file; fix the rule's language, "
                f"or pass language='{said}' to parse it as {said} all the same",
                code="language_mismatch",
                rule_language=said,
                file_language=gid,
            )
    if not target.files:
        raise ToolError(
            f"the rule says language: {said}, but there are no {said} files under '{target.base}' (after "
            ".gitignore); fix the rule's language, or search another path",
            code="language_mismatch",
            rule_language=said,
        )
    return target


def _compile(
    pool: ParserPool, source: str | None, grammar: Grammar, rule: dict[str, Any] | str | None = None
) -> Pattern | Rule:
    """The pattern, or the rule (searched alike); exactly one of them is given."""
    from tether_astgrep.pattern import PatternError

    try:
        if rule is not None and source is None:
            return pool.rule(rule, grammar)
        if source is not None and rule is None:
            return pool.pattern(source, grammar)
    except PatternError as exc:
        error = "bad_rule" if rule is not None else "bad_pattern"
        raise ToolError(str(exc), code=error, language=grammar.id) from None
    raise ToolError(
        "give either pattern (code with metavariables, e.g. 'print($A)') or rule (an ast-grep rule object, "
        'e.g. {"pattern": "open($F)", "inside": {"kind": "function_definition", "stopBy": "end"}}), '
        + ("not both" if source is not None else "one of them is required"),
        code="bad_arguments",
    )


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


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 'es' if word.endswith('ch') else 's'}"


# -- ast_grep -------------------------------------------------------------------------------------------


def _show_text(text: str) -> list[str]:
    lines = text.split("\n")
    shown = [ln if len(ln) <= LINE_CHARS else ln[: LINE_CHARS - 3] + "..." for ln in lines[:SHOWN_LINES]]
    if len(lines) > SHOWN_LINES:
        shown.append(f"... ({len(lines) - SHOWN_LINES} more lines)")
    return shown


def _show_capture(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= CAPTURE_CHARS else one[: CAPTURE_CHARS - 3] + "..."


def _plan(pool: ParserPool, args: GrepArgs | EditArgs, target: Target) -> Plan:
    """The pattern (or rule) as each language of the target reads it (`mixed.plan`)."""
    from tether_astgrep import mixed

    what = "rule" if args.rule is not None and args.pattern is None else "pattern"
    return mixed.plan(target.parts, lambda g: _compile(pool, args.pattern, g, args.rule), target.base, what)


async def ast_grep(ctx: Any, args: GrepArgs, pool: ParserPool) -> ToolResult:
    from tether_astgrep import mixed

    run = pool.run
    target = await _target_of(pool, args)
    plan = _plan(pool, args, target)
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
        said = f"{_plural(searched, 'file')} searched, "
        said += mixed.languages_note(plan, results, _skip_note(skipped, target.ignored))
    else:
        read_as = mixed.reading(target.grammar, contexts)
        said = (
            f"{target.grammar.id}, {_plural(searched, 'file')} searched{_skip_note(skipped, target.ignored)}"
        )
        said += f"; {read_as}" if read_as else ""
    head = f"{_plural(total, 'match')} in {_plural(files_with, 'file')} ({said})"
    lines = [head]
    failed = [r for r in results if r.status == "failed"]
    if failed:
        lines.append(
            f"could not search {_plural(len(failed), 'file')} (an internal fault, logged; the other files were "
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
    shown: list[tuple[str, Any]]  # (path, Match, or None for a file that could not be read again)
    changed: list[str]  # files that held other bytes when read back than when searched


def _read_back(path: str) -> bytes | None:
    """A file's bytes now, to show its matches from (None: deleted, unreadable, too large, or no longer a
    regular file: a path swapped for a FIFO is never waited on)."""
    from tether_astgrep import engine

    data = engine.read_file(path)
    return None if isinstance(data, str) else data


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


# -- ast_edit -------------------------------------------------------------------------------------------


@attrs.frozen
class _Change:
    path: str
    old: bytes
    new: bytes
    replacements: int
    tails: tuple[int, ...]  # lines (of the new content) of replacements whose match went on past the pattern
    errors: tuple[tuple[int, str], ...]  # syntax errors the rewrite added (`rewrite.added_errors`)


@attrs.frozen
class _Rewrites:
    changes: list[_Change]
    untouched: list[tuple[str, int]]  # (path, line) of matches left as they were: unparsed code inside
    failed: list[tuple[str, str]]  # (path, what went wrong)


def _line(data: bytes, byte: int) -> int:
    return data.count(b"\n", 0, byte) + 1


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


def _places(run: Any, where: list[tuple[str, int]], limit: int = 10) -> str:
    """`a.py:3, b.py:10, ... (and N more)`."""
    shown = ", ".join(f"{run.relpath(p)}:{line}" for p, line in where[:limit])
    return shown + (f" (and {len(where) - limit} more)" if len(where) > limit else "")


async def ast_edit(ctx: Any, args: EditArgs, pool: ParserPool) -> ToolResult:
    from tether.atomic import Snapshot

    from tether_astgrep import mixed
    from tether_astgrep.rewrite import template_names

    run = pool.run
    target = await _target_of(pool, args)
    plan = _plan(pool, args, target)
    plan = mixed.for_rewrite(plan, template_names(args.rewrite))
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
            f"refused: the rewrite adds syntax errors to {_plural(len({p for p, *_ in broken}), 'file')} (lines of "
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
    what = _plural(replacements, "replacement")
    edit = run.staging.stage("ast_edit", contents, snapshots, what, found)
    rels = [run.relpath(c.path) for c in changed]
    lines = [
        (
            f"(proposed) {what} in {_plural(len(changed), 'file')}; nothing is written until you call resolve "
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


def tools_for(pool: ParserPool) -> list[Tool]:
    def bind(fn):
        async def handler(ctx: Any, args: Any) -> ToolResult:
            return await fn(ctx, args, pool)

        return handler

    return [
        Tool(
            "ast_grep",
            "read",
            "Find code by its syntax shape, not its text: the pattern is code with metavariables ($A, $$$ARGS), "
            "so `dispose($X)` matches every call to dispose however it is spaced, and never a string or comment. "
            "For conditions a pattern cannot state (not inside a `with`, inside a loop, a capture matching a "
            "regex) give an ast-grep rule object as rule instead. Answers file:line:col, the matched code and "
            "the captures.",
            GrepArgs,
            bind(ast_grep),
            family="astgrep",
        ),
        Tool(
            "ast_edit",
            "write",
            "Stage a structural rewrite: every match of pattern is replaced by rewrite, with captured "
            "metavariables substituted and re-indented. Only the code the pattern covers is replaced (code a "
            "matched node has past the end of the pattern stays; a rewrite that breaks the parse of a file is "
            "refused with file:line). Takes a rule instead of a pattern, as ast_grep. Writes nothing: answers a "
            "diff preview, the diagnostics the change would introduce (checked without writing), and an edit_id for "
            "resolve.",
            EditArgs,
            bind(ast_edit),
            family="astgrep",
            stages=True,
        ),
    ]
