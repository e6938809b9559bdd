"""Diagnostics on write: the core's before/after-write hooks answered from the files' language servers.

What a write introduced is the difference between two COMPLETE rounds of the server: one before the
write (the baseline) and one after it. A round is complete when `Connection.round_done` says so
(basedpyright: its work-done progress ended after our change; other servers: a settle rule), never
on the first publish: basedpyright publishes empty placeholders at start and the previous version's
list relabelled with the new version right after a change.

Every file of a multi-file write is waited for at the same time, each with the whole bound (the run
option diagnostics_timeout). A file whose baseline could not be had is not compared (nothing is
claimed about it) and the answer says so; other files' changes are collected until the server's
round after the write is complete, or the answer says the round was cut, naming the server.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
from tether.diagnostics import Diagnostic, WriteDiagnostics
from tether.tools import ToolError

from tether_lsp import render
from tether_lsp.connection import Connection, Mark, RequestTimeout, ServerDied, ServerError
from tether_lsp.dependents import IMPORTERS_CAP, importers, open_dependents

NAMED = 5  # files named in a note before "and N more"


@attrs.define
class Baseline:
    files: dict[str, list[Diagnostic]]  # the written files and every file of a settled server
    settled: set[int]  # id() of the connections whose round was complete: an unpublished file is clean there
    unknown: list[str]  # written files (and opened dependents) without a baseline
    # files opened because they include a written header (clangd checks open files only), and why
    # some were not
    dependents: list[tuple[str, Path, Connection]] = attrs.field(factory=list)
    notes: list[str] = attrs.field(factory=list)


def _convert(conn: Connection, path: Path, items: list[Any]) -> list[Diagnostic]:
    doc = conn.docs.get(path.as_uri())
    lines = render.Lines({path: doc.text} if doc else None)
    return render.diagnostics(items, path, conn.run, conn.encoding, lines)


def _published(sup: Any, conn: Connection, since: Mark | None = None) -> dict[str, list[Diagnostic]]:
    """The connection's last published diagnostics per file under the root (only those published after ``since``)."""
    out: dict[str, list[Diagnostic]] = {}
    for uri, pub in list(conn.published.items()):
        if since is not None and pub.seq <= since.seq:
            continue
        path = render.uri_to_path(uri)
        if path is not None and path.is_relative_to(sup.run.root):
            out[sup.run.relpath(path)] = _convert(conn, path, pub.items)
    return out


def _errors(diags: list[Diagnostic]) -> int:
    return sum(d.severity == "error" for d in diags)


def _names(rels: list[str]) -> str:
    more = f" and {len(rels) - NAMED} more" if len(rels) > NAMED else ""
    return ", ".join(rels[:NAMED]) + more


async def _connection_for(sup: Any, path: Path) -> Connection | None:
    try:
        avail = await sup.choose(path)
        return await sup.connection(avail, retry_failed=False)
    except ToolError:
        return None  # no server for this file: nothing to say about it


async def _current(sup: Any, conn: Connection, path: Path, deadline: float) -> list[Any] | None:
    """The file's diagnostics from a complete round after its current content; None when not in time."""
    if not path.is_file():
        return []
    doc = conn.open(path)
    if doc is None:
        return None
    try:
        return await conn.diagnostics(
            doc, max(0.0, deadline - time.monotonic()), sup.option("lsp_request_timeout")
        )
    except (ServerDied, RequestTimeout, ServerError):
        return None


async def _files_and_servers(sup: Any, paths: list[str]) -> list[tuple[str, Path, Connection]]:
    out = []
    for rel in paths:
        path = (sup.run.root / rel).resolve()
        conn = await _connection_for(sup, path)
        if conn is not None:
            out.append((rel, path, conn))
    return out


async def _pull_others(
    sup: Any, conn: Connection, mine: list[Path], written: set[Path], deadline: float
) -> bool:
    """A server whose diagnostics are asked for is asked for its other open documents too, and for the files
    importing ``mine``, its written files (before and after the write alike, so both sides are of the same
    moment; a file the write deleted is asked about too). False when not all of them answered."""
    if not conn.pulls:
        return True
    await asyncio.gather(
        *(
            _current(sup, conn, doc.path, deadline)
            for doc in list(conn.docs.values())
            if doc.path not in written
        )
    )
    try:
        found, complete = await importers(conn, mine, max(0.0, deadline - time.monotonic()))
        results = await asyncio.gather(
            *(
                conn.pull_path(dep, max(0.0, deadline - time.monotonic()))
                for dep in found
                if dep not in written and dep.as_uri() not in conn.docs
            )
        )
    except ServerDied:
        return False
    return complete and all(r is not None for r in results)


def _unique(conns: list[Connection]) -> list[Connection]:
    return list({id(c): c for c in conns}.values())


async def before_write(run: Any, sup: Any, paths: list[str], call_id: str) -> dict[str, list[Diagnostic]]:
    deadline = time.monotonic() + sup.option("diagnostics_timeout")
    targets = await _files_and_servers(sup, paths)
    for _, _, conn in targets:
        await conn.refresh()
    dependents, dep_notes = await open_dependents(sup, targets)
    results = await asyncio.gather(
        *(_current(sup, conn, path, deadline) for _, path, conn in [*targets, *dependents])
    )
    files: dict[str, list[Diagnostic]] = {}
    settled: set[int] = set()
    for conn in _unique([c for _, _, c in targets]):
        mine = [path for _, path, c in targets if c is conn]
        # the "after" says when not every importer answered
        await _pull_others(sup, conn, mine, {path for _, path, _ in targets}, deadline)
        # every other file's last publish is a baseline only once a round after our last change is complete
        try:
            done = await conn.wait_round(conn.last_mark or conn.mark(), max(0.0, deadline - time.monotonic()))
        except ServerDied:
            continue
        if done:
            settled.add(id(conn))
            files.update(_published(sup, conn))
    unknown = []
    for (rel, path, conn), items in zip([*targets, *dependents], results, strict=True):
        if items is None:
            unknown.append(rel)
            files.pop(rel, None)
        else:
            files[rel] = _convert(conn, path, items)
    # per write: overlapping writes must not share a "before"
    sup.baselines[call_id] = Baseline(files, settled, unknown, dependents, dep_notes)
    while len(sup.baselines) > 16:  # a write that failed never asks for its "after": drop the oldest
        sup.baselines.pop(next(iter(sup.baselines)))
    return files


async def after_write(run: Any, sup: Any, paths: list[str], call_id: str) -> WriteDiagnostics:
    cap = sup.option("diagnostics_timeout")
    deadline = time.monotonic() + cap
    before: Baseline = sup.baselines.pop(call_id, None) or Baseline({}, set(), list(paths))
    targets = await _files_and_servers(sup, paths)
    conns = _unique([c for _, _, c in targets])
    start = {id(c): c.mark() for c in conns}
    for _, path, conn in targets:
        conn.files_changed(
            [path]
        )  # the write: didChange with the whole new content + didSave, or a file event
    for conn in conns:
        await conn.refresh()
    # the includers of a written header: opened anew, so the server rebuilds them with the new header
    dependents = [(rel, path, conn) for rel, path, conn in before.dependents if id(conn) in start]
    for _, path, conn in dependents:
        if (doc := conn.docs.get(path.as_uri())) is not None:
            conn.reopen(doc)
    checked = [*targets, *dependents]
    results = await asyncio.gather(*(_current(sup, conn, path, deadline) for _, path, conn in checked))
    files: dict[str, list[Diagnostic]] = {}
    pending, uncompared = [], []
    for (rel, path, conn), items in zip(checked, results, strict=True):
        if items is None:
            pending.append(rel)
        elif rel in before.unknown:
            uncompared.append(rel)
        elif rel in paths:
            files[rel] = _convert(conn, path, items)
        # a dependent's new publish is compared with the other files' below
    # other files: what the server published since the write, once its round after the write is complete
    cut, cleared, unasked = [], [], []
    written = {path for _, path, _ in targets}
    for conn in conns:
        mine = [path for _, path, c in targets if c is conn]
        if not await _pull_others(sup, conn, mine, written, deadline):
            unasked.append(conn.server.id)
        try:
            done = await conn.wait_round(
                conn.last_mark or start[id(conn)], max(0.0, deadline - time.monotonic())
            )
        except ServerDied:
            done = False
        if not done or id(conn) not in before.settled:
            cut.append(conn.server.id)
        for rel, diags in _published(sup, conn, since=start[id(conn)]).items():
            if rel in files or rel in paths or rel in before.unknown or rel in pending:
                continue
            if rel in before.files:
                old = before.files[rel]
            elif id(conn) in before.settled:
                old = []  # a settled server that never published a file found nothing in it
            else:
                continue  # no complete "before": nothing is claimed about this file
            if Counter(d.key for d in diags) != Counter(d.key for d in old):
                files[rel] = diags
                if _errors(old) and not _errors(diags):
                    cleared.append(rel)
    notes = list(before.notes)
    if pending:
        notes.append(
            f"diagnostics incomplete: still pending for {_names(pending)} after {cap:g} s; run lsp diagnostics on them later"
        )
    if uncompared:
        notes.append(
            f"diagnostics not compared for {_names(uncompared)}: the server had not checked them before the write; "
            "run lsp diagnostics on them to see their errors"
        )
    if cleared:
        notes.append(f"no errors any more in {len(cleared)} other file(s): {_names(sorted(cleared))}")
    if cut:
        notes.append(
            f"diagnostics of other files may be incomplete: {', '.join(cut)} had not finished checking the project "
            f'before or after the write within {cap:g} s; lsp diagnostics "*" checks the whole project'
        )
    if unasked:
        notes.append(
            f"diagnostics of other files may be incomplete: {', '.join(unasked)} checks only open files, and not "
            f"every file importing {_names([rel for rel, _, c in targets if c.server.id in unasked])} could be "
            f'checked (at most {IMPORTERS_CAP}, within {cap:g} s); lsp diagnostics "*" checks the whole project'
        )
    return WriteDiagnostics(files=files, notes=notes)
