"""The family's tools: `lsp` (read), `lsp_rename`, `lsp_fix` and `lsp_move` (write, in `tether_lsp.rename`,
`tether_lsp.fix` and `tether_lsp.move`), with their arguments and descriptions.

Light on purpose: listing the tools (`tether tools`) imports none of the language-server machinery
(connections, pygls, lsprotocol); the `lsp` tool's answers (`tether_lsp.queries`) load at its first call.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Literal

import attrs
from tether.args import arg
from tether.tools import Tier, Tool, ToolResult

from tether_lsp.fix import FIX_DESCRIPTION, FixArgs, fix_handler, fix_touches
from tether_lsp.move import MOVE_DESCRIPTION, MoveArgs, move_handler, move_touches
from tether_lsp.rename import RENAME_DESCRIPTION, RenameArgs, rename_handler, rename_touches

if TYPE_CHECKING:
    from tether.tools import CallContext

    from tether_lsp.supervisor import Supervisor

DESCRIPTION = (
    "Ask the project's language server. Positions are a line plus the symbol as written on it (never a column). "
    'Actions: diagnostics (file, or "*" for the project checker), definition, type_definition, implementation, '
    "references, hover, code_actions, callers, callees, supertypes, subtypes (file, line, symbol; depth for the "
    "last four), symbols (query, or file), status, reload. "
    "Locations come back as path:line:col relative to the root with the source line."
)

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


async def lsp_handler(sup: Supervisor, ctx: CallContext, args: LspArgs) -> ToolResult:
    from tether_lsp.queries import answer

    async with sup.gate.shared():  # never an answer from a preview's unsaved contents
        return await answer(sup, ctx, args)


def make_tools(sup: Supervisor) -> list[Tool]:
    """The family's tools, bound to the run's supervisor; lsp_fix refuses a bad pick before any baseline is
    taken and lsp_move checks its paths against the run's root."""
    return [
        Tool("lsp", Tier.READ, DESCRIPTION, LspArgs, functools.partial(lsp_handler, sup), parallel_safe=True),
        # not parallel-safe: two renames computed against the same files would race
        Tool(
            "lsp_rename",
            Tier.WRITE,
            RENAME_DESCRIPTION,
            RenameArgs,
            functools.partial(rename_handler, sup),
            parallel_safe=False,
            touches=rename_touches,
            stages=True,  # with preview: the rename is staged for resolve
        ),
        # the same: a move and a rename computed against the same importers would race
        Tool(
            "lsp_move",
            Tier.WRITE,
            MOVE_DESCRIPTION,
            MoveArgs,
            functools.partial(move_handler, sup),
            parallel_safe=False,
            touches=functools.partial(move_touches, sup.run),  # checks the paths against the run's root
        ),
        # a tool of its own, as lsp_rename: a write, hidden where only reads are offered
        Tool(
            "lsp_fix",
            Tier.WRITE,
            FIX_DESCRIPTION,
            FixArgs,
            functools.partial(fix_handler, sup),
            parallel_safe=False,
            touches=functools.partial(fix_touches, sup),
        ),
    ]
