"""The arguments and descriptions of the family's tools: what listing them (`tether tools`) needs.

A leaf: it imports none of the answers (`tether_lsp.queries`, `.rename`, `.move`, `.fix`), which load at a
tool's first call.
"""

from __future__ import annotations

from typing import Literal

import attrs
from tether.args import arg

Action = Literal[
    "diagnostics",
    "definition",
    "type_definition",
    "implementation",
    "references",
    "hover",
    "symbols",
    "code_actions",
    "callers",
    "callees",
    "supertypes",
    "subtypes",
    "status",
    "reload",
]


@attrs.frozen
class LspArgs:
    action: Action = arg(  # attrs, not a dataclass
        'What to ask: diagnostics (file, or "*" for the whole project), definition, type_definition, '
        "implementation, references, hover, code_actions, callers (the functions that call it), callees (the "
        "functions it calls), supertypes, subtypes (these take file, line, symbol), symbols (query for a "
        "workspace search, or file for its outline), status, reload."
    )
    file: str | None = arg(
        'File relative to the root; "*" with diagnostics checks the whole project.',
        default=None,
        min_length=1,
    )
    line: int | None = arg(
        "1-based line on which the symbol is written. Without it, symbol is found by name: a qualified name "
        "(Class.method) among the workspace symbols, or a name declared once in file.",
        default=None,
        minimum=1,
    )
    symbol: str | None = arg(
        "The symbol as written on that line (or a substring of it that occurs once there); positions are "
        "found from this, never from a column.",
        default=None,
        min_length=1,
    )
    occurrence: int | None = arg(
        "Which occurrence of symbol on the line (1-based), when it occurs more than once.",
        default=None,
        minimum=1,
    )
    query: str | None = arg("Name (or part) to search for with action symbols.", default=None, min_length=1)
    depth: int | None = arg(
        "With callers, callees, supertypes, subtypes: how many levels (1-3, default 1), each indented.",
        default=None,
        minimum=1,
        maximum=3,
    )
    in_file: str | None = arg(
        "With references, definition, type_definition, implementation: only the locations in this file "
        "(relative to the root), e.g. one that an answer over the cap names.",
        default=None,
        min_length=1,
    )


RENAME_DESCRIPTION = (
    "Rename a symbol everywhere the language server knows it is used (also in files never opened), "
    "all files or none. Give the file, the line and the symbol as written there, and new_name."
)


@attrs.frozen
class RenameArgs:
    file: str = arg("File where the symbol is written, relative to the root.", min_length=1)
    line: int = arg("1-based line on which the symbol is written.", minimum=1)
    symbol: str = arg(
        "The symbol as written on that line (a substring that occurs once there).", min_length=1
    )
    new_name: str = arg("The new name.", min_length=1)
    occurrence: int | None = arg(
        "Which occurrence of symbol on the line (1-based), when it occurs more than once.",
        default=None,
        minimum=1,
    )
    preview: bool = arg(
        "Write nothing: stage the rename (resolve with its edit_id accepts or discards it) and say what it "
        "would break.",
        default=False,
    )


MOVE_DESCRIPTION = (
    "Move (or rename) one file and update the imports of it in the files that import it, through the "
    "language server, all files or none; answers with the files changed and the diagnostics the move "
    "introduced. Give file and to (its new path, which must not exist). A server that cannot update "
    "imports moves nothing unless force is true."
)


@attrs.frozen
class MoveArgs:
    file: str = arg("The file to move, relative to the root.", min_length=1)
    to: str = arg(
        "Its new path (a file that does not exist yet), relative to the root; missing folders are created.",
        min_length=1,
    )
    force: bool = arg(
        "Move it even when no language server can update the imports of it: the importers are left as they "
        "are (the answer says so, and lists the errors the move introduced).",
        default=False,
    )


FIX_DESCRIPTION = (
    "Apply one of the code actions (quick fixes, organize imports, ...) that `lsp` code_actions listed for a "
    "place, all files or none. Give the same file, line and symbol, and the action's title or its number in "
    "that list."
)


@attrs.frozen
class FixArgs:
    file: str = arg("File given to code_actions, relative to the root.", min_length=1)
    line: int = arg("The line given to code_actions (1-based).", minimum=1)
    symbol: str = arg("The symbol given to code_actions.", min_length=1)
    title: str | None = arg(
        "The title of the action, exactly as code_actions listed it (without its [kind] and (server)).",
        default=None,
        min_length=1,
    )
    number: int | None = arg(
        "Instead of title: the action's number in the code_actions list.", default=None, minimum=1
    )
    occurrence: int | None = arg("The occurrence given to code_actions, if one was.", default=None, minimum=1)
