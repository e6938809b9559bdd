"""A folder of several languages searched without a `language`: each file as the language of its extension.

The ast-grep CLI does the same when it is given no language: it compiles the pattern once per language it
meets and searches a language's files only where the pattern parses in that language. Here each language
is compiled once, the languages that refuse the pattern are named (with their reasons in the data), and
the others are searched; when every language refuses, the answer gives each one's reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs
from tether import ToolError

if TYPE_CHECKING:
    from tether_astgrep.engine import FileResult
    from tether_astgrep.files import FileEntry
    from tether_astgrep.grammars import Grammar
    from tether_astgrep.parsers import ParserPool, Progress
    from tether_astgrep.pattern import Pattern
    from tether_astgrep.rules import Rule

REASON_CHARS = 300  # of one language's refusal, when every language refused


@attrs.frozen
class Part:
    """The files of one language under the searched path."""

    grammar: Grammar
    files: list[FileEntry]


@attrs.frozen
class Compiled:
    """One language's files and the pattern (or rule) as that language reads it."""

    grammar: Grammar
    pattern: Pattern | Rule
    files: list[FileEntry]


@attrs.frozen
class Plan:
    searched: list[Compiled]  # most files first
    refused: dict[str, tuple[int, str]]  # language -> (its files, why the pattern does not parse there)
    what: str = "pattern"  # or "rule"
    uncaptured: dict[str, int] = attrs.Factory(dict)  # a rewrite's languages whose reading lacks its names
    by_path: dict[str, Compiled] = attrs.field(
        default=attrs.Factory(
            lambda self: {f.path: c for c in self.searched for f in c.files}, takes_self=True
        )
    )

    @property
    def refusal(self) -> str:
        return "pattern does not parse as" if self.what == "pattern" else "rule cannot be used in"

    @property
    def mixed(self) -> bool:
        return len(self.searched) + len(self.refused) + len(self.uncaptured) > 1

    def of(self, path: str) -> Compiled:
        """The language (and its reading of the pattern) a searched file was searched as."""
        return self.by_path[path]


def plan(parts: Sequence[Part], compile: Callable[[Grammar], Pattern | Rule], base: str, what: str) -> Plan:
    """Each language's reading of the pattern; raises the refusal itself when there is one language, and
    one paragraph with every language's reason when all of them refuse."""
    if len(parts) == 1:
        part = parts[0]
        return Plan([Compiled(part.grammar, compile(part.grammar), part.files)], {}, what)
    searched: list[Compiled] = []
    refused: dict[str, tuple[int, str]] = {}
    for part in parts:
        try:
            searched.append(Compiled(part.grammar, compile(part.grammar), part.files))
        except ToolError as exc:
            if exc.code not in ("bad_pattern", "bad_rule"):
                raise  # neither or both of pattern and rule: the same for every language
            refused[part.grammar.id] = (len(part.files), exc.message)
    if not searched:
        reasons = "; ".join(f"as {gid} ({_n(n, 'file')}): {_cut(why)}" for gid, (n, why) in refused.items())
        raise ToolError(
            f"the {what} parses in none of the languages of the files under '{base}', each file's language "
            f"told by its extension. {reasons}. Fix the {what}, or pass language to say which grammar it is "
            "written in",
            code="bad_pattern",
            languages={gid: n for gid, (n, _) in refused.items()},
            refused={gid: why for gid, (_, why) in refused.items()},
        )
    return Plan(searched, refused, what)


def for_rewrite(plan: Plan, names: Sequence[str]) -> Plan:
    """The languages whose reading of the pattern captures every metavariable the rewrite uses; the others
    are left out and counted (YAML reads `$S.split($A)` as a scalar, which captures nothing). When no
    language captures them all, the refusal names what the pattern does capture."""
    keep = [c for c in plan.searched if set(names) <= c.pattern.names]
    if not keep:
        c = plan.searched[0]
        unbound = [n for n in names if n not in c.pattern.names]
        defined = ", ".join(f"${n}" for n in sorted(c.pattern.names)) or "none"
        read = f" as {c.grammar.id} reads it" if plan.mixed else ""
        raise ToolError(
            f"the rewrite uses {', '.join('$' + n for n in unbound)}, which the {plan.what}{read} does not capture "
            f"(it captures: {defined}); capture it in the {plan.what} or write the code out in the rewrite",
            code="unbound_metavariable",
            names=unbound,
        )
    left = {c.grammar.id: len(c.files) for c in plan.searched if c not in keep}
    return Plan(keep, plan.refused, plan.what, left) if left else plan


def _cut(text: str) -> str:
    text = text.rstrip(". ")
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 3] + "..."


async def search(pool: ParserPool, plan: Plan, progress: Progress | None) -> list[FileResult]:
    """Every searched file's result; over several languages, in the order of the files' paths."""
    results: list[FileResult] = []
    for c in plan.searched:
        results.extend(await pool.search(c.pattern, c.grammar, c.files, progress))
    if len(plan.searched) > 1:
        results.sort(key=lambda r: r.path)
    return results


def _how(grammar: Grammar, contexts: list[str]) -> str:
    """'as an expression and as a type (both searched)', 'through ... error recovery', or '' for the grammar's
    first context."""
    from tether_astgrep.pattern import RECOVERED, SOUND_NODE

    if contexts == [RECOVERED]:
        return "through tree-sitter's error recovery"
    if contexts == [SOUND_NODE]:
        return (
            "as ast-grep reads it, through tree-sitter's error recovery: the whole file has a syntax error "
            "around one sound node, and that node is the pattern (a context may read it otherwise)"
        )
    if contexts in ([grammar.ladder[0].name], ["rule"]):
        return ""
    return (
        "as "
        + " and as ".join(f"{'an' if c[0] in 'aeiou' else 'a'} {c}" for c in contexts)
        + (" (both searched)" if len(contexts) == 2 else " (all searched)" if contexts[2:] else "")
    )


_RECOVERY = (
    "as ast-grep reads it: it parses in no context, so each ERROR node in it matches a node of any kind with the "
    "same children (check the matches)"
)


def reading(grammar: Grammar, contexts: list[str]) -> str:
    """How one language read the pattern, when that is worth saying ('' for the grammar's first context)."""
    how = _how(grammar, contexts)
    return f"pattern read {how}" + (f", {_RECOVERY}" if how.startswith("through") else "") if how else ""


def languages_note(plan: Plan, results: Sequence[FileResult], skipped: str) -> str:
    """'each as the language of its extension: c: 693 matches in 91 files, ruby: 370 in 16; ...' for a search
    over several languages: the matches and files of each, how each read the pattern, which refused it."""
    per: dict[str, tuple[int, int]] = {}
    for r in results:
        gid = plan.of(r.path).grammar.id
        n, searched = per.get(gid, (0, 0))
        per[gid] = (n + len(r.matches), searched + (r.status == "searched"))
    counts = []
    readings: dict[str, list[str]] = {}
    for c in sorted(plan.searched, key=lambda c: tuple(-x for x in per.get(c.grammar.id, (0, 0)))):
        gid = c.grammar.id
        n, files = per.get(gid, (0, 0))
        counts.append(
            f"{gid}: {n:,} in {files:,}" if counts else f"{gid}: {_n(n, 'match')} in {_n(files, 'file')}"
        )
        how = _how(c.grammar, [p.rung for p in c.pattern.readings])
        if how and n:  # said where it found something: a reading without a match is no news
            readings.setdefault(how, []).append(gid)
    note = "each as the language of its extension: " + ", ".join(counts) + skipped
    note += _refused(plan)
    for how, gids in readings.items():
        note += f"; {plan.what} read {how} in {', '.join(gids)}" + (
            f", {_RECOVERY}" if how.startswith("through") else ""
        )
    return note + "; pass language to search one"


def _refused(plan: Plan) -> str:
    """The languages that refused the pattern, with their files' counts, as a clause of a note."""
    if not plan.refused:
        return ""
    shown = ", ".join(f"{gid} ({_n(n, 'file')})" for gid, (n, _) in plan.refused.items())
    return f"; not searched, as the {plan.refusal} {shown}"


def _n(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 'es' if word.endswith('ch') else 's'}"


def languages_of(plan: Plan) -> str:
    """Which languages a rewrite over several languages searched, and which refused the pattern."""
    note = "each file read as the language of its extension; searched as " + ", ".join(
        f"{c.grammar.id} ({_n(len(c.files), 'file')})" for c in plan.searched
    )
    note += _refused(plan)
    if plan.uncaptured:
        note += "; not rewritten, as the " + plan.what + " captures no metavariable of the rewrite there: "
        note += ", ".join(f"{gid} ({_n(n, 'file')})" for gid, n in plan.uncaptured.items())
    return note + "; pass language to rewrite one"
