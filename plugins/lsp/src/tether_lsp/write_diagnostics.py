"""Diagnostics on write: the core's before/after-write hooks answered from the files' language servers.

What a write introduced is the difference between two COMPLETE rounds of the server: one before the
write (the baseline) and one after it. A round is complete when `round_done` says so
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
from typing import Any

import attrs
from tether.diagnostics import Diagnostic, WriteDiagnostics
from tether.options import CoreOptions
from tether.tools import ToolError

from tether_lsp import render
from tether_lsp.connection import (
    BUSY_SAMPLE,
    Connection,
    Doc,
    Mark,
    Published,
    RequestTimeout,
    ServerDied,
    ServerError,
)
from tether_lsp.dependents import Importers, importers, importers_checked, importers_note, open_dependents
from tether_lsp.options import LspOptions

PROGRESS_FALLBACK = 2.0  # s of quiet after which a change that started no progress round counts as checked
# the same, once the server has shown rounds for this project: a real change starts one there, and on a
# loaded machine it may begin seconds after the change (2 s cut click's round short: "clean", wrongly)
PROGRESS_FALLBACK_SEEN = 8.0
# the same once the changed document's own publish came and no progress was announced after the change
# (basedpyright: the whole program is analysed, see round_done); margin for the rest of that publish batch
PROGRESS_PUBLISHED_QUIET = 0.5
PROGRESS_COLD_QUIET = 5.0  # the same before a first round, after placeholders (basedpyright: 0.7 s idle)
# "document" servers' first diagnosis after loading comes in passes per package variant (gopls on pflag
# without its verbose progress: flag_test.go 0.01-0.7 s after flag.go, on a loaded machine), and a change
# made between them is answered out of order: until a first round is complete, this much quiet after the
# document's publish
DOCUMENT_COLD_QUIET = 2.0
# A write's diagnostics wait for a server that shows no sign of work (no publish, no progress event, no
# round in progress) ROUND_FACTOR x the slowest of the last rounds it keeps (`connection.ROUNDS_KEPT`), at least ROUND_FLOOR s;
# a working server up to the run option diagnostics_timeout (also the bound while nothing is measured)
ROUND_FACTOR = 3.0
ROUND_FLOOR = 15.0


def round_done(conn: Connection, mark: Mark) -> bool:
    """Whether the server finished a round of analysis that started after ``mark``.

    "progress" servers (basedpyright; gopls started with its verboseWorkDoneProgress option) wrap every
    round in work-done progress: a begin after the mark and nothing in progress now. basedpyright's first publish after a change can be the previous
    version's list relabelled, and their cold start publishes empty placeholders before the
    first round: neither counts. A change that starts no round at all (the same text again) is
    taken as done after PROGRESS_FALLBACK s of quiet; a small project is checked without any progress
    at all, but while the server has published placeholders of other files (unversioned) and not yet
    begun a round, only PROGRESS_COLD_QUIET s of quiet end the wait. "settle" servers: no publish for the
    definition's settle_quiet seconds after the mark. Quiet is the time since the
    server's last sign of work: a publish, a progress event and, for a server whose CPU use counts
    (ServerDef.cpu_is_work: basedpyright), that use (`Connection.busy`).

    "document" servers (as gopls without that option) wrap no diagnosis in progress, but end each round with the opened or
    changed document's own publish at its version, even when its list is unchanged: measured on
    pflag, a change of flag.go publishes its 35 broken dependents 0.1-0.4 s after the change, then
    flag.go itself 0.25-0.3 s later (its final pass). A mark of a document is done once that publish
    came and settle_quiet s passed (DOCUMENT_COLD_QUIET s until a first round was complete); a mark of
    no document (files changed on disk) settles as above.

    "tsserver" servers (typescript-language-server) have no round a client can see. Measured on rxjs
    7.8.2: publishes carry no version; each is sent 50 ms after one kind of tsserver's diagnostics
    (syntax, then semantic, then suggestion) changed for a file and holds the other kinds' last lists,
    so the first publish after a change can pair the new syntax errors with the old semantic ones (an
    empty syntax list first, the errors 0.1 s later); a kind that stays empty is never published again,
    so a clean file after a clean change gets no publish at all; and the end of tsserver's check
    (`requestCompleted` of its `geterr`) is not forwarded. A `geterr` of our own through the server's
    `typescript.tsserverRequest` does not mark it either: the server's own `geterr`, sent 0.3-0.8 s after
    a change, ends ours early with its `requestCompleted` (tsserver runs one check at a time). So the
    pushes are not used: each file's diagnostics are asked of tsserver for its current text
    (`syntacticDiagnosticsSync` and `semanticDiagnosticsSync`, answered after every change sent before,
    see `Connection.pull`), and only its project load (work-done progress) is waited for.
    """
    if conn.progress_tokens or not conn.quiescent:
        return False
    if conn.server.rounds == "tsserver":
        return True  # nothing to wait for: every answer is asked of tsserver (see above)
    quiet = time.monotonic() - max(mark.at, conn.busy())  # its CPU use too (ServerDef.cpu_is_work)
    if conn.rounds == "progress":
        if conn.begins > mark.begins:
            return True
        if conn.begins == 0:
            if not conn.published:
                return False  # nothing checked yet
            if any(p.version is None for p in conn.published.values()):
                return (
                    quiet >= PROGRESS_COLD_QUIET
                )  # placeholders of files not checked yet: the first round is to come
        return quiet >= _fallback(conn, mark)
    if conn.rounds == "document":
        if mark.uri is not None:
            pub = conn.published.get(mark.uri)
            if pub is None or pub.seq <= mark.seq or (pub.version or mark.version) < mark.version:
                return False  # the document's own publish ends the round
        if not conn.diagnosed:
            conn.diagnosed = quiet >= max(DOCUMENT_COLD_QUIET, conn.server.settle_quiet)
            return conn.diagnosed
    return quiet >= conn.server.settle_quiet


def _fallback(conn: Connection, mark: Mark) -> float:
    if _published_unannounced(conn, mark):
        return PROGRESS_PUBLISHED_QUIET
    return PROGRESS_FALLBACK_SEEN if conn.begins else PROGRESS_FALLBACK


def _published_unannounced(conn: Connection, mark: Mark) -> bool:
    """Whether the document changed at ``mark`` was published at its version since, and the server
    announced no progress since the change (no window/workDoneProgress/create).

    basedpyright (pyright's languageServerBase.onAnalysisCompletedHandler) publishes after each slice of
    analysis the files whose diagnostics changed, and in the same handler, before those publishes go
    out, starts progress whenever files of the program are left to analyse: a publish with no
    announcement before it is of a program analysed through, dependents included (a small project: one
    slice, no progress at all; measured 0.28 s after a change, where the plain fallback waited 8 s).
    """
    if not conn.server.progress_before_publish or mark.uri is None or conn.last_create >= mark.at:
        return False
    if conn.open_files:
        # with importers open, the changed document's first publish at its version can be the old list
        # relabelled, and the check of the open files comes seconds later on a loaded machine (Django: its
        # importers' broken calls were missed, unsaid): only the round's progress or the quiet ends it
        return False
    pub = conn.published.get(mark.uri)
    return pub is not None and pub.seq > mark.seq and (pub.version or 0) >= mark.version


def next_check(conn: Connection, mark: Mark) -> float:
    """Seconds until round_done(mark) could turn true with no new event."""
    if conn.rounds == "progress":
        wait = _fallback(conn, mark)
    elif conn.rounds == "document" and not conn.diagnosed:
        wait = max(DOCUMENT_COLD_QUIET, conn.server.settle_quiet)
    else:
        wait = conn.server.settle_quiet
    left = max(mark.at, conn.busy()) + wait - time.monotonic()
    if conn.server.cpu_is_work:
        left = min(left, BUSY_SAMPLE)  # its CPU use is sampled while the wait goes on
    return max(0.01, left)


def _left(conn: Connection, start: float, deadline: float, quiet: float | None) -> float:
    """Seconds a wait begun at ``start`` may still go on: to ``deadline``; with ``quiet``, only while the
    server shows signs of work (a round in progress, or a publish or progress event, or for a server whose
    CPU use counts, that use, within ``quiet`` s)."""
    now = time.monotonic()
    if quiet is None or conn.progress_tokens or not conn.quiescent:
        return deadline - now
    return min(deadline, max(start, conn.busy()) + quiet) - now


async def wait_round(conn: Connection, mark: Mark, timeout: float, quiet: float | None = None) -> bool:
    """Wait (at most ``timeout`` s; ``quiet``: see `_left`) for a complete round after ``mark``; False
    when it did not come."""
    start = time.monotonic()
    deadline = start + timeout
    while not round_done(conn, mark):
        remaining = _left(conn, start, deadline, quiet)
        if remaining <= 0:
            return False
        await conn.next_event(min(remaining, next_check(conn, mark)))
    _time_round(conn, mark)
    return True


def _time_round(conn: Connection, mark: Mark) -> None:
    """Remember how long the round after the change ``mark`` took: to its last event (a publish or the
    end of its progress). A change that started no round is not a measure, nor is the first round of
    a "progress" server (the project's cold analysis)."""
    if mark == conn.timed or conn.last_event <= mark.at:
        return
    if conn.rounds == "progress" and (conn.first_end is None or mark.at < conn.first_end):
        return
    conn.timed = mark
    conn.round_times.append(conn.last_event - mark.at)


def budget(conn: Connection, cap: float) -> float:
    """Seconds a write waits for this server while it shows no sign of work: ROUND_FACTOR x its slowest
    recent round, at least ROUND_FLOOR, at most ``cap``; ``cap`` while no round has been measured."""
    if not conn.round_times:
        return cap
    return round(min(cap, max(ROUND_FLOOR, ROUND_FACTOR * max(conn.round_times))), 1)


def fresh(conn: Connection, doc: Doc) -> Published | None:
    """The document's publish for its current version (None while only older ones are known)."""
    pub = conn.published.get(doc.uri)
    if pub is None:
        return None
    if pub.version is not None:
        return pub if pub.version >= doc.version else None
    if conn.versioned:
        return None  # a versioned server's unversioned publish is of the file on disk, not of this document
    return pub if pub.seq > doc.mark.seq else None


async def document_diagnostics(
    conn: Connection,
    doc: Doc,
    timeout: float,
    request_timeout: float,
    quiet: float | None = None,
    after: Mark | None = None,
) -> list[Any] | None:
    """The diagnostics of the document's CURRENT version from a complete round (one after ``after`` too,
    when that change came later: files changed on disk that the document may import); None when they
    did not come within ``timeout`` (``quiet``: see `_left`)."""
    if conn.pulls:
        # a server loading its project (tsserver, from the first document opened: 22 s for Cloudflare's
        # 1,201 files on a loaded 2-core machine) answers only once loaded: that wait is bounded by
        # ``timeout``, the write's, not by one request's
        start = time.monotonic()
        if not await conn.first_round(timeout):
            return None
        return await conn.pull(doc, request_timeout, deadline=start + timeout)
    mark = after if after is not None and after.at > doc.mark.at else doc.mark
    start = time.monotonic()
    deadline = start + timeout
    while True:
        pub = fresh(conn, doc)
        if pub is not None and round_done(conn, mark):
            _time_round(conn, mark)
            return pub.items
        remaining = _left(conn, start, deadline, quiet)
        if remaining <= 0:
            return None
        await conn.next_event(min(remaining, next_check(conn, mark)))


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


def _published(sup: Any, conn: Connection) -> dict[str, list[Diagnostic]]:
    """The connection's last published diagnostics per file under the root."""
    out: dict[str, list[Diagnostic]] = {}
    for uri, pub in list(conn.published.items()):
        path = render.uri_to_path(uri)
        if path is not None and path.is_relative_to(sup.run.root):
            out[sup.run.relpath(path)] = _convert(conn, path, pub.items)
    return out


def _published_since(sup: Any, conn: Connection, mark: Mark) -> set[str]:
    """The files the connection published after ``mark``."""
    paths = (render.uri_to_path(uri) for uri, pub in list(conn.published.items()) if pub.seq > mark.seq)
    return {sup.run.relpath(p) for p in paths if p is not None and p.is_relative_to(sup.run.root)}


def _errors(diags: list[Diagnostic]) -> int:
    return sum(d.severity == "error" for d in diags)


async def _connections_for(sup: Any, path: Path) -> list[Connection]:
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
    sup: Any, conn: Connection, path: Path, deadline: float, quiet: float, after: Mark | None = None
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


async def _files_and_servers(sup: Any, paths: list[str]) -> list[tuple[str, Path, Connection]]:
    """(file, path, server) for every written file and each of its servers."""
    out = []
    for rel in paths:
        path = (sup.run.root / rel).resolve()
        out += [(rel, path, conn) for conn in await _connections_for(sup, path)]
    return out


async def _pull_others(
    sup: Any, conn: Connection, mine: list[Path], written: set[Path], deadline: float, quiet: float
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


def _quiet(sup: Any, conns: list[Connection]) -> dict[int, float]:
    """How long each server may show no sign of work before the wait for it ends: its budget from its
    measured rounds (a working server is waited for up to diagnostics_timeout)."""
    return {id(c): budget(c, sup.run.options.of(CoreOptions).diagnostics_timeout) for c in conns}


async def before_write(run: Any, sup: Any, paths: list[str], call_id: str) -> dict[str, list[Diagnostic]]:
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


async def after_write(run: Any, sup: Any, paths: list[str], call_id: str) -> WriteDiagnostics:
    """Each file's latest set, merged over its servers: the written files, and every other file whose
    diagnostics changed at a server that has a "before" for it."""
    return (await with_change(run, sup, paths, call_id, told_from_disk)).diagnostics


async def with_change(
    run: Any,
    sup: Any,
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
