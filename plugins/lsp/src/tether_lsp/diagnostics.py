"""The `lsp` tool's diagnostics: of one file, from every server that serves it (merged, each after its
complete round), or of the whole project (``"*"``), from the project checkers (`tether_lsp.checker`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.diagnostics import sort_diagnostics
from tether.options import CoreOptions
from tether.output import cap_items
from tether.tools import ToolError, ToolResult

from tether_lsp import readiness, render
from tether_lsp.common import source_file, still_indexing
from tether_lsp.dependents import changes_seen_by
from tether_lsp.options import LspOptions
from tether_lsp.rounds import document_diagnostics

if TYPE_CHECKING:
    from tether.run import Run

    from tether_lsp.connection import Connection, Doc
    from tether_lsp.supervisor import Supervisor


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


async def file_diagnostics(run: Run, sup: Supervisor, file: str) -> ToolResult:
    """The file's diagnostics from every server that serves it, merged; a server without an answer is said."""
    path, rel, _ = source_file(run, file)
    timeout = sup.run.options.of(CoreOptions).diagnostics_timeout
    unanalysed: list[str] = []  # of the servers that do not analyse this file's folder (gopls: testdata/)

    async def ask(conn: Connection, doc: Doc) -> list[Any]:
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


async def project_diagnostics(run: Run, sup: Supervisor) -> ToolResult:
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
