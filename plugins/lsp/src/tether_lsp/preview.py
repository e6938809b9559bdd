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

A file whose round did not come in time is answered as not checked, with why ("basedpyright still
analysing the project"); a deleted file is not previewed; a file no server of the run serves is not
covered (the core says so).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.diagnostics import PreviewDiagnostics
from tether.options import CoreOptions
from tether.tools import ToolError

from tether_lsp.connection import Connection
from tether_lsp.options import LspOptions
from tether_lsp.rounds import budget, wait_round
from tether_lsp.write_diagnostics import before_write, with_change

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
    held: list[tuple[Connection, Callable[[], None]]] = []

    def overlay(conn: Connection, path: Path) -> None:
        text = texts[path]
        assert text is not None
        held.append((conn, conn.overlay(path, text)))

    await sup.gate.hold()
    dependents: list[tuple[str, Path, Connection]] = []
    try:
        before = await before_write(run, sup, paths, call_id)
        if (baseline := sup.baselines.get(call_id)) is not None:
            dependents = list(baseline.dependents)  # with_change reopens them on the overlaid header
        after = await with_change(run, sup, paths, call_id, overlay, "the change", say_unchecked=False)
    finally:
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
    held: list[tuple[Connection, Callable[[], None]]],
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
