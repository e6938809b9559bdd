"""The `lsp_rename` tool (write): a symbol renamed everywhere the language server knows it is used.

The server computes the edits (`textDocument/rename`); tether plans them (`edits.plan_workspace_edit`),
writes every file or none under the root's write lock, tells the server, and says what the server did
not rename: the old name still written as a whole word elsewhere, and aliases that keep it. With
``preview``, nothing is written: the rename is staged (`tether.staging`, accepted or discarded with
`resolve`) and answered with the diagnostics it would introduce.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

from tether.tools import ToolError, ToolResult

from tether_lsp.options import LspOptions

if TYPE_CHECKING:
    from tether.run import CallContext, Run

    from tether_lsp.args import RenameArgs
    from tether_lsp.connection import Connection, Doc
    from tether_lsp.edits import PlannedEdit
    from tether_lsp.supervisor import Supervisor

IDENT_BREAK = re.compile(r"\s")


async def rename_handler(sup: Supervisor, ctx: CallContext, args: RenameArgs) -> ToolResult:
    # the language-server machinery loads at the first call (see `tether_lsp.tools`)
    from tether_lsp import readiness, render
    from tether_lsp.common import (
        identifier_at,
        occurrence_lines,
        occurrences,
        position,
        source_file,
    )
    from tether_lsp.edits import plan_workspace_edit, write_planned
    from tether_lsp.positions import find_symbol, text_lines
    from tether_lsp.supervisor import NotAnswered

    run = ctx.run
    path, rel, text = source_file(run, args.file)
    find_symbol(text, args.line, args.symbol, args.occurrence, rel)
    planned: list[Any] = []  # with preview: the plan, staged once the servers are free again

    async def rename(conn: Connection, doc: Doc) -> ToolResult:
        lsp = conn.lsp
        if not getattr(conn.capabilities, "rename_provider", None):
            raise NotAnswered(ToolError(f"{conn.server.id} does not offer rename", code="unsupported"))
        # a rename computed while the server still analyses the project could miss uses: wait, else refuse
        state = await readiness.wait_ready(conn, sup.run.options.of(LspOptions).lsp_ready_wait)
        if state is not None:
            raise ToolError(
                f"nothing was renamed: {conn.server.id} still {state}, and a rename computed now could miss "
                "uses it has not analysed yet; ask again in a few seconds (or raise the run option lsp_ready_wait)",
                code="not_ready",
                ready=False,
            )
        spot = find_symbol(doc.text, args.line, args.symbol, args.occurrence, rel)
        old_name = identifier_at(text_lines(doc.text)[spot.line], spot.char, args.symbol)
        # files outside the server's program that mention the name are opened first: the server analyses open
        # files whatever its include says, so the rename covers the uses it can resolve there
        extra = await open_mentions(conn, run, old_name) if old_name != args.new_name else []
        pos = position(conn, doc.text, spot)
        params = lsp.RenameParams(
            text_document=lsp.TextDocumentIdentifier(uri=doc.uri), position=pos, new_name=args.new_name
        )
        writes: dict[Any, Any] = {}
        try:
            edit = await sup.request(conn, "textDocument/rename", params)
            plan = plan_workspace_edit(edit, run, conn.encoding)
            writes = plan.writes()
        finally:  # opened only for the rename: the written ones stay open, the write's diagnostics read them
            for d in extra:
                if d.path not in writes:
                    conn.close_doc(d)
        if not writes:
            raise NotAnswered(
                ToolError(
                    f"{conn.server.id} found nothing to rename for '{args.symbol}' at {rel}:{args.line}; point at the "
                    "symbol's name where it is defined or used",
                    code="nothing_to_rename",
                )
            )
        if args.preview:
            planned.append(plan)
        else:
            await write_planned([conn], run, plan, "the rename")
        files = [{"file": run.relpath(p), "edits": n} for p, n in sorted(plan.edits.items()) if n]
        total = sum(f["edits"] for f in files)
        did = "would rename" if args.preview else "renamed"
        lines = [f"{did} '{args.symbol}' to '{args.new_name}': {total} edit(s) in {len(files)} file(s)"]
        lines += [f"  {f['file']}: {f['edits']} edit(s)" for f in files]
        lines += [f"  {op}" for op in plan.operations]
        if extra:
            names = render.names([run.relpath(d.path) for d in extra])
            lines.append(
                f"opened first, since they are outside {conn.server.id}'s program and mention '{old_name}': {names}"
            )
        # an alias keeping the old name (tsserver: `export { newName as oldName }`) is said as such
        kept = kept_names(edit, run, old_name, args.new_name)
        if kept:
            lines.append(
                f"kept the public name: '{old_name}' is still exported or written under its old name as an alias, "
                f"so code using '{old_name}' keeps working (edit these too to drop the old name):"
            )
            lines += [f"  {f}:{n}: {text}" for f, n, text in kept]
        # the server renames only what its program holds: say where the old name is still written
        left = (
            []
            if old_name == args.new_name
            else await asyncio.to_thread(
                occurrences, conn, run, old_name, set(), None, plan.contents if args.preview else None
            )
        )
        left = [x for x in left if (x[0], x[1]) not in {(f, n) for f, n, _ in kept}]
        if left:
            lines.append(
                f"NOT renamed: '{old_name}' is {'would still be' if args.preview else 'still'} written as a whole word in {len(left)} place(s) the server did not change "
                f"(files outside {conn.server.id}'s program, .gitignore'd ones included, such as tests outside pyright's or "
                "tsconfig's include, or "
                "comments, strings, another symbol of that name); check each and edit the ones that use the renamed symbol:"
            )
            lines += occurrence_lines(left)
        data = {
            "files": files,
            "edits": total,
            "operations": plan.operations,
            "not_renamed": [{"file": f, "line": n} for f, n, _ in left],
            "kept_names": [{"file": f, "line": n, "text": text} for f, n, text in kept],
            "ready": True,
        }
        return ToolResult.text("\n".join(lines), data)

    answer = await sup.with_file(path, rename)
    if not planned:
        return answer
    return await _staged(run, planned[0], answer)


async def _staged(run: Run, plan: PlannedEdit, answer: ToolResult) -> ToolResult:
    """A previewed rename: staged through the run's one door (its drift check and all-or-nothing `resolve`),
    with what it would introduce (the servers are free again: the preview holds them alone)."""
    from tether.staging import diff_lines, preview

    writes = plan.writes()
    found = await preview(run, writes)
    counts = answer.data or {}
    total = counts["edits"]
    what = f"a rename ({total} edit(s))"
    edit = run.staging.stage("lsp_rename", writes, list(plan.originals.values()), what, found)
    head = (
        f"(proposed) {answer.plain.splitlines()[0]}; nothing is written until you call resolve with edit_id "
        f'"{edit.edit_id}" and action "accept" (or "discard"; with if_clean: true it writes only if this '
        "preview found no new errors)."
    )
    old = await asyncio.to_thread(lambda: {p: p.read_bytes() if p.is_file() else None for p in writes})
    lines = [head, *answer.plain.splitlines()[1:], *found.render(sorted(run.relpath(p) for p in writes))]
    lines += diff_lines(run, old, writes)
    data = {**counts, "edit_id": edit.edit_id, "preview": found.to_json()}
    return ToolResult.text("\n".join(lines), data)


OPEN_CAP = 50  # files outside the program opened for one rename; the rest is listed as not renamed


async def open_mentions(conn: Connection, run: Run, name: str) -> list[Any]:
    """Open the files outside the server's program (of a server that publishes its whole program) that write
    ``name`` as a whole word; the documents opened."""
    from tether_lsp.common import occurrences
    from tether_lsp.render import uri_to_path

    if not conn.server.publishes_program:
        return []
    known = {p for p in (uri_to_path(u) for u in [*conn.published, *conn.docs]) if p is not None}
    found = await asyncio.to_thread(occurrences, conn, run, name, known)
    opened = []
    for rel in list(dict.fromkeys(f for f, _, _ in found))[:OPEN_CAP]:
        doc = conn.open(run.root / rel)
        if doc is not None:
            opened.append(doc)
    return opened


def kept_names(edit: Any, run: Run, old: str, new: str) -> list[tuple[str, int, str]]:
    """(file, line, new text) of the rename's edits that write the old name next to the new one: tsserver keeps
    an exported name (`isHttpError as isHTTPError`) and a shorthand property (`isHTTPError: isHttpError`)."""
    from tether_lsp.render import uri_to_path

    pattern = re.compile(rf"(?<![\w$]){re.escape(old)}(?![\w$])")
    groups = list((getattr(edit, "changes", None) or {}).items())
    groups += [
        (change.text_document.uri, change.edits)
        for change in getattr(edit, "document_changes", None) or []
        if hasattr(change, "edits")
    ]
    found = []
    for uri, edits in groups:
        path = uri_to_path(uri)
        for e in edits:
            text = getattr(e, "new_text", None) or ""
            if path is not None and text != new and pattern.search(text):
                found.append((run.relpath(path), e.range.start.line + 1, text))
    return sorted(found)


def rename_touches(args: RenameArgs) -> list[str]:
    """The file a rename starts from; refuses a bad new name before any server is asked for a baseline."""
    if IDENT_BREAK.search(args.new_name):
        raise ToolError(
            f"new_name {args.new_name!r} contains whitespace; give a single identifier", code="bad_name"
        )
    return [] if args.preview else [args.file]  # a preview writes nothing: no diagnostics of a write
