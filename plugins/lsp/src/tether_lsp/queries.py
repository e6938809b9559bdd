"""The `lsp` tool's answers (read), loaded at its first call: each action to the module of its story
(`tether_lsp.navigation`, `tether_lsp.symbols`, `tether_lsp.diagnostics`, `tether_lsp.status`), and the
line each answer says per server that was not ready when asked (`tether_lsp.readiness`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.tools import ToolError, ToolResult

from tether_lsp import readiness
from tether_lsp.args import LspArgs
from tether_lsp.common import missing_arguments
from tether_lsp.diagnostics import file_diagnostics, project_diagnostics
from tether_lsp.navigation import navigate
from tether_lsp.status import status
from tether_lsp.symbols import symbols

if TYPE_CHECKING:
    from tether.run import CallContext

    from tether_lsp.supervisor import Supervisor


async def answer(sup: Supervisor, ctx: CallContext, args: LspArgs) -> ToolResult:
    """The action's answer, with one line per server that was not ready when asked, and ``ready`` in its data
    (every action that asked a server; `status` says it per server)."""
    token = readiness.ASKED.set({})
    try:
        try:
            result = await _answer(sup, ctx, args)
        except ToolError as exc:
            if not readiness.asked_any():
                raise
            notes = readiness.notes()
            raise ToolError(
                "\n".join([exc.message, *notes]), **{**(exc.data or {}), "ready": not notes}
            ) from None
        if not readiness.asked_any() or result.data is None or "ready" in result.data:
            return result
        notes = readiness.notes()
        return ToolResult.text("\n".join([result.plain, *notes]), {**result.data, "ready": not notes})
    finally:
        readiness.ASKED.reset(token)


async def _answer(sup: Supervisor, ctx: CallContext, args: LspArgs) -> ToolResult:
    run = ctx.run
    action = args.action
    if action == "status":
        return await status(run, sup)
    if action == "reload":
        done = await sup.reload()
        text = (
            ("restarted: " + ", ".join(done))
            if done
            else "no server was running; servers start on the next query"
        )
        return ToolResult.text(text, {"restarted": done})
    if action == "symbols":
        return await symbols(run, sup, args)
    if action == "diagnostics":
        if args.file is None:
            raise missing_arguments(args, action, "file")
        if args.file == "*":
            return await project_diagnostics(run, sup)
        return await file_diagnostics(run, sup, args.file)
    return await navigate(run, sup, args)
