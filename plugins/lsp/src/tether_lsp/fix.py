"""The `lsp_fix` tool (write): one of the code actions the run's last `code_actions` call offered, applied.

`code_actions` keeps what each server offered at a place (`remember`), with the text the server computed
it on; `lsp_fix` picks one by title or number, refuses when the file changed since or no list was asked
for there, resolves it (`codeAction/resolve`) when the server left its edit out, writes its WorkspaceEdit
through the family's one write path (`edits.write_planned`: every file or none, drift-checked), and runs
its command only where the server executes it and sends the edit back (`workspace/applyEdit`, written
through that same path). The core adds the diagnostics the write introduced (its `touches`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether.tools import ToolError, ToolResult

from tether_lsp.options import LspOptions

if TYPE_CHECKING:
    from tether.run import CallContext, Run

    from tether_lsp.args import FixArgs
    from tether_lsp.connection import Connection, Doc
    from tether_lsp.supervisor import Supervisor

OFFERS_KEPT = 20  # places whose last code_actions list the run keeps
TITLES_SHOWN = 30  # of a list named in a refusal
TITLE_CHARS = 100


@attrs.frozen
class Offered:
    """One action of a `code_actions` answer, as the server sent it."""

    title: str
    server: str
    raw: Any  # the CodeAction or Command
    conn: Connection  # the connection that offered it (a restarted server's data would be stale)
    text: str  # the document's text the server computed it on
    how: str | None  # "edit", "resolve", "command": how lsp_fix applies it; None: it cannot
    why: str  # when it cannot: why


def applicability(conn: Connection, item: Any) -> tuple[str | None, str]:
    """How `lsp_fix` can apply a code action item (a CodeAction, or a bare Command), or why it cannot."""
    disabled = getattr(item, "disabled", None)
    if disabled is not None:
        return None, f"{conn.server.id} disabled it ({getattr(disabled, 'reason', '') or 'no reason given'})"
    command = command_of(item)
    executes = getattr(getattr(conn.capabilities, "execute_command_provider", None), "commands", None) or ()
    runnable = command is None or command.command in executes
    if getattr(item, "edit", None) is not None:
        how = "edit"
    elif getattr(item, "data", None) is not None and getattr(
        getattr(conn.capabilities, "code_action_provider", None), "resolve_provider", None
    ):
        how = "resolve"
    elif command is not None and runnable:
        return "command", ""
    else:
        return None, f"it carries no edit, and no command {conn.server.id} executes"
    if not runnable:
        assert command is not None
        return None, f"its command {command.command} is not one {conn.server.id} executes"
    return how, ""


def command_of(item: Any) -> Any:
    """The command of a CodeAction, or the item itself when it is a bare Command."""
    if hasattr(item, "title") and hasattr(item, "command") and isinstance(item.command, str):
        return item  # a Command: its `command` is the command's name
    return getattr(item, "command", None)


def place(rel: str, line: int, symbol: str, occurrence: int | None) -> tuple[str, int, str, int | None]:
    return (rel, line, symbol, occurrence)


def remember(sup: Supervisor, key: tuple[str, int, str, int | None], offered: list[Offered]) -> None:
    """Keep a place's list (the newest replaces the one before), for the last OFFERS_KEPT places."""
    offers: OrderedDict[Any, list[Offered]] = sup.offers
    offers.pop(key, None)
    offers[key] = offered
    while len(offers) > OFFERS_KEPT:
        offers.popitem(last=False)


def listed(offered: list[Offered]) -> str:
    shown = [f"{n}. {o.title[:TITLE_CHARS]} ({o.server})" for n, o in enumerate(offered[:TITLES_SHOWN], 1)]
    more = f"; and {len(offered) - TITLES_SHOWN} more" if len(offered) > TITLES_SHOWN else ""
    return "; ".join(shown) + more


def pick(sup: Supervisor, args: FixArgs, rel: str, text: str) -> tuple[int, Offered]:
    """The action asked for, from the place's last list; refused with the fix when there is none, the
    file changed since, or the title or number is not in it."""
    where = f"'{args.symbol}' at {rel}:{args.line}"
    if (args.title is None) == (args.number is None):
        raise ToolError(
            "give either title (the action's title as code_actions listed it) or number (its number in that list)"
            + (", not both" if args.title is not None else ""),
            code="bad_argument",
        )
    offered = sup.offers.get(place(rel, args.line, args.symbol, args.occurrence))
    if offered is None:
        occ = f", occurrence {args.occurrence}" if args.occurrence is not None else ""
        raise ToolError(
            f"no code actions were listed for {where}{occ} in this run; ask `lsp` with action code_actions "
            f"(file '{rel}', line {args.line}, symbol '{args.symbol}'{occ}) first, then give lsp_fix one of its "
            "titles or numbers",
            code="no_list",
        )
    if not offered:
        raise ToolError(
            f"no code actions were offered for {where}; there is nothing to apply", code="no_list"
        )
    if any(o.text != text for o in offered):
        raise ToolError(
            f"{rel} changed since its code actions were listed for {where}; nothing was applied: ask "
            "code_actions there again and pick from the new list",
            code="changed_since",
        )
    if args.number is not None:
        if args.number > len(offered):
            raise ToolError(
                f"there is no code action {args.number} for {where}: the list has {len(offered)} "
                f"({listed(offered)}); give one of these numbers or titles",
                code="unknown_action",
                total=len(offered),
            )
        n = args.number
    else:
        title = (args.title or "").strip()
        found = [n for n, o in enumerate(offered, 1) if o.title == title]
        if not found:  # spaces as the model wrote them (gopls: 'Delete import:  "os"', with two)
            found = [n for n, o in enumerate(offered, 1) if o.title.split() == title.split()]
        if not found:
            raise ToolError(
                f"'{title[:TITLE_CHARS]}' is not among the code actions listed for {where} ({listed(offered)}); "
                "give one of these titles exactly, or its number",
                code="unknown_action",
                titles=[o.title for o in offered[:TITLES_SHOWN]],
            )
        if len(found) > 1:
            servers = ", ".join(f"{n} ({offered[n - 1].server})" for n in found)
            raise ToolError(
                f"'{title[:TITLE_CHARS]}' is offered more than once for {where}: {servers}; give its number",
                code="ambiguous_action",
            )
        n = found[0]
    chosen = offered[n - 1]
    if chosen.how is None:
        raise ToolError(
            f"code action {n}, '{chosen.title[:TITLE_CHARS]}' ({chosen.server}), cannot be applied: {chosen.why}; "
            "nothing was applied",
            code="not_applicable",
        )
    return n, chosen


def fix_touches(sup: Supervisor, args: FixArgs) -> list[str]:
    """The file the action was listed for; a bad pick is refused here, before any baseline is taken."""
    from tether_lsp.watching import read_text

    run = sup.run
    path = run.resolve_path(args.file)
    # bounded, never a FIFO: a file it cannot read is refused by the handler, in its words
    text = read_text(path)
    if text is not None:
        pick(sup, args, run.relpath(path), text)
    return [args.file]


async def fix_handler(sup: Supervisor, ctx: CallContext, args: FixArgs) -> ToolResult:
    # the language-server machinery loads at the first call (see `tether_lsp.tools`)
    from tether.atomic import Snapshot

    from tether_lsp import readiness
    from tether_lsp.common import source_file
    from tether_lsp.edits import PlannedEdit, plan_workspace_edit, write_planned
    from tether_lsp.positions import find_symbol

    run = ctx.run
    path, rel, text = source_file(run, args.file)
    find_symbol(text, args.line, args.symbol, args.occurrence, rel)
    n, chosen = pick(sup, args, rel, text)
    shown = f"'{chosen.title}' ({chosen.server})"

    async def fix(conn: Connection, doc: Doc) -> ToolResult:
        if conn is not chosen.conn:
            raise ToolError(
                f"{chosen.server} restarted since it offered {shown}; nothing was applied: ask code_actions "
                "again and pick from the new list",
                code="changed_since",
            )
        # an edit computed while the server still analyses the project could be partial: wait, else refuse
        state = await readiness.wait_ready(conn, sup.run.options.of(LspOptions).lsp_ready_wait)
        if state is not None:
            raise ToolError(
                f"nothing was applied: {conn.server.id} still {state}; ask again in a few seconds (or raise the "
                "run option lsp_ready_wait)",
                code="not_ready",
                ready=False,
            )
        item = chosen.raw
        if chosen.how == "resolve":
            item = await sup.request(conn, "codeAction/resolve", item)
        edit = getattr(item, "edit", None)
        command = command_of(item)
        if edit is None and command is None:
            raise ToolError(
                f"{conn.server.id} resolved {shown} to no edit and no command; nothing was applied",
                code="nothing_to_apply",
            )
        executes = (
            getattr(getattr(conn.capabilities, "execute_command_provider", None), "commands", None) or ()
        )
        if command is not None and command.command not in executes:
            raise ToolError(
                f"{shown} runs the command {command.command}, which {conn.server.id} does not execute; nothing "
                "was applied",
                code="not_applicable",
            )
        listed_text = [Snapshot.of(path, chosen.text.encode("utf-8"))]  # drift: since it was listed
        plans: list[PlannedEdit] = []
        written: set[Path] = set()
        if edit is not None:
            plan = plan_workspace_edit(edit, run, conn.encoding)
            written |= set(await write_planned([conn], run, plan, "the fix", listed_text))
            plans.append(plan)
        if command is not None:
            for plan, files in await run_command(sup, conn, run, command, [] if written else listed_text):
                plans.append(plan)
                written |= files
        if not written:
            how = (
                f"its command {command.command} sent no edit back"
                if command is not None and edit is None
                else "its edit changes nothing"
            )
            raise ToolError(f"{shown}: {how}; nothing was written", code="nothing_to_apply")
        edits: dict[str, int] = {}
        operations: list[str] = []
        for plan in plans:
            for p, k in plan.edits.items():
                if k:
                    edits[run.relpath(p)] = edits.get(run.relpath(p), 0) + k
            operations += plan.operations
        files = [{"file": f, "edits": k} for f, k in sorted(edits.items())]
        total = sum(edits.values())
        lines = [f"applied {shown}: {total} edit(s) in {len(files)} file(s)"]
        lines += [f"  {f['file']}: {f['edits']} edit(s)" for f in files]
        lines += [f"  {op}" for op in operations]
        data = {
            "title": chosen.title,
            "server": chosen.server,
            "number": n,
            "files": files,
            "edits": total,
            "operations": operations,
            "ready": True,
        }
        return ToolResult.text("\n".join(lines), data)

    return await sup.with_server(path, chosen.server, fix)


async def run_command(
    sup: Supervisor, conn: Connection, run: Run, command: Any, expect: list[Any]
) -> list[tuple[Any, set[Path]]]:
    """Run a code action's command (`workspace/executeCommand`); the edits the server sends back meanwhile
    (`workspace/applyEdit`) are written through the family's write path, each all or nothing, in this
    call's context (its approval, its tracing). The plans written and their files."""
    from tether_lsp.edits import plan_workspace_edit, write_planned

    lsp = conn.lsp
    done: list[tuple[Any, set[Path]]] = []
    failed: list[ToolError] = []
    context = contextvars.copy_context()  # the server's request comes in on the reader's task
    loop = asyncio.get_running_loop()

    async def apply(edit: Any) -> Any:
        try:
            plan = plan_workspace_edit(edit, run, conn.encoding)
            files = set(await write_planned([conn], run, plan, "the fix", expect if not done else []))
        except ToolError as exc:
            failed.append(exc)
            return lsp.ApplyWorkspaceEditResult(applied=False, failure_reason=exc.message)
        done.append((plan, files))
        return lsp.ApplyWorkspaceEditResult(applied=True)

    conn.apply_edit = lambda edit: loop.create_task(apply(edit), context=context)
    try:
        params = lsp.ExecuteCommandParams(command=command.command, arguments=command.arguments)
        await sup.request(conn, "workspace/executeCommand", params)
    finally:
        conn.apply_edit = None
    if failed:
        wrote = (
            f" (its edits before were written: {', '.join(sorted(run.relpath(p) for _, f in done for p in f))})"
            if done
            else ""
        )
        raise ToolError(failed[0].message + wrote, **(failed[0].data or {}))
    return done
