"""Grammar definitions: which tree-sitter language parses which files, and how a pattern is wrapped.

A pattern is a fragment, not a file: `fmt.Println($$$A)` at the top of a Go file is a type
conversion and `dispose(x)` at the top of a Dart file is a function signature. So each grammar has a
*ladder* of contexts (statement, expression, class member, declaration); a pattern is parsed inside
each in turn and the first one that yields no ERROR node is used (see `tether_astgrep.pattern`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import attrs

PLACEHOLDER = "PATTERN"


@attrs.frozen
class Rung:
    """One context of a ladder: ``template`` holds the pattern where it says PATTERN.

    ``indent`` is put before every pattern line after the first (Python bodies need it). ``tail`` is
    text of the template right after PATTERN that the pattern's node may take in (Dart's statement
    rung adds the `;` a call statement needs: its grammar has no node for a bare call).
    """

    name: str
    template: str = PLACEHOLDER
    indent: str = ""
    tail: str = ""

    def wrap(self, pattern: str) -> tuple[str, int, int]:
        """The wrapped source and where the (indented) pattern starts and ends in it, in characters."""
        head, tail = self.template.split(PLACEHOLDER, 1)
        body = pattern.replace("\n", "\n" + self.indent) if self.indent else pattern
        return head + body + tail, len(head), len(head) + len(body)


@attrs.frozen
class Grammar:
    """A language the family can search.

    ``language`` loads the tree-sitter language (a `tree_sitter.Language` or the capsule a grammar
    wheel's ``language()`` returns). ``expando`` stands for ``$`` in patterns of languages where
    ``$`` cannot be part of an identifier (as ast-grep does, so metavariables parse as identifiers).
    """

    id: str
    extensions: tuple[str, ...] = attrs.field(converter=tuple)
    language: Callable[[], Any] = attrs.field(repr=False)
    ladder: tuple[Rung, ...] = attrs.field(converter=tuple, default=(Rung("file"),))
    expando: str = "$"
    # groups of leaf kinds a lone name in a pattern may stand for: a bare `ClassName` parses as an
    # `identifier`, but the code names the class as a `type_identifier` too
    same_names: tuple[tuple[str, ...], ...] = ()


def pack_language(name: str) -> Any:
    """A grammar bundled in tree-sitter-language-pack 0.13 (offline: the grammars are in the wheel)."""
    from tree_sitter_language_pack import get_language

    return get_language(name)


def _pack(name: str) -> Callable[[], Any]:
    return functools.partial(pack_language, name)


_JS_LADDER = (
    Rung("statement"),  # a JS/TS file is a statement list, so this is ast-grep's own parse
    Rung("expression", "(PATTERN)"),
    Rung("class member", "class _ {\nPATTERN\n}"),
)
_TS_NAMES = (("identifier", "type_identifier"),)
_C_LADDER = (
    Rung("statement", "void _(void) {\nPATTERN\n}"),
    Rung("expression", "void _(void) { _ = PATTERN; }"),
    Rung("declaration"),
)


def builtin_grammars() -> list[Grammar]:
    """The languages with a ladder and tests out of the box."""
    return [
        Grammar("python", (".py", ".pyi"), _pack("python"), (
            Rung("statement"),  # a Python module is a statement list
            Rung("class member", "class _:\n    PATTERN\n", indent="    "),
            Rung("clause", "try:\n    pass\nPATTERN\n"),  # `except $E as $N: $$$B`, `finally: ...`
            Rung("clause", "if _:\n    pass\nPATTERN\n"),  # `elif $C: ...`, `else: ...`
        ), expando="µ"),
        Grammar("javascript", (".js", ".mjs", ".cjs", ".jsx"), _pack("javascript"), _JS_LADDER),
        Grammar("typescript", (".ts", ".mts", ".cts"), _pack("typescript"), _JS_LADDER, same_names=_TS_NAMES),
        Grammar("tsx", (".tsx",), _pack("tsx"), _JS_LADDER, same_names=_TS_NAMES),
        Grammar("go", (".go",), _pack("go"), (
            Rung("statement", "package _\nfunc _() {\nPATTERN\n}"),
            Rung("expression", "package _\nvar _ = PATTERN"),
            Rung("declaration", "package _\nPATTERN"),
            Rung("file"),
        ), expando="µ"),
        Grammar("rust", (".rs",), _pack("rust"), (
            Rung("statement", "fn _() {\nPATTERN\n}"),
            Rung("expression", "fn _() { let _ = PATTERN; }"),
            Rung("class member", "impl _ {\nPATTERN\n}"),
            Rung("declaration"),
        ), expando="µ"),
        Grammar("c", (".c", ".h"), _pack("c"), _C_LADDER, expando="µ"),
        Grammar("cpp", (".cpp", ".cc", ".cxx", ".hpp", ".hh", ".hxx"), _pack("cpp"), (
            *_C_LADDER[:2],
            Rung("class member", "class _ {\nPATTERN\n};"),
            _C_LADDER[2],
        ), expando="µ"),
        Grammar("java", (".java",), _pack("java"), (
            # not `_`: since Java 21 it is a pattern, not a name, and the grammar says so
            Rung("statement", "class T__ { void m__() {\nPATTERN\n} }"),
            Rung("expression", "class T__ { Object x__ = PATTERN; }"),
            Rung("class member", "class T__ {\nPATTERN\n}"),
            Rung("declaration"),
        )),
        Grammar("dart", (".dart",), _pack("dart"), (
            Rung("statement", "void _() {\nPATTERN\n}"),
            Rung("statement", "void _() {\nPATTERN;\n}", tail=";"),
            Rung("expression", "var _ = PATTERN;"),
            Rung("class member", "class _ {\nPATTERN\n}"),
            Rung("declaration"),
        )),
    ]


def pack_grammar(name: str) -> Grammar | None:
    """Any other grammar of the language pack, by id: parsed as a whole file, `$` written as `µ`.

    No extensions are claimed (pass ``language``); `µ` is a letter to most grammars, so `$A` in the
    pattern reads as a name where `$` itself would not.
    """
    from typing import get_args

    from tree_sitter_language_pack import SupportedLanguage

    if name not in get_args(SupportedLanguage):
        return None
    return Grammar(name, _PACK_EXTENSIONS.get(name, ()), _pack(name), (Rung("file"),), expando="µ")


# file extensions of common language-pack grammars, for walking a folder when one is asked for by id
_PACK_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "ruby": (".rb",), "kotlin": (".kt", ".kts"), "lua": (".lua",), "bash": (".sh", ".bash"),
    "csharp": (".cs",), "php": (".php",), "swift": (".swift",), "scala": (".scala",),
    "elixir": (".ex", ".exs"), "haskell": (".hs",), "ocaml": (".ml",), "zig": (".zig",),
    "css": (".css",), "html": (".html", ".htm"), "sql": (".sql",), "yaml": (".yml", ".yaml"),
    "json": (".json",), "toml": (".toml",), "r": (".r", ".R"), "julia": (".jl",), "perl": (".pl", ".pm"),
}


@attrs.frozen
class Registry:
    """The grammars of one run, by id and by file extension."""

    by_id: dict[str, Grammar]
    by_extension: dict[str, str]

    @classmethod
    def build(cls, contributed: Iterable[Grammar]) -> Registry:
        """``contributed`` in priority order: the first grammar for an id or an extension wins."""
        by_id: dict[str, Grammar] = {}
        by_ext: dict[str, str] = {}
        for g in contributed:
            if g.id in by_id:
                continue
            by_id[g.id] = g
            for ext in g.extensions:
                by_ext.setdefault(ext.lower(), g.id)
        return cls(by_id, by_ext)

    def for_path(self, name: str) -> str | None:
        dot = name.rfind(".")
        return self.by_extension.get(name[dot:].lower()) if dot > 0 else None
