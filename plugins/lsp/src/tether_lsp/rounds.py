"""Rounds of analysis: when a server's round after a change is complete (`round_done`), waited for with a
bound (`wait_round`, `document_diagnostics`), and how long a server that shows no sign of work is waited
for (`budget`, from its measured rounds).

What a write introduced is the difference between two COMPLETE rounds (`tether_lsp.write_diagnostics`), a
query answers after a server's first round (`Connection.first_round`), and a server is ready when it is not
in one (`tether_lsp.readiness`): all read rounds by the rules here.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether_lsp.connection import Connection, Doc, Mark, Published

# A server whose CPU use counts as work (ServerDef.cpu_is_work) is sampled at most every BUSY_SAMPLE s while
# a wait goes on; a share of one core of at least BUSY_SHARE between two samples is work. Measured on
# click: basedpyright's processes use 0.000 of a core once a round is over, and on a loaded machine a
# starved one can compute for seconds between its publishes and its round's progress begin.
BUSY_SAMPLE = 0.25
BUSY_SHARE = 0.02
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
