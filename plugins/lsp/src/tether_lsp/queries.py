"""The `lsp` tool's answers (read): navigation, diagnostics, symbols, status; loaded at its first call."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tether.diagnostics import sort_diagnostics
from tether.files import split_lines
from tether.options import CoreOptions
from tether.output import cap_items, cap_text
from tether.tools import ToolError, ToolResult

from tether_lsp import readiness, render
from tether_lsp.connection import RequestTimeout, ServerError
from tether_lsp.dependents import changes_seen_by
from tether_lsp.fix import Offered, applicability, place, remember
from tether_lsp.options import LspOptions
from tether_lsp.positions import Spot, find_symbol, from_units, text_lines, to_units
from tether_lsp.supervisor import NotAnswered
from tether_lsp.tools import LspArgs
from tether_lsp.watching import POLL_INTERVAL, SCAN_CAP, too_large
from tether_lsp.write_diagnostics import document_diagnostics, wait_round

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
WORKSPACE_SYMBOLS_CAP = 100
DOCUMENT_SYMBOLS_CAP = 200
HOVER_CHARS = 6000
CODE_ACTIONS_CAP = 30
FAILURE_CHARS = 200  # of a server's error, said beside another server's code actions
LOCAL_SCOPES = {"function", "method", "constructor"}  # an outline does not list what is declared inside these
OUTLINE_KINDS = LOCAL_SCOPES | {
    "class",
    "interface",
    "struct",
    "enum",
    "module",
    "namespace",
}  # kept over the cap


def source_file(run: Any, file: str) -> tuple[Path, str, str]:
    """(path, relpath, text) of an existing text file under the root, or a clear error."""
    path = run.resolve_path(file, must_exist=True)
    rel = run.relpath(path)
    if not path.is_file():
        raise ToolError(f"'{rel}' is a directory; give a file", code="not_a_file")
    if (refusal := too_large(path, rel)) is not None:
        raise refusal
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"'{rel}' is not UTF-8 text", code="unreadable") from None
    return path, rel, text


def _missing(args: Any, action: str, *names: str) -> ToolError:
    """The error for an action called without arguments it needs (those of ``names`` that are None)."""
    missing = [n for n in names if getattr(args, n) is None]
    what = " and ".join(missing)
    hint = (
        " (the symbol as written on that line, e.g. symbol: 'parse_config'); a column is never guessed"
        if "symbol" in missing
        else ""
    )
    return ToolError(f"action {action} needs {what}{hint}", code="missing_argument", missing=missing)


def position(conn: Any, text: str, spot: Spot) -> Any:
    lines = text_lines(text)
    source = lines[spot.line] if spot.line < len(lines) else ""
    return conn.lsp.Position(line=spot.line, character=to_units(source, spot.char, conn.encoding))


def still_indexing(conn: Any, what: str) -> ToolError:
    """The error for an empty answer of a server that was not ready when asked (its state is said below it)."""
    return ToolError(f"{conn.server.id} answered no {what} yet", code="indexing")


async def answer(sup: Any, ctx: Any, args: LspArgs) -> ToolResult:
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


async def _answer(sup: Any, ctx: Any, args: LspArgs) -> ToolResult:
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
            raise _missing(args, action, "file")
        if args.file == "*":
            return await project_diagnostics(run, sup)
        return await file_diagnostics(run, sup, args.file)
    return await navigate(run, sup, args)


async def navigate(run: Any, sup: Any, args: LspArgs) -> ToolResult:
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
        raise _missing(args, args.action, "file", "line", "symbol")
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

    async def ask(conn: Any, doc: Any) -> ToolResult:
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


async def code_actions(
    sup: Any, path: Path, rel: str, line: int, symbol: str, occurrence: int | None
) -> ToolResult:
    """The code actions of every server of the file for the symbol, merged in the servers' order, each
    said with its server; a server that has none, or failed, is said too when another one has some."""
    where = f"'{symbol}' at {rel}:{line}"

    async def ask(conn: Any, doc: Any) -> list[dict[str, Any]]:
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


def _render_diagnostics(diags: list[Any], scope: str) -> tuple[str, dict[str, Any]]:
    diags = sort_diagnostics(diags)
    errors = sum(d.severity == "error" for d in diags)
    warnings = sum(d.severity == "warning" for d in diags)
    if not diags:
        return f"no errors or warnings in {scope}", {"diagnostics": [], "total": 0}
    shown, note = cap_items(diags, 200, "diagnostics", "Ask for one file at a time to see its diagnostics.")
    text = "\n".join(
        [f"{errors} error(s), {warnings} warning(s) in {scope}:", *(d.render() for d in shown), note]
    ).strip()
    return text, {"diagnostics": [d.to_json() for d in shown], "total": len(diags)}


async def file_diagnostics(run: Any, sup: Any, file: str) -> ToolResult:
    """The file's diagnostics from every server that serves it, merged; a server without an answer is said."""
    path, rel, _ = source_file(run, file)
    timeout = sup.run.options.of(CoreOptions).diagnostics_timeout
    unanalysed: list[str] = []  # of the servers that do not analyse this file's folder (gopls: testdata/)

    async def ask(conn: Any, doc: Any) -> list[Any]:
        if note := conn.server.unanalysed(doc.path, conn.root):
            unanalysed.append(note)
        # files a shell changed (found by the query's refresh) that this file can depend on may change
        # its diagnostics: the answer waits for the server's round after them too (after all of them
        # when which ones is not known)
        outside = conn.watcher.outside
        changed = None
        if outside is not None:
            relevant = await changes_seen_by(
                conn, doc.path, outside[1], sup.run.options.of(LspOptions).lsp_request_timeout
            )
            changed = outside[1] if relevant is None else relevant
        items = await document_diagnostics(
            conn,
            doc,
            timeout,
            sup.run.options.of(LspOptions).lsp_request_timeout,
            after=outside[0] if outside is not None and changed else None,
        )
        if items is None:
            why = f"{conn.server.id} has not checked it yet"
            if outside is not None and changed:
                names = render.names([run.relpath(p) for p in changed])
                why = f"{conn.server.id} showed no analysis of the change to {names} made outside tether yet"
            raise ToolError(
                f"diagnostics still pending for {rel} after {timeout:g} s ({why}); ask again",
                code="pending",
            )
        if outside is not None and changed:
            conn.watcher.analysed(outside)
        lines = render.Lines({doc.path: doc.text})
        diags = render.diagnostics(items, doc.path, run, conn.encoding, lines, source=conn.server.id)
        readiness.record(conn, again=True)  # the answer is of the round waited for, not of when it was asked
        if not diags and readiness.was_busy(conn):
            raise still_indexing(conn, "diagnostics")
        return diags

    answers = await sup.with_every(path, ask)
    failed = [a for _, a in answers if isinstance(a, ToolError)]
    if len(failed) == len(answers):
        raise failed[0]
    diags = [d for _, a in answers if not isinstance(a, ToolError) for d in a]
    text, data = _render_diagnostics(diags, rel)
    if len(answers) > 1:
        data["servers"] = [server.id for server, a in answers if not isinstance(a, ToolError)]
    # one server's answer is not the file's: say which server is missing, and why
    notes = [f"not from {server.id}: {a.message}" for server, a in answers if isinstance(a, ToolError)]
    notes += dict.fromkeys(unanalysed)  # (once, also when a restarted server was asked again)
    return ToolResult.text("\n".join([text, *notes]), data)


async def project_diagnostics(run: Any, sup: Any) -> ToolResult:
    from tether_lsp.checker import run_checker

    # only the servers whose root marker is at the root are spoken of: the others' languages are not there
    usable, reasons, checkerless = [], [], []
    for server in sup.definitions():
        if not sup.enabled(server):
            continue
        avail = await sup.availability(server, run.root)
        if avail.root is None:
            continue
        if not server.checker:
            checkerless.append(server.id)
        elif server.checker_runs_project_code and not run.trusted:
            reasons.append(
                f"{server.id}: `{server.checker[0]}` runs the project's own code (build scripts), and this "
                "run does not trust its root (run option trust; tether --trust)"
            )
        elif avail.ok or avail.binary is None:
            usable.append(avail)
        elif avail.reason:
            reasons.append(f"{server.id}: {avail.reason}")
    unchecked = (
        f"{' and '.join(checkerless)} {'has' if len(checkerless) == 1 else 'have'} no project checker: ask for "
        "the diagnostics of one file at a time (file: 'path/to/file'), or build the project"
        if checkerless
        else ""
    )
    if not usable:
        if unchecked and not reasons:
            raise ToolError(unchecked, code="no_checker", servers=checkerless)
        why = "; ".join([*reasons, unchecked] if unchecked else reasons)
        raise ToolError(
            f"no project checker applies to this root ({why or 'no language server has its root marker here'}); "
            "ask for diagnostics of one file",
            code="no_checker",
        )
    diags, commands, stopped = [], [], []
    for avail in usable:
        found, shown, cut = await run_checker(
            avail.server, avail.root, run, sup.run.options.of(LspOptions).lsp_checker_timeout
        )
        diags += [d for d in found if d.severity in ("error", "warning")]
        commands.append(shown)
        stopped += [f"`{shown}` stopped reporting at {where} (too many errors)" for where in cut]
    text, data = _render_diagnostics(diags, "the project")
    data["commands"] = commands
    data["stopped"] = stopped
    if unchecked:
        text += f"\nNOT checked: {unchecked}"
    if stopped:
        text += f"\nNOT complete: {'; '.join(stopped)}; there are more errors: ask for one file's diagnostics"
    return ToolResult.text(f"checked with {', '.join(f'`{c}`' for c in commands)}\n{text}", data)


def _symbol_kind(conn: Any, kind: Any) -> str:
    try:
        return conn.lsp.SymbolKind(kind).name.lower()
    except ValueError:
        return "symbol"


async def document_symbols(sup: Any, conn: Any, doc: Any) -> Any:
    """The server's ``textDocument/documentSymbol`` answer for an open document; refused when it has none."""
    lsp = conn.lsp
    if not getattr(conn.capabilities, "document_symbol_provider", None):
        raise NotAnswered(ToolError(f"{conn.server.id} does not offer document symbols", code="unsupported"))
    params = lsp.DocumentSymbolParams(text_document=lsp.TextDocumentIdentifier(uri=doc.uri))
    return await sup.request(conn, "textDocument/documentSymbol", params)


async def symbols(run: Any, sup: Any, args: LspArgs) -> ToolResult:
    if args.file is not None and args.file != "*":
        path, rel, _ = source_file(run, args.file)

        async def outline(conn: Any, doc: Any) -> ToolResult:
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
                    kind = _symbol_kind(conn, s.kind)
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


async def workspace_symbols(run: Any, sup: Any, query: str) -> ToolResult:
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
            kind = _symbol_kind(conn, s.kind)
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


async def outside_changes_seen(run: Any, sup: Any, conn: Any) -> None:
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


def _searches(conn: Any) -> bool:
    return bool(getattr(conn.capabilities, "workspace_symbol_provider", None))


def open_some_file(conn: Any) -> Any:
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


async def status(run: Any, sup: Any) -> ToolResult:
    running = []
    alive = [conn for conn in sup.connections.values() if conn.alive]
    for conn in alive:
        running.append(
            {
                "server": conn.server.id,
                "root": run.relpath(conn.root),
                "pid": conn.pid,
                "uptime_s": round(sup.uptime(conn), 1),
                "open_documents": len(conn.docs),
                "restarts": conn.restarts,
                "position_encoding": conn.encoding,
                "ready": (state := readiness.busy(conn)) is None,
                "still": state,  # what it is still doing, when not ready
                "binary": conn.binary,
                "rounds": conn.rounds,
                "file_sync": (
                    f"polled every {POLL_INTERVAL:g} s (large tree)"
                    if conn.watcher.poller is not None
                    else "checked before every query"
                )
                + (f" - only the first {SCAN_CAP} files" if conn.watcher.truncated else ""),
            }
        )
    servers = []
    for server in sup.definitions():
        avail = await sup.availability(server, run.root)
        servers.append(
            {
                "id": server.id,
                "languages": list(server.languages),
                "enabled": sup.enabled(server),
                "replaced_by": sup.replaced_by(server),
                "available": avail.ok,
                "reason": avail.reason,
                "binary": avail.binary,
                "note": avail.note,
                "root": run.relpath(avail.root) if avail.root else None,
            }
        )
    lines = ["running:" if running else "running: none (servers start on the first query for a file)"]
    lines += [
        f"  {r['server']} for {r['root']} (pid {r['pid']}, up {r['uptime_s']} s, {r['open_documents']} open document(s), "
        f"restarts {r['restarts']}, {r['position_encoding']}{', still ' + r['still'] if r['still'] else ''}; "
        f"files changed on disk: {r['file_sync']}){_rounds_note(conn)}"
        for r, conn in zip(running, alive, strict=True)
    ]
    lines.append(
        "servers (checked at the root; a subdirectory with its own marker is checked when a file there is asked about):"
    )
    for s in servers:
        langs = ", ".join(s["languages"])
        if s["replaced_by"]:
            state = f"switched off: {s['replaced_by']} replaces it (name both in the run option lsp_servers to use both)"
        elif not s["enabled"]:
            state = "alternative, not enabled (name it in the run option lsp_servers to use it)"
        elif s["available"]:
            state = f"available ({s['binary']})"
        else:
            state = f"unavailable: {s['reason']}"
        if s["note"]:
            state += f"; {s['note']}"
        lines.append(f"  {s['id']} ({langs}): {state}")
    return ToolResult.text("\n".join(lines), {"running": running, "servers": servers})


def _rounds_note(conn: Any) -> str:
    """Said of a server read by another round rule than its definition's (`ServerDef.round_titles`)."""
    if conn.rounds == conn.server.rounds:
        return ""
    titles = "/".join(conn.server.round_titles)
    return f"; it reports no '{titles}' progress, so the end of its rounds is read from its publishes"


IDENT_CHAR = re.compile(r"[\w$]")
OCCURRENCES_SHOWN = 10
SCAN_BYTES = 2_000_000  # a bigger file is not searched for leftover occurrences


def identifier_at(source_line: str, char: int, symbol: str) -> str:
    """The whole identifier the symbol (a substring) points into, e.g. 'iter_params' -> 'iter_params_for_processing'."""
    start, end = char, char + len(symbol)
    while start > 0 and IDENT_CHAR.match(source_line[start - 1]):
        start -= 1
    while end < len(source_line) and IDENT_CHAR.match(source_line[end]):
        end += 1
    return source_line[start:end] or symbol


def occurrences(
    conn: Any,
    run: Any,
    name: str,
    skip: set[Path],
    files: list[Path] | None = None,
    texts: Mapping[Path, str | None] | None = None,
) -> list[tuple[str, int, str]]:
    """(file, line, text) of every whole-word occurrence of ``name`` in the server's source files under
    its root (``files`` when the caller has a current list, else scanned now), except in the files ``skip``.
    Files are read from disk, bounded; those of ``texts`` (a change not written yet) from there."""
    pattern = re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])")
    found = []
    texts = texts or {}
    for path in sorted(conn.watcher.scan() if files is None else files):
        if path in skip:
            continue
        rel = run.relpath(path)
        try:
            if path in texts:
                text = texts[path] or ""
            elif path.stat().st_size > SCAN_BYTES:
                continue
            else:
                text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if name not in text:
            continue
        for n, line in enumerate(split_lines(text), 1):
            if pattern.search(line):
                found.append((rel, n, line.strip()[:160]))
    return found


def occurrence_lines(found: list[tuple[str, int, str]]) -> list[str]:
    """The first occurrences as file:line: text, then a count per file for the rest."""
    lines = [f"  {f}:{n}: {text}" for f, n, text in found[:OCCURRENCES_SHOWN]]
    rest: dict[str, int] = {}
    for f, _, _ in found[OCCURRENCES_SHOWN:]:
        rest[f] = rest.get(f, 0) + 1
    if rest:
        listed = ", ".join(f"{f} ({k})" for f, k in list(rest.items())[:20])
        more = f" and {len(rest) - 20} more file(s)" if len(rest) > 20 else ""
        lines.append(f"  ... {len(found) - OCCURRENCES_SHOWN} more: {listed}{more}")
    return lines
