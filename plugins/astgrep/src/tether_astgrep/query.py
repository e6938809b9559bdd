"""What both tools are asked: which grammar, which files, and the pattern or rule as each language reads it.

`ast_grep` (`tether_astgrep.grep`) and `ast_edit` (`tether_astgrep.edit`) take the same pattern, rule, path
and language arguments, and turn them into a `Target` and a `mixed.Plan` here, with the same refusals.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether import ToolError

if TYPE_CHECKING:
    from tether_astgrep.args import EditArgs, GrepArgs
    from tether_astgrep.files import FileEntry
    from tether_astgrep.grammars import Grammar
    from tether_astgrep.mixed import Part, Plan
    from tether_astgrep.parsers import ParserPool
    from tether_astgrep.pattern import Pattern
    from tether_astgrep.rules import Rule


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


async def find_target(pool: ParserPool, path: str, language: str | None) -> Target:
    """The grammar and the files of ``path``: a file as ``language`` or its extension's language, a folder's
    files of ``language``, or, without one, of every known language under it (most files first)."""
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


async def target_of(pool: ParserPool, args: GrepArgs | EditArgs) -> Target:
    """`find_target`, for the language argument, or else for the language a rule file names (`language:`).

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
        return await find_target(pool, args.path, args.language)
    try:
        target = await find_target(pool, args.path, said)
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


def compile_query(
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


def plan_query(pool: ParserPool, args: GrepArgs | EditArgs, target: Target) -> Plan:
    """The pattern (or rule) as each language of the target reads it (`mixed.plan`)."""
    from tether_astgrep import mixed

    what = "rule" if args.rule is not None and args.pattern is None else "pattern"
    return mixed.plan(
        target.parts, lambda g: compile_query(pool, args.pattern, g, args.rule), target.base, what
    )


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 'es' if word.endswith('ch') else 's'}"
