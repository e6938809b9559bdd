"""The `lsp` tool's navigation: definition, type_definition, implementation, references and hover of a
symbol at a line; callers, callees, supertypes and subtypes (`tether_lsp.hierarchy`) and code actions
(`tether_lsp.code_actions`) of one too. A symbol given without its line is found first
(`tether_lsp.locate`). References also say where the name is written outside the server's program."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING

from tether.output import cap_text
from tether.tools import ToolError, ToolResult

from tether_lsp import readiness, render
from tether_lsp.args import LspArgs
from tether_lsp.code_actions import code_actions
from tether_lsp.common import (
    identifier_at,
    missing_arguments,
    occurrence_lines,
    occurrences,
    position,
    source_file,
    still_indexing,
)
from tether_lsp.positions import find_symbol, text_lines
from tether_lsp.supervisor import NotAnswered

if TYPE_CHECKING:
    from tether.run import Run

    from tether_lsp.connection import Connection, Doc
    from tether_lsp.supervisor import Supervisor

NAVIGATION = {
    "definition": ("textDocument/definition", "DefinitionParams", "definition_provider", "definition"),
    "type_definition": (
        "textDocument/typeDefinition",
        "TypeDefinitionParams",
        "type_definition_provider",
        "type definition",
    ),
    "implementation": (
        "textDocument/implementation",
        "ImplementationParams",
        "implementation_provider",
        "implementation",
    ),
    "references": ("textDocument/references", "ReferenceParams", "references_provider", "reference"),
    "hover": ("textDocument/hover", "HoverParams", "hover_provider", "hover"),
}
HIERARCHY_ACTIONS = ("callers", "callees", "supertypes", "subtypes")
REFERENCES_CAP = 50
HOVER_CHARS = 6000


async def navigate(run: Run, sup: Supervisor, args: LspArgs) -> ToolResult:
    if args.line is None and args.symbol is not None:
        # a qualified name, or a name declared once in the file: its line is found, nothing is guessed
        from tether_lsp.locate import locate

        resolved, said = await locate(run, sup, args)
        try:
            found = await navigate(run, sup, resolved)
        except ToolError as exc:
            raise ToolError(f"{said}\n{exc.message}", **(exc.data or {})) from None
        where = {"file": resolved.file, "line": resolved.line}
        return ToolResult.text(f"{said}\n{found.plain}", {**(found.data or {}), "resolved": where})
    file, line, symbol = args.file, args.line, args.symbol
    if file is None or line is None or symbol is None:
        raise missing_arguments(args, args.action, "file", "line", "symbol")
    if args.depth is not None and args.action not in HIERARCHY_ACTIONS:
        raise ToolError(
            f"depth is the number of levels of callers, callees, supertypes and subtypes; {args.action} has none. "
            "Leave depth out",
            code="bad_argument",
        )
    if args.in_file is not None and args.action in ("hover", "code_actions", *HIERARCHY_ACTIONS):
        raise ToolError(
            f"in_file filters the locations of references, definition, type_definition and implementation; "
            f"{args.action} has none. Leave in_file out",
            code="bad_argument",
        )
    path, rel, text = source_file(run, file)
    find_symbol(text, line, symbol, args.occurrence, rel)  # refused before any server is asked
    if args.action in HIERARCHY_ACTIONS:
        from tether_lsp.hierarchy import hierarchy

        return await hierarchy(sup, path, rel, args)
    if args.action == "code_actions":
        return await code_actions(sup, path, rel, line, symbol, args.occurrence)
    method, params_name, capability, noun = NAVIGATION[args.action]
    in_rel = run.relpath(run.resolve_path(args.in_file)) if args.in_file is not None else None

    async def ask(conn: Connection, doc: Doc) -> ToolResult:
        lsp = conn.lsp
        if not getattr(conn.capabilities, capability, None):
            raise NotAnswered(
                ToolError(f"{conn.server.id} does not offer {noun} answers", code="unsupported")
            )
        spot = find_symbol(doc.text, line, symbol, args.occurrence, rel)  # the text the server has
        pos = position(conn, doc.text, spot)
        ident = lsp.TextDocumentIdentifier(uri=doc.uri)
        if args.action == "references":
            params = lsp.ReferenceParams(
                text_document=ident, position=pos, context=lsp.ReferenceContext(include_declaration=True)
            )
        else:
            params = getattr(lsp, params_name)(text_document=ident, position=pos)
        result = await sup.request(conn, method, params)
        where = f"'{symbol}' at {rel}:{line}"
        if args.action == "hover":
            hover = render.hover_text(result)
            if not hover:
                if readiness.was_busy(conn):
                    raise NotAnswered(still_indexing(conn, "hover"))
                raise NotAnswered(ToolResult.text(f"no hover information for {where}", {"hover": ""}))
            text = cap_text(hover, HOVER_CHARS, "The rest is in the definition.")
            return ToolResult.text(text, {"hover": hover})
        lines = render.Lines({doc.path: doc.text}, conn.uri_cache)
        every = locs = render.locations(result, run, conn.encoding, lines)
        if every and in_rel is not None:
            locs = [loc for loc in every if loc.file == in_rel]
            if not locs:
                return ToolResult.text(
                    f"no {noun} of {where} in {in_rel} ({len(every)} in other files; leave in_file out to see them)",
                    {"locations": [], "total": 0, "total_everywhere": len(every)},
                )
        if not locs:
            if readiness.was_busy(conn):
                raise NotAnswered(still_indexing(conn, noun + "s"))
            raise NotAnswered(ToolResult.text(f"no {noun} found for {where}", {"locations": [], "total": 0}))
        shown, note = locs[:REFERENCES_CAP], ""
        # the rest counted per file, so the model can ask for one file's with in_file
        rest = Counter(loc.file for loc in locs[len(shown) :])
        if rest:
            listed = ", ".join(f"{f} ({n})" for f, n in list(rest.items())[:20])
            beyond = f" and {len(rest) - 20} more file(s)" if len(rest) > 20 else ""
            note = (
                f"[{len(locs) - len(shown)} more {noun}s not shown (showing {len(shown)} of {len(locs)}). Per file: "
                f"{listed}{beyond}. Pass in_file with one of these files to see its {noun}s.]"
            )
        scope = f" in {in_rel} ({len(every)} in all files)" if in_rel is not None else ""
        head = f"{len(locs)} {noun}(s) of {where}{scope}:"
        body = "\n".join(loc.render() for loc in shown)
        outside: list[tuple[str, int, str]] = []
        more: list[str] = []
        if args.action == "references" and conn.publishes_program:
            name = identifier_at(text_lines(doc.text)[spot.line], spot.char, symbol)
            # paths, not relative names, and through the connection's uri cache: resolving every file of the
            # program again per answer cost more than the server's own answer on a small project
            known = (lines.where(u, run)[0] for u in [*conn.published, *conn.docs])
            skip = {p for p in known if p is not None} | {run.root / loc.file for loc in every}
            # the refresh before this query scanned the tree unless a poller watches it: those files are current
            files = (
                None if conn.watcher.poller is not None else [p for p in conn.watcher.files if p not in skip]
            )
            if files != []:
                outside = await asyncio.to_thread(occurrences, conn, run, name, skip, files)
            if outside:
                more = [
                    f"not among them: '{name}' is written as a whole word in {len(outside)} more place(s) in files "
                    f"outside {conn.server.id}'s program (not analysed, e.g. outside pyright's include); they may "
                    "use this symbol:",
                    *occurrence_lines(outside),
                ]
        return ToolResult.text(
            "\n".join(x for x in (head, body, note, *more) if x),
            {
                "locations": [loc.to_json() for loc in shown],
                "total": len(locs),
                "not_shown": dict(rest),
                "outside_program": [{"file": f, "line": n} for f, n, _ in outside],
            },
        )

    return await sup.with_file(path, ask)
