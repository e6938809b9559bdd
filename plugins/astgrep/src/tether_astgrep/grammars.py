"""Grammar definitions: which tree-sitter language parses which files, and how a pattern is wrapped.

A pattern is a fragment, not a file: `fmt.Println($$$A)` at the top of a Go file is a type
conversion and `dispose(x)` at the top of a Dart file is a function signature. So each grammar has a
*ladder* of contexts (statement, expression, class member, declaration); a pattern is parsed inside
each in turn and the first one that yields no ERROR node is used (see `tether_astgrep.pattern`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeGuard

import attrs

if TYPE_CHECKING:
    from tree_sitter_language_pack import SupportedLanguage

PLACEHOLDER = "PATTERN"


@attrs.frozen
class Rung:
    """One context of a ladder: source code the pattern is parsed inside.

    Python's "class member" rung, for one, puts the pattern into the body of a class, indented. A
    grammar plugin imports it from `tether_astgrep.grammars` (so it depends on tether-astgrep).

    Attributes:
        name: what the rung stands for (statement, expression, class member, ...), said when a
            pattern parses in none.
        template: the source the pattern is put into, where it says PATTERN.
        indent: put before every pattern line after the first (Python bodies need it).
        tail: text of the template right after PATTERN that the pattern's node may take in (Dart's
            statement rung adds the `;` a call statement needs: its grammar has no node for a bare call).
        also: a reading searched too when an earlier rung accepted the pattern (Go `$A.Buffer` as a
            type).
    """

    name: str
    template: str = PLACEHOLDER
    indent: str = ""
    tail: str = ""
    also: bool = False

    def wrap(self, pattern: str) -> tuple[str, int, int]:
        """The wrapped source and where the (indented) pattern starts and ends in it, in characters."""
        head, tail = self.template.split(PLACEHOLDER, 1)
        body = pattern.replace("\n", "\n" + self.indent) if self.indent else pattern
        return head + body + tail, len(head), len(head) + len(body)


@attrs.frozen
class Grammar:
    """A language the family can search; give one to the `tether_astgrep_grammars` hook.

    Attributes:
        id: the language's name, as patterns and rules give it (``language: "lua"``); a grammar
            with a built-in id replaces the built-in one.
        extensions: the file extensions it parses, with the dot (".lua"); they win over other
            grammars' claims.
        language: loads the tree-sitter language (a `tree_sitter.Language` or the capsule a grammar
            wheel's ``language()`` returns); a module-level function (or a ``functools.partial`` of
            one), so the worker processes can load it too.
        ladder: the contexts (`Rung`) a pattern is parsed in, in order; the first that yields no
            ERROR node is used. The default parses the pattern as a whole file.
        expando: the character that stands for ``$`` in patterns: ``$`` where it can be part of an
            identifier, else a letter-like character the grammar accepts in identifiers (as ast-grep
            does, so metavariables parse as identifiers).
    """

    id: str
    extensions: tuple[str, ...] = attrs.field(converter=tuple)
    language: Callable[[], Any] = attrs.field(repr=False)
    ladder: tuple[Rung, ...] = attrs.field(converter=tuple, default=(Rung("file"),))
    expando: str = "$"


def pack_language(name: SupportedLanguage) -> Any:
    """A grammar bundled in tree-sitter-language-pack 0.13 (offline: the grammars are in the wheel)."""
    from tree_sitter_language_pack import get_language

    return get_language(name)


def _wheel_python() -> Any:
    """tree-sitter-python's own wheel: the pack's build hides `expression_statement`, ast-grep's has it."""
    import tree_sitter_python

    return tree_sitter_python.language()


def _wheel_swift() -> Any:
    """tree-sitter-swift's own wheel (0.7.4, ast-grep's): the pack's older build reads `sending` as an
    error and an attribute's `()` as a tuple type after it (`@Sendable () async -> R`)."""
    import tree_sitter_swift

    return tree_sitter_swift.language()


def _wheel_bash() -> Any:
    """tree-sitter-bash's own wheel (0.25, ast-grep's): the pack's build reads a file with an extglob it
    cannot parse (`[[ $c == @(help|[h?]) ]]`) into an ERROR that swallows the commands after it, where
    ast-grep's grammar recovers them as commands."""
    import tree_sitter_bash

    return tree_sitter_bash.language()


_WHEELS: dict[str, Callable[[], Any]] = {"swift": _wheel_swift, "bash": _wheel_bash}


def _pack(name: SupportedLanguage) -> Callable[[], Any]:
    return functools.partial(pack_language, name)


_JS_LADDER = (
    Rung("statement"),  # a JS/TS file is a statement list, so this is ast-grep's own parse
    Rung("expression", "(PATTERN)"),
    Rung("class member", "class _ {\nPATTERN\n}"),
)
_TS_LADDER = (
    *_JS_LADDER,
    # `timeout?: $T` is a class field and an interface or type-literal field: both are searched
    Rung("property signature", "interface I__ {\nPATTERN\n}", also=True),
    Rung("type", "let x__: PATTERN;", also=True),
)
_C_LADDER = (
    Rung("statement", "void _(void) {\nPATTERN\n}"),
    Rung("expression", "void _(void) { _ = PATTERN; }"),
    Rung("declaration"),
    Rung("type", "PATTERN x__;", also=True),  # `struct $A`, `unsigned long`
    Rung("parameters", "void f__PATTERN;"),  # `(int $A, char **argv)`
)


def builtin_grammars() -> list[Grammar]:
    """Every language ast-grep 0.51 has built in, with its file extensions (and the Dart grammar)."""
    return [
        Grammar(
            "python",
            (".py", ".py3", ".pyi", ".bzl", ".bazel"),
            _wheel_python,
            (
                Rung("statement"),  # a Python module is a statement list
                Rung("class member", "class _:\n    PATTERN\n", indent="    "),
                Rung("clause", "try:\n    pass\nPATTERN\n"),  # `except $E as $N: $$$B`, `finally: ...`
                Rung("clause", "if _:\n    pass\nPATTERN\n"),  # `elif $C: ...`, `else: ...`
                Rung("decorator", "PATTERN\ndef _():\n    pass\n"),  # `@click.command($$$)`
            ),
            expando="µ",
        ),
        Grammar("javascript", (".js", ".mjs", ".cjs", ".jsx"), _pack("javascript"), _JS_LADDER),
        Grammar("typescript", (".ts", ".mts", ".cts"), _pack("typescript"), _TS_LADDER),
        Grammar("tsx", (".tsx",), _pack("tsx"), _TS_LADDER),
        Grammar(
            "go",
            (".go",),
            _pack("go"),
            (
                Rung("statement", "package _\nfunc _() {\nPATTERN\n}"),
                Rung("expression", "package _\nvar _ = PATTERN"),
                Rung("declaration", "package _\nPATTERN"),
                # `map[string]string`, `[]string`; `$A.Buffer` is an expression and a type: both are searched
                Rung("type", "package _\nvar _ PATTERN", also=True),
                Rung("file"),
                # fragments copied out of a larger construct: `(s, 0, 64)`, `{0, 1}`, `name, usage string`;
                # the arguments or elements of a call or a composite literal
                Rung("arguments or elements", "package _\nvar _ = f__PATTERN"),
                Rung("parameters", "package _\nfunc f__PATTERN {}"),
                Rung("parameter", "package _\nfunc f__(PATTERN) {}"),
            ),
            expando="µ",
        ),
        Grammar(
            "rust",
            (".rs",),
            _pack("rust"),
            (
                Rung("statement", "fn _() {\nPATTERN\n}"),
                Rung("expression", "fn _() { let _ = PATTERN; }"),
                Rung("class member", "impl _ {\nPATTERN\n}"),
                Rung("declaration"),
            ),
            expando="µ",
        ),
        Grammar("c", (".c", ".h"), _pack("c"), _C_LADDER, expando="µ"),
        Grammar(
            "cpp",
            (".cpp", ".cc", ".cxx", ".c++", ".hpp", ".hh", ".hxx", ".cu", ".ino"),
            _pack("cpp"),
            (
                *_C_LADDER[:2],
                Rung("class member", "class _ {\nPATTERN\n};"),
                *_C_LADDER[2:],
            ),
            expando="µ",
        ),
        Grammar(
            "java",
            (".java",),
            _pack("java"),
            (
                # not `_`: since Java 21 it is a pattern, not a name, and the grammar says so
                Rung("statement", "class T__ { void m__() {\nPATTERN\n} }"),
                Rung("expression", "class T__ { Object x__ = PATTERN; }"),
                Rung("class member", "class T__ {\nPATTERN\n}"),
                Rung("declaration"),
                Rung("annotation", "class T__ {\nPATTERN\nvoid m__() {}\n}"),  # `@Override`
                Rung("type", "class T__ { PATTERN x__; }", also=True),  # `List<$T>`
            ),
        ),
        Grammar(
            "dart",
            (".dart",),
            _pack("dart"),
            (
                Rung("statement", "void _() {\nPATTERN\n}"),
                Rung("statement", "void _() {\nPATTERN;\n}", tail=";"),
                Rung("expression", "var _ = PATTERN;"),
                Rung("class member", "class _ {\nPATTERN\n}"),
                Rung("declaration"),
            ),
        ),
        *_ladderless(),
    ]


# Languages whose ladder starts with the whole file (ast-grep's own parse, so results agree) and adds
# the contexts their grammar needs for fragments: (id, extensions, expando, contexts after the file).
# The expando is ast-grep's: `$` itself where the grammar reads `$A` as a name (Solidity, bash, Lua...),
# `_` for Nix and CSS (where `$` means something else and `µ` is no name character).
_FILE = Rung("file")
_LADDERLESS: tuple[tuple[SupportedLanguage, tuple[str, ...], str, tuple[Rung, ...]], ...] = (
    (
        "bash",
        (".bash", ".bats", ".cgi", ".command", ".env", ".fcgi", ".ksh", ".sh", ".tmux", ".tool", ".zsh"),
        "$",
        (Rung("case item", "case x__ in\nPATTERN\nesac"),),  # `start) $$$B ;;`
    ),
    (
        "csharp",
        (".cs",),
        "µ",
        (
            Rung("statement", "class T__ { void M__() {\nPATTERN\n} }"),
            Rung("expression", "class T__ { object x__ = PATTERN; }"),
            Rung("class member", "class T__ {\nPATTERN\n}"),
        ),
    ),
    (
        "css",
        (".css", ".scss"),
        "_",
        (
            Rung("declaration", "a__ {\nPATTERN\n}"),
            Rung("selector", "PATTERN {}"),
            Rung("value", "a__ { b__: PATTERN; }", also=True),  # `#fff` (also an id selector), `320px`
        ),
    ),
    (
        "elixir",
        (".ex", ".exs"),
        "µ",
        (
            Rung("keyword", "[PATTERN]"),  # `timeout: $T`
            # `{:ok, $B} -> $B`: its body takes the newline
            Rung("clause", "case x__ do\nPATTERN\nend", tail="\n"),
        ),
    ),
    ("haskell", (".hs",), "µ", (Rung("expression", "x__ = PATTERN"),)),
    ("hcl", (".hcl", ".nomad", ".tf", ".tfvars", ".workflow"), "µ", (Rung("expression", "x__ = PATTERN"),)),
    # `class="box"`: a whole file reads it as text, so the attribute reading is searched too
    ("html", (".html", ".htm", ".xhtml"), "µ", (Rung("attribute", "<a PATTERN></a>", also=True),)),
    ("json", (".json",), "$", (Rung("pair", "{PATTERN}"),)),  # `"name": $V`
    (
        "kotlin",
        (".kt", ".ktm", ".kts"),
        "µ",
        (
            Rung("statement", "fun f__() {\nPATTERN\n}"),
            Rung("class member", "class T__ {\nPATTERN\n}"),
        ),
    ),
    ("lua", (".lua",), "$", (Rung("expression", "local x__ = PATTERN"),)),
    # `name = $V;`, `inherit $$$A;`; a lone `{ $$$A }` is a function's argument set, as ast-grep reads it
    ("nix", (".nix",), "_", (Rung("binding", "{ PATTERN }"), Rung("argument set", "PATTERN: x__"))),
    ("php", (".php",), "µ", ()),  # its own ladder below: the pack's php grammar embeds PHP in HTML
    ("ruby", (".rb", ".rbw", ".gemspec"), "µ", (Rung("class member", "class T__\nPATTERN\nend"),)),
    (
        "scala",
        (".scala", ".sc", ".sbt"),
        "$",
        (
            Rung("statement", "def f__ = {\nPATTERN\n}"),
            Rung("class member", "class T__ {\nPATTERN\n}"),
        ),
    ),
    (
        "solidity",
        (".sol",),
        "$",
        (
            Rung("statement", "contract T__ { function f__() public {\nPATTERN\n} }"),
            Rung("class member", "contract T__ {\nPATTERN\n}"),
        ),
    ),
    (
        "swift",
        (".swift",),
        "µ",
        (
            Rung("statement", "func f__() {\nPATTERN\n}"),
            Rung("class member", "class T__ {\nPATTERN\n}"),
            Rung("type parameters", "func f__PATTERN() {}"),  # `<ViewType: UIView>`
        ),
    ),
    ("yaml", (".yaml", ".yml"), "$", ()),
)
# the pack's `php` grammar parses a file as HTML with PHP islands: a fragment is PHP only after `<?php`
_PHP_LADDER = (
    Rung("file", "<?php\nPATTERN"),
    Rung("expression", "<?php\n$x__ = PATTERN;"),
    Rung("class member", "<?php\nclass T__ {\nPATTERN\n}"),
)


def _ladderless() -> list[Grammar]:
    out = []
    for gid, exts, expando, rungs in _LADDERLESS:
        ladder = _PHP_LADDER if gid == "php" else (_FILE, *rungs)
        out.append(Grammar(gid, exts, _WHEELS.get(gid) or _pack(gid), ladder, expando=expando))
    return out


def pack_grammar(name: str) -> Grammar | None:
    """Any other grammar of the language pack (not one ast-grep has), by id: parsed as a whole file,
    `$` written as `µ`.

    No extensions are claimed (pass ``language``); `µ` is a letter to most grammars, so `$A` in the
    pattern reads as a name where `$` itself would not.
    """
    if not _in_pack(name):
        return None
    return Grammar(name, _PACK_EXTENSIONS.get(name, ()), _pack(name), (Rung("file"),), expando="µ")


def pack_ids() -> tuple[str, ...]:
    """The ids of every grammar in the language pack (each one loads offline)."""
    from typing import get_args

    from tree_sitter_language_pack import SupportedLanguage

    return get_args(SupportedLanguage)


def _in_pack(name: str) -> TypeGuard[SupportedLanguage]:
    return name in pack_ids()


# file extensions of common language-pack grammars, for walking a folder when one is asked for by id
_PACK_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "ocaml": (".ml",),
    "zig": (".zig",),
    "sql": (".sql",),
    "toml": (".toml",),
    "r": (".r",),
    "julia": (".jl",),
    "perl": (".pl", ".pm"),
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
