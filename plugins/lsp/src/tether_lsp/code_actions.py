"""The `lsp` tool's code actions: every server of the file asked for the actions at a symbol, merged in the
servers' order, and kept for `lsp_fix` (`tether_lsp.fix.remember`), which applies one of them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.options import CoreOptions
from tether.tools import ToolError, ToolResult

from tether_lsp.common import position
from tether_lsp.fix import Offered, applicability, place, remember
from tether_lsp.options import LspOptions
from tether_lsp.positions import Spot, find_symbol
from tether_lsp.rounds import document_diagnostics

if TYPE_CHECKING:
    from tether_lsp.connection import Connection, Doc
    from tether_lsp.supervisor import Supervisor

CODE_ACTIONS_CAP = 30
FAILURE_CHARS = 200  # of a server's error, said beside another server's code actions


async def code_actions(
    sup: Supervisor, path: Path, rel: str, line: int, symbol: str, occurrence: int | None
) -> ToolResult:
    """The code actions of every server of the file for the symbol, merged in the servers' order, each
    said with its server; a server that has none, or failed, is said too when another one has some."""
    where = f"'{symbol}' at {rel}:{line}"

    async def ask(conn: Connection, doc: Doc) -> list[tuple[dict[str, Any], Offered]]:
        lsp = conn.lsp
        if not getattr(conn.capabilities, "code_action_provider", None):
            raise ToolError(f"{conn.server.id} does not offer code action answers", code="unsupported")
        spot = find_symbol(doc.text, line, symbol, occurrence, rel)  # the text the server has
        if conn.pulls:  # the diagnostics on the line are the context of the quick fixes
            await document_diagnostics(
                conn,
                doc,
                sup.run.options.of(CoreOptions).diagnostics_timeout,
                sup.run.options.of(LspOptions).lsp_request_timeout,
            )
        start = position(conn, doc.text, spot)
        end = position(conn, doc.text, Spot(spot.line, spot.char + len(symbol)))
        pub = conn.published.get(doc.uri)
        on_line = [
            d for d in (pub.items if pub else []) if d.range.start.line <= spot.line <= d.range.end.line
        ]
        params = lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=doc.uri),
            range=lsp.Range(start=start, end=end),
            context=lsp.CodeActionContext(diagnostics=on_line),
        )
        actions = []
        for item in await sup.request(conn, "textDocument/codeAction", params) or []:
            title = getattr(item, "title", None)
            kind = getattr(item, "kind", None)
            if title:
                how, why = applicability(conn, item)
                offer = Offered(title, conn.server.id, item, conn, doc.text, how, why)
                actions.append(
                    (
                        {
                            "title": title,
                            "kind": getattr(kind, "value", kind),
                            "server": conn.server.id,
                            "applicable": how is not None,
                        },
                        offer,
                    )
                )
        return actions

    answers = await sup.with_every(path, ask)
    pairs = [a for _, found in answers if not isinstance(found, ToolError) for a in found]
    actions = [a for a, _ in pairs]
    remember(sup, place(rel, line, symbol, occurrence), [o for _, o in pairs[:CODE_ACTIONS_CAP]])
    if not actions:
        failed = [found for _, found in answers if isinstance(found, ToolError)]
        if len(failed) == len(answers):
            raise failed[0]
        return ToolResult.text(f"no code actions offered for {where}", {"actions": []})
    shown = actions[:CODE_ACTIONS_CAP]
    lines = [f"{len(actions)} code action(s) for {where}:"]
    lines += [
        f"{n}. {a['title']}" + (f" [{a['kind']}]" if a["kind"] else "") + f" ({a['server']})"
        for n, a in enumerate(shown, 1)
    ]
    if len(actions) > len(shown):
        lines.append(
            f"[{len(actions) - len(shown)} more not shown (showing {len(shown)} of {len(actions)}); "
            "name a narrower symbol to see fewer]"
        )
    if any(t.name == "lsp_fix" for t in sup.run.tools()):  # a read surface does not offer it
        lines += fixable_lines([o for _, o in pairs[: len(shown)]])
    for server, found in answers:
        if isinstance(found, ToolError):
            why = found.message.splitlines()[0] if found.message else ""
            cut = why[:FAILURE_CHARS] + ("..." if len(why) > FAILURE_CHARS else "")
            lines.append(f"none from {server.id}" + (f": {cut}" if cut else ""))
        elif not found:
            lines.append(f"none from {server.id}")
    return ToolResult.text(
        "\n".join(lines), {"actions": shown, "total": len(actions), "not_shown": len(actions) - len(shown)}
    )


def fixable_lines(offered: list[Any]) -> list[str]:
    """Which of the listed actions `lsp_fix` applies, and why not the others (one line per reason)."""
    can = [str(n) for n, o in enumerate(offered, 1) if o.how is not None]
    lines = [
        f"lsp_fix applies {', '.join(can)} (give it this file, line and symbol, and the number or title)"
        if can
        else "lsp_fix applies none of them"
    ]
    why: dict[str, list[str]] = {}
    for n, o in enumerate(offered, 1):
        if o.how is None:
            why.setdefault(o.why, []).append(str(n))
    lines += [f"not {', '.join(ns)}: {reason}" for reason, ns in why.items()]
    return lines
