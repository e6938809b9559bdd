"""Previews: what a set of new contents would introduce, from the run's language servers, with nothing written.

The core asks (`tether_diagnostics_preview`) for a staged change (`ast_edit`, `lsp_rename` with ``preview``)
and for a dry run of a file tool. Each affected server gets the contents as unsaved documents
(`Connection.overlay`: didChange of an open document, didOpen with the text of a file not open), and the
answer is taken exactly as a write's: `before_write`'s baseline, then `with_change` with the overlays in
place of the write, waiting for the complete rounds by the same rules (`round_done`), other files the
change breaks included. Then every overlay is put back to the disk's content (didChange to the disk's
text, didClose of a document the preview opened).

A preview holds the run's servers alone (`Gate`): queries and writes' diagnostics wait, so no answer is
taken from unsaved contents and two previews never overlap. The hold lasts until the servers' round after
the putting back is complete (bounded by diagnostics_timeout), in the background: the preview answers
without that wait, and the next query or write sees the servers as the disk is.

A complete preview (every file checked, no header's includers rebuilt) is kept instead of put back at once
(`Kept`): the next use of the servers decides. A write of exactly the previewed files (`resolve` accepting
the staged change, the file tool's write after its dry run) claims it (`claim`); once the write is on disk, a
document whose disk now holds the previewed text is committed (nothing is sent: the server already has it),
and when all are, and nothing told the servers anything since, the write's answer is the preview's: the
same baseline, the same round, so it says exactly what the preview showed, without the two rounds of
putting back and writing. A write of other content, any other file changed meanwhile, or a server that
restarted falls back to the write's own round against the preview's baseline. Any other use first puts the
overlays back (`discard_kept`, called by the gate) and waits for that round, as above.

A file whose round did not come in time is answered as not checked, with why ("basedpyright still
analysing the project"); a deleted file is not previewed; a file no server of the run serves is not
covered (the core says so).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether.diagnostics import Diagnostic, PreviewDiagnostics, WriteDiagnostics
from tether.options import CoreOptions
from tether.tools import ToolError

from tether_lsp.connection import Connection, Overlay
from tether_lsp.options import LspOptions
from tether_lsp.rounds import budget, wait_round
from tether_lsp.write_diagnostics import After, Baseline, before_write, told_from_disk, with_change

if TYPE_CHECKING:
    from tether.run import Run

    from tether_lsp.supervisor import Supervisor

DELETED = "a deletion is not previewed; the write reports what it breaks"
OFF = "previews are off in this run: run option lsp_previews"


def why_late(conn: Connection, timeout: float) -> str:
    """Why a file of a server got no complete round: said so the model knows whether to ask again."""
    if conn.indexing:
        return f"{conn.server.id} still analysing the project"
    return f"no complete round of {conn.server.id} within diagnostics_timeout ({timeout:g} s)"


async def preview(
    run: Run, sup: Supervisor, contents: Mapping[str, str | None], call_id: str
) -> PreviewDiagnostics | None:
    served = []
    for rel in sorted(contents):
        try:
            await sup.serving((run.root / rel).resolve())
        except ToolError:
            continue  # no server for it: not covered, the core says so
        served.append(rel)
    if not served:
        return None
    if not run.options.of(LspOptions).lsp_previews:
        return PreviewDiagnostics(covered=served, unchecked=dict.fromkeys(served, OFF))
    unchecked = {rel: DELETED for rel in served if contents[rel] is None}
    paths = [rel for rel in served if contents[rel] is not None]
    if not paths:
        return PreviewDiagnostics(covered=served, unchecked=unchecked)
    texts = {(run.root / rel).resolve(): contents[rel] for rel in paths}
    held: list[tuple[Connection, Overlay]] = []

    def overlay(conn: Connection, path: Path) -> None:
        text = texts[path]
        assert text is not None
        held.append((conn, conn.overlay(path, text)))

    await sup.gate.hold()
    dependents: list[tuple[str, Path, Connection]] = []
    kept: Kept | None = None
    try:
        before = await before_write(run, sup, paths, call_id)
        if (baseline := sup.baselines.get(call_id)) is not None:
            dependents = list(baseline.dependents)  # with_change reopens them on the overlaid header
        after = await with_change(run, sup, paths, call_id, overlay, "the change", say_unchecked=False)
        if baseline is not None and held and not dependents and not after.pending and not after.uncompared:
            kept = Kept(
                frozenset(paths), held, baseline, before, after, {id(c): c.last_mark for c, _ in held}
            )
    finally:
        # kept only when nobody waits meanwhile: a waiter asked before the preview ended is not woken by it
        if kept is not None and all(c.alive for c, _ in held) and not sup.gate.contended:
            sup.kept = kept  # the gate stays held: the next use of the servers decides (module docstring)
        else:
            put_back(sup, held, dependents)
    timeout = sup.run.options.of(CoreOptions).diagnostics_timeout
    for rel, _, conn in dependents:
        arg = conn.server.unsaved_headers_arg
        if arg is not None and arg not in conn.optional_args:
            unchecked.setdefault(
                rel,
                f"{conn.server.id} parses it with the included header as on disk: this {conn.server.id} does not "
                f"know {arg}, so the change is not checked there (the write will be)",
            )
    for rel, conn in after.pending:
        unchecked.setdefault(rel, why_late(conn, timeout))
    for rel, conn in after.uncompared:
        unchecked.setdefault(rel, f"{conn.server.id} had not checked it before the change")
    found = {rel: diags for rel, diags in after.diagnostics.files.items() if rel not in unchecked}
    return PreviewDiagnostics(
        before=before, after=found, covered=served, unchecked=unchecked, notes=after.diagnostics.notes
    )


def put_back(
    sup: Supervisor,
    held: Sequence[tuple[Connection, Overlay]],
    dependents: Iterable[tuple[str, Path, Connection]] = (),
) -> None:
    """Put every overlay back to the disk's content, reopen the includers the preview rebuilt on an overlaid
    header (clangd rebuilds an open file only when it is opened anew), and hold the servers (the gate the
    preview holds) until their round after that is complete: released in the background, at the latest
    after diagnostics_timeout."""
    conns = list({id(c): c for c, _ in held}.values())
    for _, restore in held:
        restore()
    for _, path, conn in dependents:
        if conn.alive and not conn.open_files and (doc := conn.docs.get(path.as_uri())) is not None:
            conn.reopen(doc)
    marks = [(c, c.last_mark) for c in conns if c.alive and c.last_mark is not None]
    sup.putting_back = asyncio.create_task(_settle(sup, marks, time.monotonic()))


async def _settle(sup: Supervisor, marks: list[tuple[Connection, Any]], began: float) -> float:
    """The servers' round after the putting back, waited for (bounded); the gate released after it. The seconds
    it took."""
    cap = sup.run.options.of(CoreOptions).diagnostics_timeout
    try:
        # a server that died meanwhile is restarted from the disk
        await asyncio.gather(
            *(wait_round(c, m, cap, budget(c, cap)) for c, m in marks), return_exceptions=True
        )
        return time.monotonic() - began
    finally:
        await sup.gate.release()


@attrs.define
class Kept:
    """A complete preview whose overlays are still in place, for the write that may make them true."""

    paths: frozenset[str]
    held: list[tuple[Connection, Overlay]]
    baseline: Baseline  # the preview's "before": the disk's state, which nothing changed since
    before: dict[str, list[Diagnostic]]
    after: After
    marks: dict[int, Any]  # each server's last change, the preview's own: anything told it since is news
    claimed: str | None = None  # the write's call id that claimed it


def discard_kept(sup: Supervisor) -> None:
    """Put a kept preview's overlays back, as a preview that was not kept does: called before any other use of
    the servers (the gate stays held until their round after that). A write that claimed it and had not
    finished (its approval still asked, or it failed and never comes back) then takes the write's own round
    against the preview's baseline, which its claim left for it."""
    kept = sup.kept
    if kept is None:
        return
    sup.kept = None
    put_back(sup, kept.held)


async def claim(sup: Supervisor, paths: Sequence[str], call_id: str) -> dict[str, list[Diagnostic]] | None:
    """A write of exactly the kept preview's files: its baseline is the preview's, and the gate the preview
    holds stays held through the write. None (the preview put back) when the servers heard anything since."""
    kept = sup.kept
    if kept is None or kept.claimed is not None or frozenset(paths) != kept.paths:
        return None
    for conn in {id(c): c for c, _ in kept.held}.values():
        if conn.alive:
            await conn.watcher.refresh()  # a shell's change since the preview is news
    if sup.kept is not kept or not _unchanged(kept):
        discard_kept(sup)
        return None
    kept.claimed = call_id
    sup.baselines[call_id] = kept.baseline
    return kept.before


async def claimed_write(run: Run, sup: Supervisor, paths: list[str], call_id: str) -> WriteDiagnostics:
    """The diagnostics of the write that claimed the kept preview: the preview's, when the disk now holds every
    previewed text and the servers heard nothing since; else the write's own round against the preview's
    baseline. The gate is released after either."""
    kept = sup.kept
    assert kept is not None and kept.claimed == call_id  # the hook asks only then
    sup.kept = None
    try:
        if _unchanged(kept) and all([ov.commit() for _, ov in kept.held]):
            sup.baselines.pop(call_id, None)
            return kept.after.diagnostics
        waiting = {(id(c), ov.doc.path): ov for c, ov in kept.held if ov.doc.uri in c.overlays}

        def tell(conn: Connection, path: Path) -> None:
            if (ov := waiting.pop((id(conn), path), None)) is not None:
                ov()  # to the disk's content: the write's change
            else:
                told_from_disk(conn, path)

        after = await with_change(run, sup, paths, call_id, tell)
        for ov in waiting.values():  # a previewed file the write did not reach (cannot be: the same paths)
            ov()
        return after.diagnostics
    finally:
        await sup.gate.release()


def _unchanged(kept: Kept) -> bool:
    return all(c.alive and c.last_mark is kept.marks[id(c)] for c, _ in kept.held)
