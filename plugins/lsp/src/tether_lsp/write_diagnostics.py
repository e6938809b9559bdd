"""Diagnostics on write: the core's before/after-write hooks answered from the files' language servers.

Before the write, each file is synced and its diagnostics awaited: that is the baseline, so errors
that were already there are not reported as new. After the write, the new content is sent as the next
version (didChange + didSave) and the diagnostics of THAT version awaited, bounded by the run option
diagnostics_timeout. Other files whose diagnostics changed meanwhile (a changed signature breaks a
caller) are reported too, bounded. The core's registry decides what is new.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tether.diagnostics import Diagnostic, WriteDiagnostics
from tether.tools import ToolError

from tether_lsp import render
from tether_lsp.connection import RequestTimeout, ServerDied, ServerError

OTHER_FILES = 5


def _convert(conn: Any, path: Path, items: list[Any]) -> list[Diagnostic]:
    doc = conn.docs.get(path.as_uri())
    lines = render.Lines({path: doc.text} if doc else None)
    return render.diagnostics(items, path, conn.run, conn.encoding, lines)


def _known(sup: Any) -> dict[str, list[Diagnostic]]:
    """Every file's last published diagnostics, across the run's servers."""
    out: dict[str, list[Diagnostic]] = {}
    for conn in list(sup.connections.values()):
        for uri, pub in list(conn.published.items()):
            path = render.uri_to_path(uri)
            if path is not None and path.is_relative_to(sup.run.root):
                out[sup.run.relpath(path)] = _convert(conn, path, pub.items)
    return out


async def _connection_for(sup: Any, path: Path) -> Any | None:
    try:
        avail = await sup.choose(path)
        return await sup.connection(avail, retry_failed=False)
    except ToolError:
        return None  # no server for this file: nothing to say about it


async def _prime(conn: Any, path: Path, deadline: float, request_timeout: float) -> None:
    """A server started by this write: wait for its first real round of publishes.

    basedpyright first publishes an EMPTY list for every file and the real lists once it checked them;
    taken as the baseline, the placeholders would make every old error of another file look like the
    write's doing. The first versioned answer for an open file marks the real round; then wait for quiet.
    """
    probe = path if path.is_file() else next(iter(sorted(conn._watched)), None)
    if probe is not None:
        doc = conn.open(probe)
        if doc is not None:
            await conn.diagnostics(doc, max(0.0, deadline - time.monotonic()), request_timeout)
    await conn.settle(0.3, max(0.0, deadline - time.monotonic()))


async def before_write(run: Any, sup: Any, paths: list[str], call_id: str) -> dict[str, list[Diagnostic]]:
    timeout = sup.option("diagnostics_timeout")
    deadline = time.monotonic() + timeout
    out: dict[str, list[Diagnostic]] = {}
    for rel in paths:
        path = (run.root / rel).resolve()
        cold = not any(c.alive for c in sup.connections.values())
        conn = await _connection_for(sup, path)
        if conn is None:
            continue
        try:
            if cold and not conn.pulls:
                await _prime(conn, path, deadline, sup.option("lsp_request_timeout"))
            conn.refresh()
            if not path.is_file():
                out[rel] = []
                continue
            doc = conn.open(path)
            if doc is None:
                continue
            items = await conn.diagnostics(doc, max(0.0, deadline - time.monotonic()), sup.option("lsp_request_timeout"))
        except (ServerDied, RequestTimeout, ServerError):
            continue
        if items is None:  # not checked in time: the last known set is the best baseline there is
            pub = conn.published.get(doc.uri)
            items = pub.items if pub else []
        out[rel] = _convert(conn, path, items)
    baseline = {**_known(sup), **out}
    sup.baselines[call_id] = baseline  # per write: overlapping writes must not share a "before"
    while len(sup.baselines) > 16:  # a write that failed never asks for its "after": drop the oldest
        sup.baselines.pop(next(iter(sup.baselines)))
    return baseline


async def after_write(run: Any, sup: Any, paths: list[str], call_id: str) -> WriteDiagnostics:
    cap = sup.option("diagnostics_timeout")
    deadline = time.monotonic() + cap
    files: dict[str, list[Diagnostic]] = {}
    notes: list[str] = []
    used = []
    for rel in paths:
        path = (run.root / rel).resolve()
        conn = await _connection_for(sup, path)
        if conn is None:
            continue
        if conn not in used:
            used.append(conn)
        try:
            conn.files_changed([path])  # the write: didChange with the whole new content + didSave, or a file event
            conn.refresh()
            if not path.is_file():
                files[rel] = []
                continue
            doc = conn.open(path)
            if doc is None:
                continue
            items = await conn.diagnostics(doc, max(0.0, deadline - time.monotonic()), sup.option("lsp_request_timeout"))
        except (ServerDied, RequestTimeout, ServerError) as exc:
            notes.append(f"diagnostics unavailable for {rel}: {exc}")
            continue
        if items is None:
            notes.append(f"diagnostics still pending for {rel} after {cap:g} s; run lsp diagnostics on it later")
            continue
        files[rel] = _convert(conn, path, items)
    # dependents are published after the written file: collect until the server has been quiet a moment;
    # a server that only answers pulls is asked again for the other open documents
    written = {(run.root / rel).resolve() for rel in paths}
    for conn in used:
        if not conn.pulls:
            await conn.settle(sup.option("lsp_dependents_quiet"), max(0.0, min(1.0, deadline - time.monotonic())))
            continue
        for doc in list(conn.docs.values()):
            if doc.path in written or time.monotonic() >= deadline:
                continue
            try:
                await conn.diagnostics(doc, max(0.0, deadline - time.monotonic()), sup.option("lsp_request_timeout"))
            except (ServerDied, RequestTimeout, ServerError):
                break
    before = sup.baselines.pop(call_id, {})
    changed = []
    for rel, diags in _known(sup).items():
        if rel in files or rel not in before:
            continue  # a file first seen now has no "before": its diagnostics are not the write's doing
        if sorted(d.key for d in diags) != sorted(d.key for d in before.get(rel, [])):
            changed.append((rel, diags))
    changed.sort(key=lambda item: (-sum(d.severity == "error" for d in item[1]), item[0]))
    for rel, diags in changed[:OTHER_FILES]:
        files[rel] = diags
    if len(changed) > OTHER_FILES:
        notes.append(f"diagnostics also changed in {len(changed) - OTHER_FILES} more file(s): "
                     f"{', '.join(rel for rel, _ in changed[OTHER_FILES:OTHER_FILES + 10])}")
    return WriteDiagnostics(files=files, notes=notes)
