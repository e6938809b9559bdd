"""The `lsp` tool's symbols: a file's outline (document symbols) or a search of the workspace symbols of
the servers at the root, merged; `tether_lsp.locate` finds a symbol given without its line through them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.output import cap_items
from tether.tools import ToolError, ToolResult

from tether_lsp import readiness, render
from tether_lsp.args import LspArgs
from tether_lsp.common import source_file, still_indexing
from tether_lsp.connection import RequestTimeout, ServerError
from tether_lsp.options import LspOptions
from tether_lsp.positions import from_units
from tether_lsp.rounds import wait_round
from tether_lsp.supervisor import NotAnswered

if TYPE_CHECKING:
    from tether.run import Run

    from tether_lsp.connection import Connection, Doc
    from tether_lsp.supervisor import Supervisor

WORKSPACE_SYMBOLS_CAP = 100
DOCUMENT_SYMBOLS_CAP = 200
LOCAL_SCOPES = {"function", "method", "constructor"}  # an outline does not list what is declared inside these
OUTLINE_KINDS = LOCAL_SCOPES | {
    "class",
    "interface",
    "struct",
    "enum",
    "module",
    "namespace",
}  # kept over the cap


def symbol_kind(conn: Connection, kind: Any) -> str:
    try:
        return conn.lsp.SymbolKind(kind).name.lower()
    except ValueError:
        return "symbol"


async def document_symbols(sup: Supervisor, conn: Connection, doc: Doc) -> Any:
    """The server's ``textDocument/documentSymbol`` answer for an open document; refused when it has none."""
    lsp = conn.lsp
    if not getattr(conn.capabilities, "document_symbol_provider", None):
        raise NotAnswered(ToolError(f"{conn.server.id} does not offer document symbols", code="unsupported"))
    params = lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=doc.uri))
    return await sup.request(conn, "textDocument/documentSymbol", params)


async def symbols(run: Run, sup: Supervisor, args: LspArgs) -> ToolResult:
    if args.file is not None and args.file != "*":
        path, rel, _ = source_file(run, args.file)

        async def outline(conn: Connection, doc: Doc) -> ToolResult:
            result = await document_symbols(sup, conn, doc)
            lines = render.Lines({doc.path: doc.text})
            # (line, data, tier): 0 top-level symbols, classes, functions and methods; 1 other members of a
            # class (attributes, constants). What is inside a function is not listed.
            rows: list[tuple[str, dict[str, Any], int]] = []

            def start(s: Any) -> tuple[int, int]:
                rng = getattr(s, "selection_range", None) or s.location.range
                return (rng.start.line, rng.start.character)

            def walk(items: Any, depth: int) -> None:
                # by line: tsserver lists each level alphabetically
                for s in sorted(items or [], key=start):
                    if s.name.endswith(") callback"):
                        continue  # tsserver's name for a function passed as an argument: a local
                    line, units = start(s)
                    col = from_units(lines.get(doc.path, line), units, conn.encoding) + 1
                    kind = symbol_kind(conn, s.kind)
                    data = {"name": s.name, "kind": kind, "line": line + 1, "column": col, "depth": depth}
                    tier = 0 if depth == 0 or kind in OUTLINE_KINDS else 1
                    rows.append((f"{'  ' * depth}{line + 1}:{col} {kind} {s.name}", data, tier))
                    if kind not in LOCAL_SCOPES:
                        walk(getattr(s, "children", None), depth + 1)

            walk(result, 0)
            if not rows:
                if readiness.was_busy(conn):
                    raise NotAnswered(still_indexing(conn, "symbols"))
                raise NotAnswered(ToolResult.text(f"no symbols in {rel}", {"symbols": [], "total": 0}))
            # over the cap, class attributes go before any class, function or method is cut
            kept = [r for r in rows if r[2] == 0] if len(rows) > DOCUMENT_SYMBOLS_CAP else rows
            left_note = (
                f"[{len(rows) - len(kept)} class attributes left out to keep every class and function; read "
                "a class to see its own.]"
                if len(kept) < len(rows)
                else ""
            )
            shown, note = cap_items(
                kept, DOCUMENT_SYMBOLS_CAP, "symbols", "Use a workspace query to find a symbol by name."
            )
            head = f"{len(rows)} symbol(s) in {rel}:"
            text = "\n".join(x for x in [head, *(r[0] for r in shown), left_note, note] if x)
            data = {
                "symbols": [r[1] for r in shown],
                "total": len(rows),
                "left_out": len(rows) - len(kept),
            }
            return ToolResult.text(text, data)

        return await sup.with_file(path, outline)
    if not args.query:
        raise ToolError(
            "action symbols needs query (a name to search the workspace for) or file (for its outline)",
            code="missing_argument",
            missing=["query"],
        )
    return await workspace_symbols(run, sup, args.query)


async def workspace_symbols(run: Run, sup: Supervisor, query: str) -> ToolResult:
    # the servers to ask, in the order of lsp_servers (else of the definitions): those running, and when none of
    # them searches the workspace, the first usable one at the root that does
    enabled = sup.in_order([d for d in sup.definitions() if sup.enabled(d)])
    rank = {d.id: n for n, d in enumerate(enabled)}
    running = [c for c in sup.connections.values() if c.alive and c.server.id in rank]
    targets = sorted(running, key=lambda c: rank[c.server.id])
    for server in [] if any(map(_searches, targets)) else enabled:
        avail = await sup.availability(server, run.root)
        if avail.ok:
            conn = await sup.connection(avail)
            if conn not in targets:
                targets.append(conn)
            if _searches(conn):
                break
    if not targets:
        raise ToolError(
            "no language server is usable at the root (see `lsp` action status); give file to get one file's symbols",
            code="server_unavailable",
        )
    found: dict[tuple[str, int, str], dict[str, Any]] = {}
    indexing = False
    limited = []  # the servers whose answer reached their own limit: there may be more
    lines = render.Lines()
    asked = []
    for conn in filter(_searches, targets):
        asked.append(conn.server.id)
        await conn.watcher.refresh()
        await conn.first_round(
            sup.run.options.of(LspOptions).lsp_ready_wait
        )  # as every query: not from a half-loaded project
        readiness.record(conn)
        await outside_changes_seen(run, sup, conn)
        if conn.server.symbols_need_open_file and not conn.docs:
            opened = open_some_file(conn)
            if opened is None:
                raise ToolError(
                    f"{conn.server.id} searches only the projects of open files, and no "
                    f"{'/'.join(conn.server.extensions)} file was found under {run.relpath(conn.root)}; "
                    "give file to get one file's symbols",
                    code="no_project",
                )
        try:
            result = await sup.request(conn, "workspace/symbol", conn.lsp.WorkspaceSymbolParams(query=query))
        except RequestTimeout as exc:
            raise ToolError(
                f"{conn.server.id} timed out: {exc}; retry, or raise the run option lsp_request_timeout",
                code="timeout",
            ) from None
        except ServerError as exc:
            first = str(exc).strip().splitlines()[:2]
            raise ToolError(
                f"{conn.server.id} could not search the workspace ({' '.join(first)[:200]}); give file to get "
                "one file's symbols, or open a file of the project with another lsp action first",
                code="server_error",
            ) from None
        indexing |= readiness.was_busy(conn)
        limit = conn.server.workspace_symbol_limit
        if limit is not None and len(result or []) >= limit:
            limited.append(f"{conn.server.id} returns at most {limit} symbols")
        for s in result or []:
            loc = s.location
            rng = getattr(loc, "range", None)
            path = render.uri_to_path(loc.uri)
            if rng is not None and path is not None:
                at = render.location(loc.uri, rng.start, run, conn.encoding, lines)
                file, line, col = at.file, at.line, at.column
            else:
                file, line, col = (run.relpath(path) if path else loc.uri), 0, 0
            kind = symbol_kind(conn, s.kind)
            row = {
                "name": s.name,
                "kind": kind,
                "container": getattr(s, "container_name", None) or "",
                "file": file,
                "line": line,
                "column": col,
            }
            # the same symbol from two servers (their columns may differ): the first server's, in their order
            found.setdefault((file, line, s.name), row)
    rows = sorted(
        found.values(),
        key=lambda r: (r["name"] != query, r["file"].startswith("/"), r["file"], r["line"], r["column"]),
    )
    if not rows:
        if indexing:
            raise ToolError(f"no symbols match '{query}' yet", code="indexing")
        return ToolResult.text(f"no symbols match '{query}'", {"symbols": [], "total": 0})
    shown, note = cap_items(rows, WORKSPACE_SYMBOLS_CAP, "symbols", "Use a more specific query.")
    if limited:
        note = "\n".join(
            x for x in (note, f"[may be cut: {', '.join(limited)} per query; use a more specific query]") if x
        )
    body = [
        f"{r['file']}:{r['line']}:{r['column']}: {r['kind']} {r['name']}"
        + (f" (in {r['container']})" if r["container"] else "")
        for r in shown
    ]
    return ToolResult.text(
        "\n".join([f"{len(rows)} symbol(s) matching '{query}':", *body, note]).strip(),
        {"symbols": shown, "total": len(rows), "may_be_cut": bool(limited), "servers": asked},
    )


async def outside_changes_seen(run: Run, sup: Supervisor, conn: Connection) -> None:
    """Wait (at most lsp_ready_wait) for the server's round after the files a shell changed (found by the
    query's refresh): basedpyright adds a new file to its program a moment after it is told, and a search
    asked before then missed its symbols. A round that does not come makes the answer say it may be
    incomplete."""
    outside = conn.watcher.outside
    if outside is None:
        return
    if await wait_round(conn, outside[0], sup.run.options.of(LspOptions).lsp_ready_wait):
        conn.watcher.analysed(outside)
        readiness.record(conn, again=True)  # the answer is of the round waited for
        return
    names = render.names([run.relpath(p) for p in outside[1]])
    readiness.pending(conn, f"analysing the change to {names} made outside tether")


def _searches(conn: Connection) -> bool:
    return bool(getattr(conn.capabilities, "workspace_symbol_provider", None))


def open_some_file(conn: Connection) -> Doc | None:
    """Open the source file nearest to the server's root (its first extension first, e.g. src/index.ts) so
    that a server which searches only the projects of open files (tsserver: "No Project") has one. The
    files are the watcher's, scanned at the server's start and by the query's refresh (off the loop)."""
    order = {ext: n for n, ext in enumerate(conn.server.extensions)}
    files = sorted(
        conn.watcher.files,
        key=lambda p: (order.get(p.suffix, len(order)), len(p.relative_to(conn.root).parts), str(p)),
    )
    for path in files:
        if (doc := conn.open(path)) is not None:
            return doc
    return None
