"""The family's tools: `lsp` (read), `lsp_rename`, `lsp_fix` and `lsp_move` (write, in `tether_lsp.rename`,
`tether_lsp.fix` and `tether_lsp.move`); their arguments and descriptions are in `tether_lsp.args`.

Light on purpose: listing the tools (`tether tools`) imports only `tether_lsp.args`; each tool's code
(`tether_lsp.queries` and the three modules above, then connections, pygls, lsprotocol) loads at its first
call, and a write tool's `touches` at the first call that asks it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from tether.tools import Tier, Tool, ToolResult

from tether_lsp.args import (
    FIX_DESCRIPTION,
    MOVE_DESCRIPTION,
    RENAME_DESCRIPTION,
    FixArgs,
    LspArgs,
    MoveArgs,
    RenameArgs,
)

if TYPE_CHECKING:
    from tether.run import CallContext, Run

    from tether_lsp.supervisor import Supervisor

DESCRIPTION = (
    "Ask the project's language server. Positions are a line plus the symbol as written on it (never a column). "
    'Actions: diagnostics (file, or "*" for the project checker), definition, type_definition, implementation, '
    "references, hover, code_actions, callers, callees, supertypes, subtypes (file, line, symbol; depth for the "
    "last four), symbols (query, or file), status, reload. "
    "Locations come back as path:line:col relative to the root with the source line."
)


async def lsp_handler(sup: Supervisor, ctx: CallContext, args: LspArgs) -> ToolResult:
    from tether_lsp.queries import answer

    async with sup.gate.shared():  # never an answer from a preview's unsaved contents
        return await answer(sup, ctx, args)


async def rename_handler(sup: Supervisor, ctx: CallContext, args: RenameArgs) -> ToolResult:
    from tether_lsp import rename

    return await rename.rename_handler(sup, ctx, args)


def rename_touches(args: RenameArgs) -> list[str]:
    from tether_lsp import rename

    return rename.rename_touches(args)


async def move_handler(sup: Supervisor, ctx: CallContext, args: MoveArgs) -> ToolResult:
    from tether_lsp import move

    return await move.move_handler(sup, ctx, args)


def move_touches(run: Run, args: MoveArgs) -> list[str]:
    from tether_lsp import move

    return move.move_touches(run, args)


async def fix_handler(sup: Supervisor, ctx: CallContext, args: FixArgs) -> ToolResult:
    from tether_lsp import fix

    return await fix.fix_handler(sup, ctx, args)


def fix_touches(sup: Supervisor, args: FixArgs) -> list[str]:
    from tether_lsp import fix

    return fix.fix_touches(sup, args)


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
