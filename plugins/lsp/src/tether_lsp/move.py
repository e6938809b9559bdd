"""The `lsp_move` tool (write): a file moved, and the imports of it updated by the language server.

The server computes the importers' edits (`workspace/willRenameFiles`, offered by basedpyright and
typescript-language-server; not by Debian's gopls); tether plans them and the move itself (a delete of
the old path and a create of the new one, after the server's edits of the moved file) as one
WorkspaceEdit (`edits.plan_workspace_edit`), writes every file or none through the run's write path,
then tells the server (`workspace/didRenameFiles` where it asks for it; the old document closed, the
new one opened). A server that cannot update imports moves nothing, unless ``force`` is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.tools import ToolError, ToolResult

from tether_lsp.options import LspOptions

if TYPE_CHECKING:
    from tether.run import CallContext, Run

    from tether_lsp.args import MoveArgs
    from tether_lsp.connection import Connection, Doc
    from tether_lsp.supervisor import Supervisor

UNSUPPORTED = ("unsupported", "no_server", "server_unavailable")


def checked_paths(run: Run, args: MoveArgs) -> tuple[Path, Path]:
    """The source and destination, absolute; or one clear error (before anything is asked or written)."""
    src = run.resolve_path(args.file, must_exist=True)
    if src.is_dir():
        raise ToolError(
            f"'{run.relpath(src)}' is a directory; lsp_move moves one file: move its files one by one",
            code="not_a_file",
        )
    dst = run.resolve_path(args.to)
    if dst == src or dst.exists() or dst.is_symlink():
        raise ToolError(
            f"'{run.relpath(dst)}' exists; nothing was moved: give a path that does not exist yet "
            "(lsp_move never overwrites a file)",
            code="destination_exists",
        )
    blocking = next((p for p in dst.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise ToolError(
            f"'{run.relpath(blocking)}' is a file, so '{run.relpath(dst)}' cannot be created under it; "
            "nothing was moved: give another destination",
            code="bad_destination",
        )
    return src, dst


def move_touches(run: Run, args: MoveArgs) -> list[str]:
    """The files a move writes for sure (its approval sees them; the importers are approved when known):
    a bad input is refused here, before any server is asked for a baseline."""
    src, dst = checked_paths(run, args)
    return [run.relpath(src), run.relpath(dst)]


async def move_handler(sup: Supervisor, ctx: CallContext, args: MoveArgs) -> ToolResult:
    # the language-server machinery loads at the first call (see `tether_lsp.tools`)
    from tether_lsp import readiness
    from tether_lsp.supervisor import NotAnswered

    run = ctx.run
    src, dst = checked_paths(run, args)
    old, new = run.relpath(src), run.relpath(dst)

    from tether_lsp.edits import renames_offered

    async def move(conn: Connection, doc: Doc) -> ToolResult:
        lsp = conn.lsp
        if not renames_offered(conn, "will"):
            raise NotAnswered(
                ToolError(
                    f"nothing was moved: {conn.server.id} cannot update imports on a move (it offers no "
                    "workspace/willRenameFiles). Give force: true to move the file without updating the files "
                    "that import it (the answer lists the errors that introduces), or edit the imports yourself",
                    code="unsupported",
                    server=conn.server.id,
                )
            )
        if conn.server.moves_within_folder and src.parent != dst.parent:
            raise NotAnswered(
                ToolError(
                    f"nothing was moved: {conn.server.id} updates imports only for a file renamed within its "
                    f"folder (its edits for a move to another folder name the wrong module). Rename it within "
                    f"{run.relpath(src.parent)}/ first, or give force: true to move it without updating the files "
                    "that import it (the answer lists the errors that introduces)",
                    code="unsupported",
                    server=conn.server.id,
                )
            )
        # importers the server has not analysed yet would keep the old path: wait, else refuse
        state = await readiness.wait_ready(conn, sup.run.options.of(LspOptions).lsp_ready_wait)
        if state is not None:
            raise ToolError(
                f"nothing was moved: {conn.server.id} still {state}, and the import updates computed now could "
                "miss importers it has not analysed yet; ask again in a few seconds (or raise the run option "
                "lsp_ready_wait)",
                code="not_ready",
                ready=False,
            )
        params = lsp.RenameFilesParams(files=[lsp.FileRename(old_uri=src.as_uri(), new_uri=dst.as_uri())])
        edit = await sup.request(conn, "workspace/willRenameFiles", params)
        return await apply(ctx, [conn], edit, conn.encoding, src, dst, updated_by=conn.server.id)

    try:
        return await sup.with_file(src, move)
    except ToolError as exc:
        if not args.force or (exc.data or {}).get("error") not in UNSUPPORTED:
            if (exc.data or {}).get("error") in ("no_server", "server_unavailable"):
                raise ToolError(
                    f"{exc.message}; nothing was moved: no server can update the imports of '{old}'. "
                    "Give force: true to move it without updating them",
                    **(exc.data or {}),
                ) from None
            raise
        reason = exc.message.removeprefix("nothing was moved: ").split(". ")[0]
    # force: the move alone, every running server of the file told
    conns = [c for c in sup.connections.values() if c.alive and c.server.handles(src)]
    result = await apply(ctx, conns, None, "utf-16", src, dst, updated_by=None)
    lines = [
        f"moved {old} -> {new} WITHOUT updating imports ({reason}): files importing '{old}' still name its old "
        "path; fix them (the diagnostics below show the ones the server reports, which may not be all of them "
        "yet: a server applies a file gone from disk to its importers a moment after it is told, so ask "
        "lsp diagnostics of an importer to see its errors now)"
    ]
    return ToolResult.text("\n".join(lines), {**(result.data or {}), "imports_updated": False})


async def apply(
    ctx: CallContext, conns: list[Any], edit: Any, encoding: str, src: Path, dst: Path, updated_by: str | None
) -> ToolResult:
    """The server's edit and the move, written all at once; the servers told; the answer."""
    from lsprotocol import types as lsp

    from tether_lsp.edits import plan_workspace_edit, write_planned

    run = ctx.run
    move = lsp.RenameFile(old_uri=src.as_uri(), new_uri=dst.as_uri())
    plan = plan_workspace_edit(edit, run, encoding, then=[move])
    # the servers are told as after every write of the family: the old document closed, didRenameFiles
    # where asked for, the new path opened
    written = await write_planned(conns, run, plan, "the move")
    old, new = run.relpath(src), run.relpath(dst)
    # what the run knew of the file's diagnostics is known of its new path: old errors are not the move's
    run.diagnostics.moved(old, new)
    edits = {dst if p == src else p: n for p, n in plan.edits.items() if n}
    files = [
        {"file": run.relpath(p), "edits": n} for p, n in sorted(edits.items()) if p in written or p == dst
    ]
    changed = [f for f in files if f["file"] != new]
    lines = [f"moved {old} -> {new}"]
    if updated_by is not None:
        total = sum(f["edits"] for f in files)
        lines[0] += (
            f"; {updated_by} updated the imports: {total} edit(s) in {len(files)} file(s)"
            if files
            else f"; {updated_by} found no import of it to update"
        )
        lines += [f"  {f['file']}: {f['edits']} edit(s)" for f in files]
    data = {
        "moved": {"from": old, "to": new},
        "files": files,
        "importers": [f["file"] for f in changed],
        "imports_updated": updated_by is not None,
        "server": updated_by,
        "ready": True,
    }
    return ToolResult.text("\n".join(lines), data)
