"""The arguments of ast_grep and ast_edit: what listing the tools (`tether tools`) needs.

A leaf: the searches and rewrites (`tether_astgrep.grep`, `.edit`, `.query`) load at a tool's first call.
"""

from __future__ import annotations

from typing import Any

import attrs
import tether

RULE_HELP = (
    "Instead of pattern: an ast-grep rule object (as JSON), for what a pattern cannot say: pattern, kind, "
    'regex; inside, has, follows, precedes (with stopBy "neighbor"|"end"|rule, and field); all, any, not, '
    'matches. Or {"rule": ..., "constraints": {"A": rule}, "utils": {"name": rule}}. Or the same as text: '
    "JSON, or YAML as in an ast-grep rule file"
)


MAX_RESULTS = 1000


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
        RULE_HELP,
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
    rule: dict[str, Any] | str | None = tether.arg(RULE_HELP + "; as for ast_grep", default=None)
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
