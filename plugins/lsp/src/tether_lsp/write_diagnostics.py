"""Diagnostics on write: the core's before/after-write hooks answered from the files' language servers.

What a write introduced is the difference between two COMPLETE rounds of the server: one before the
write (the baseline) and one after it. A round is complete when `tether_lsp.rounds.round_done` says so
(basedpyright: its work-done progress ended after our change; other servers: a settle rule), never
on the first publish: basedpyright publishes empty placeholders at start and the previous version's
list relabelled with the new version right after a change.

Every file of a multi-file write is waited for at the same time, each with the whole bound (the run
option diagnostics_timeout); a server that shows no sign of work (no publish, no progress) for its
budget (`budget`, from its measured rounds) is not waited for any longer. A file whose
baseline could not be had is not compared (nothing is claimed about it) and the answer says so; other files' changes are collected until the server's
round after the write is complete, or the answer says the round was cut, naming the server.

A file served by several servers (basedpyright and ruff) is compared server by server, each against
its own baseline, and answered with the servers' sets merged (each diagnostic names its source).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether.diagnostics import Diagnostic, WriteDiagnostics
from tether.options import CoreOptions
from tether.tools import ToolError

from tether_lsp import render
from tether_lsp.connection import Connection, Mark, RequestTimeout, ServerDied, ServerError
from tether_lsp.dependents import Importers, importers, importers_checked, importers_note, open_dependents
from tether_lsp.options import LspOptions
from tether_lsp.rounds import budget, document_diagnostics, wait_round

if TYPE_CHECKING:
    from tether.run import Run

    from tether_lsp.supervisor import Supervisor


@attrs.define
class Baseline:
    # per server (`_key`): the written files and, for a settled server, every file it published
    files: dict[tuple[str, Path], dict[str, list[Diagnostic]]]
    settled: set[tuple[str, Path]]  # servers whose round was complete: a file they never published is clean
    unknown: set[
        tuple[tuple[str, Path], str]
    ]  # (server, written file or opened dependent) without a baseline
    # files opened because they include a written header (clangd checks open files only), and why
    # some were not
    dependents: list[tuple[str, Path, Connection]] = attrs.field(factory=list)
    notes: list[str] = attrs.field(factory=list)


def _key(conn: Connection) -> tuple[str, Path]:
    """A server of the write (a restarted one is the same server)."""
    return (conn.server.id, conn.root)


def _convert(conn: Connection, path: Path, items: list[Any]) -> list[Diagnostic]:
    doc = conn.docs.get(path.as_uri())
    lines = render.Lines({path: doc.text} if doc else None)
    return render.diagnostics(items, path, conn.run, conn.encoding, lines, source=conn.server.id)


def _published(sup: Supervisor, conn: Connection) -> dict[str, list[Diagnostic]]:
    """The connection's last published diagnostics per file under the root."""
    out: dict[str, list[Diagnostic]] = {}
    for uri, pub in list(conn.published.items()):
        path = render.uri_to_path(uri)
        if path is not None and path.is_relative_to(sup.run.root):
            out[sup.run.relpath(path)] = _convert(conn, path, pub.items)
    return out


def _published_since(sup: Supervisor, conn: Connection, mark: Mark) -> set[str]:
    """The files the connection published after ``mark``."""
    paths = (render.uri_to_path(uri) for uri, pub in list(conn.published.items()) if pub.seq > mark.seq)
    return {sup.run.relpath(p) for p in paths if p is not None and p.is_relative_to(sup.run.root)}


def _errors(diags: list[Diagnostic]) -> int:
    return sum(d.severity == "error" for d in diags)


async def _connections_for(sup: Supervisor, path: Path) -> list[Connection]:
    """The running servers of a file, every one that serves it (a server whose start fails is left out)."""
    try:
        avails = await sup.serving(path)
    except ToolError:
        return []  # no server for this file: nothing to say about it
    out = []
    for avail in avails:
        try:
            out.append(await sup.connection(avail, retry_failed=False))
        except ToolError:
            continue
    return out


async def _current(
    sup: Supervisor, conn: Connection, path: Path, deadline: float, quiet: float, after: Mark | None = None
) -> list[Any] | None:
    """The file's diagnostics from a complete round after its current content (and after ``after``: see
    `document_diagnostics`); None when not in time."""
    if not path.is_file() and path.as_uri() not in conn.overlays:
        return []
    doc = conn.open(path)
    if doc is None:
        return None
    try:
        return await document_diagnostics(
            conn,
            doc,
            max(0.0, deadline - time.monotonic()),
            sup.run.options.of(LspOptions).lsp_request_timeout,
            quiet,
            after,
        )
    except (ServerDied, RequestTimeout, ServerError):
        return None


async def _files_and_servers(sup: Supervisor, paths: list[str]) -> list[tuple[str, Path, Connection]]:
    """(file, path, server) for every written file and each of its servers."""
    out = []
    for rel in paths:
        path = (sup.run.root / rel).resolve()
        out += [(rel, path, conn) for conn in await _connections_for(sup, path)]
    return out


async def _pull_others(
    sup: Supervisor, conn: Connection, mine: list[Path], written: set[Path], deadline: float, quiet: float
) -> tuple[Importers | None, list[Path]]:
    """A server whose diagnostics are asked for is asked for its other open documents too, and for the files
    importing ``mine``, its written files (before and after the write alike, so both sides are of the same
    moment; a file the write deleted is asked about too): the importers found (None for a server that is
    not asked), and the files asked about that did not answer in time."""
    if not conn.pulls:
        return None, []
    await asyncio.gather(
        *(
            _current(sup, conn, doc.path, deadline, quiet)
            for doc in list(conn.docs.values())
            if doc.path not in written
        )
    )
    timeout = sup.run.options.of(LspOptions).lsp_request_timeout
    try:
        found = await importers(
            conn, mine, min(timeout, max(0.0, deadline - time.monotonic())), importers_checked(sup, conn)
        )
        asked = [dep for dep in found.files if dep not in written and dep.as_uri() not in conn.docs]
        results = await asyncio.gather(*(conn.pull_path(dep, timeout, deadline) for dep in asked))
    except ServerDied:
        return Importers([], [], False, answered=False), []
    return found, [dep for dep, r in zip(asked, results, strict=True) if r is None]


def _unique(conns: list[Connection]) -> list[Connection]:
    return list({id(c): c for c in conns}.values())


def _shown(rel: str, conn: Connection, targets: list[tuple[str, Path, Connection]]) -> str:
    """A written file as named in a note: with the server when more than one serves it."""
    several = sum(r == rel for r, _, _ in targets) > 1
    return f"{rel} ({conn.server.id})" if several else rel


def _quiet(sup: Supervisor, conns: list[Connection]) -> dict[int, float]:
    """How long each server may show no sign of work before the wait for it ends: its budget from its
    measured rounds (a working server is waited for up to diagnostics_timeout)."""
    return {id(c): budget(c, sup.run.options.of(CoreOptions).diagnostics_timeout) for c in conns}


async def before_write(
    run: Run, sup: Supervisor, paths: list[str], call_id: str
) -> dict[str, list[Diagnostic]]:
    deadline = time.monotonic() + sup.run.options.of(CoreOptions).diagnostics_timeout
    targets = await _files_and_servers(sup, paths)
    quiet = _quiet(sup, [c for _, _, c in targets])
    for _, _, conn in targets:
        await conn.watcher.refresh()
    # files a shell changed (found by the refresh) may change the written files' diagnostics: their
    # baseline is taken from the server's round after those changes, or not at all
    outside = {id(c): c.watcher.outside for _, _, c in targets}
    dependents, notes = await open_dependents(sup, targets)
    checked = [*targets, *dependents]
    results = await asyncio.gather(
        *(
            _current(sup, conn, path, deadline, quiet[id(conn)], (o := outside.get(id(conn))) and o[0])
            for _, path, conn in checked
        )
    )
    for conn in _unique([c for _, _, c in checked]):
        if (o := outside.get(id(conn))) is None:
            continue
        if all(items is not None for (_, _, c), items in zip(checked, results, strict=True) if c is conn):
            conn.watcher.analysed(o)
        else:
            changed = render.names([sup.run.relpath(p) for p in o[1]])
            notes.append(
                f"the baseline may be incomplete: {conn.server.id} had not yet analysed the change to {changed} "
                "made outside tether when the write began; the files it had not checked then are not compared "
                "(lsp diagnostics shows their errors)"
            )
    files: dict[tuple[str, Path], dict[str, list[Diagnostic]]] = {}
    settled: set[tuple[str, Path]] = set()
    unasked: list[tuple[Connection, Path]] = []
    for conn in _unique([c for _, _, c in targets]):
        files[_key(conn)] = {}
        mine = [path for _, path, c in targets if c is conn]
        # an importer that did not answer has no baseline: nothing is claimed about it after the write
        _, silent = await _pull_others(
            sup, conn, mine, {path for _, path, _ in targets}, deadline, quiet[id(conn)]
        )
        unasked += [(conn, p) for p in silent]
        if silent:
            # asked again after the write, their answers have nothing to be compared with: said, not dropped
            names = render.names([rel for rel, _, c in targets if c is conn])
            notes.append(
                f"diagnostics of other files may be incomplete: {conn.server.id} did not answer for {len(silent)} "
                f"file(s) importing {names} before the change within {sup.run.options.of(LspOptions).lsp_request_timeout:g} s each, "
                f"so they were not compared: {render.names(sorted(sup.run.relpath(p) for p in silent))}; "
                "lsp diagnostics on them shows their errors"
            )
        # every other file's last publish is a baseline only once a round after our last change is complete
        try:
            done = await wait_round(
                conn, conn.last_mark or conn.mark(), max(0.0, deadline - time.monotonic()), quiet[id(conn)]
            )
        except ServerDied:
            continue
        if done:
            settled.add(_key(conn))
            files[_key(conn)].update(_published(sup, conn))
    unknown = {(_key(conn), sup.run.relpath(p)) for conn, p in unasked}
    for conn, p in unasked:
        files.get(_key(conn), {}).pop(sup.run.relpath(p), None)
    for (rel, path, conn), items in zip(checked, results, strict=True):
        if items is None:
            unknown.add((_key(conn), rel))
            files.setdefault(_key(conn), {}).pop(rel, None)
        else:
            files.setdefault(_key(conn), {})[rel] = _convert(conn, path, items)
    # per write: overlapping writes must not share a "before"
    sup.baselines[call_id] = Baseline(files, settled, unknown, dependents, notes)
    while len(sup.baselines) > 16:  # a write that failed never asks for its "after": drop the oldest
        sup.baselines.pop(next(iter(sup.baselines)))
    merged: dict[str, list[Diagnostic]] = {}
    for per_file in files.values():
        for rel, diags in per_file.items():
            merged.setdefault(rel, []).extend(diags)
    return merged


@attrs.frozen
class After:
    """What `changed` found: the answer of a write, and the (file, server) pairs it could not compare."""

    diagnostics: WriteDiagnostics
    pending: list[tuple[str, Connection]]  # no complete round with the change within the bound
    uncompared: list[tuple[str, Connection]]  # no baseline: the server had not checked them before


def told_from_disk(conn: Connection, path: Path) -> None:
    """A write's change, told: didChange with the whole new content (+ didSave where asked), or a file event."""
    conn.watcher.files_changed([path])


async def after_write(run: Run, sup: Supervisor, paths: list[str], call_id: str) -> WriteDiagnostics:
    """Each file's latest set, merged over its servers: the written files, and every other file whose
    diagnostics changed at a server that has a "before" for it."""
    return (await with_change(run, sup, paths, call_id, told_from_disk)).diagnostics


async def with_change(
    run: Run,
    sup: Supervisor,
    paths: list[str],
    call_id: str,
    tell: Callable[[Connection, Path], None],
    what: str = "the write",
    say_unchecked: bool = True,
) -> After:
    """The diagnostics with the change to ``paths`` in place, against the baseline `before_write` took for
    ``call_id``: ``tell`` gives each server the change (a write: `told_from_disk`; a preview: the unsaved
    contents, `tether_lsp.preview`), and the rounds after it are waited for by the same rules. ``what``
    names the change in the notes; ``say_unchecked``: the files not compared are said in them too (a preview
    answers them as unchecked instead)."""
    before: Baseline | None = sup.baselines.pop(call_id, None)
    targets = await _files_and_servers(sup, paths)
    if before is None:
        before = Baseline({}, set(), {(_key(c), rel) for rel, _, c in targets})
    conns = _unique([c for _, _, c in targets])
    began = time.monotonic()
    deadline = began + sup.run.options.of(CoreOptions).diagnostics_timeout
    quiet = _quiet(sup, conns)
    start = {id(c): c.mark() for c in conns}
    for _, path, conn in targets:
        tell(conn, path)
    for conn in conns:
        await conn.watcher.refresh()
    # the includers of a written header: opened anew, so the server rebuilds them with the new header
    # (an open-files server re-checks an open importer of a changed module by itself: not reopened)
    dependents = [(rel, path, conn) for rel, path, conn in before.dependents if id(conn) in start]
    for _, path, conn in dependents:
        if not conn.open_files and (doc := conn.docs.get(path.as_uri())) is not None:
            conn.reopen(doc)
    checked = [*targets, *dependents]
    results = await asyncio.gather(
        *(
            _current(sup, conn, path, deadline, quiet[id(conn)], start[id(conn)] if conn.open_files else None)
            for _, path, conn in checked
        )
    )
    files: dict[str, list[Diagnostic]] = {}
    pending: list[str] = []
    uncompared: list[str] = []
    late: list[tuple[str, Connection]] = []
    unbased: list[tuple[str, Connection]] = []
    unanswered = set(before.unknown)  # (server, file) pairs nothing is claimed about
    for (rel, path, conn), items in zip(checked, results, strict=True):
        if items is None:
            pending.append(_shown(rel, conn, checked))
            late.append((rel, conn))
            unanswered.add((_key(conn), rel))
        elif (_key(conn), rel) in before.unknown:
            uncompared.append(_shown(rel, conn, checked))
            unbased.append((rel, conn))
        elif rel in paths:
            files.setdefault(rel, []).extend(_convert(conn, path, items))
        # a dependent's new publish is compared with the other files' below
    # other files: what the servers published since the write, once their round after it is complete
    cut: list[str] = []
    unasked: list[tuple[str, str, int]] = []  # (server, written files, importers that did not answer)
    import_notes: list[str] = []
    written = {path for _, path, _ in targets}
    changed: set[str] = set()
    # merged over the servers with a "before" for the file: now, and before the write
    latest: dict[str, list[Diagnostic]] = {}
    earlier: dict[str, list[Diagnostic]] = {}
    for conn in conns:
        mine = [path for _, path, c in targets if c is conn]
        found, silent = await _pull_others(sup, conn, mine, written, deadline, quiet[id(conn)])
        unanswered.update((_key(conn), sup.run.relpath(p)) for p in silent)
        names = render.names([rel for rel, _, c in targets if c is conn])
        if found is not None and (found.more or found.cut):
            more = [sup.run.relpath(p) for p in found.more]
            count = len([p for p in found.files if p not in written])
            import_notes.append(importers_note(conn.server.id, "", names, count, more, found.cut))
        if found is not None and (silent or not found.answered):
            unasked.append((conn.server.id, names, len(silent)))
        try:
            done = await wait_round(
                conn,
                conn.last_mark or start[id(conn)],
                max(0.0, deadline - time.monotonic()),
                quiet[id(conn)],
            )
        except ServerDied:
            done = False
        key = _key(conn)
        if not done or key not in before.settled:
            cut.append(conn.server.id)
        old_files = before.files.get(key, {})
        since = _published_since(sup, conn, start[id(conn)])
        for rel, diags in _published(sup, conn).items():
            if rel in paths or (key, rel) in unanswered:
                continue
            if rel in old_files:
                old = old_files[rel]
            elif key in before.settled and not conn.open_files:
                old = []  # a settled server that never published a file found nothing in it
            else:
                continue  # no complete "before": nothing is claimed about this file
            latest.setdefault(rel, []).extend(diags)
            earlier.setdefault(rel, []).extend(old)
            if rel in since and Counter(d.key for d in diags) != Counter(d.key for d in old):
                changed.add(rel)
    files.update({rel: latest[rel] for rel in changed})
    cleared = [rel for rel in changed if _errors(earlier[rel]) and not _errors(latest[rel])]
    spent = min(deadline, time.monotonic()) - began
    waited = f"{spent:.2g}" if spent < 10 else f"{spent:.0f}"  # "0.05", "4.2", "15"
    notes = list(before.notes)
    notes += sorted({note for _, path, conn in targets if (note := conn.server.unanalysed(path, conn.root))})
    if pending and say_unchecked:
        notes.append(
            f"diagnostics incomplete: still pending for {render.names(pending)} after {waited} s; "
            "run lsp diagnostics on them later"
        )
    if uncompared and say_unchecked:
        notes.append(
            f"diagnostics not compared for {render.names(uncompared)}: the server had not checked them before {what}; "
            "run lsp diagnostics on them to see their errors"
        )
    if cleared:
        notes.append(f"no errors any more in {len(cleared)} other file(s): {render.names(sorted(cleared))}")
    if cut:
        notes.append(
            f"diagnostics of other files may be incomplete: {', '.join(cut)} had not finished checking the project "
            f'before or after {what} within {waited} s; lsp diagnostics "*" checks the whole project'
        )
    notes += import_notes
    for server, names, silent in unasked:
        asked = f"answer for {silent} file(s) importing" if silent else "say which files import"
        notes.append(
            f"diagnostics of other files may be incomplete: {server} did not {asked} {names} within "
            f'{waited} s, so they were not compared; lsp diagnostics "*" checks the whole project'
        )
    return After(WriteDiagnostics(files=files, notes=notes), late, unbased)
