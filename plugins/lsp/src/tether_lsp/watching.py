"""File watching for one running language server: what changed on disk under its root is told to it.

The server is told about files changed behind its back (by a shell, another program) with
workspace/didChangeWatchedFiles, and about open documents that changed with didChange. What it hears
about is the project's files as `tether.walk` lists them (git ls-files, or the same ignore rules
outside git): a change to a .gitignore'd file is not sent. The tree is scanned (mtime and size)
before every query while that is cheap, in a thread so the event loop goes on; in a tree where it is
not, a background task polls instead.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.walk import IGNORE_FILES, SKIP_DIRS, walk

if TYPE_CHECKING:
    from tether_lsp.connection import Connection

SCAN_CAP = 20_000  # source files; a bigger project is only partly watched (said in status)
# files the traversal looks at (ignored ones included: build output, vendored trees), then it stops
TRAVERSE_CAP = 5 * SCAN_CAP
SYNC_SCAN_BUDGET = 0.015  # s: a scan slower than this moves to a background poller
POLL_INTERVAL = 1.0  # s between background scans of a large tree
Rules = frozenset[tuple[str, int, int]]  # the ignore files under the root: path, mtime, size


def file_stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


class Watcher:
    """The files of a connection's server under its root, as last told to the server."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.files: dict[Path, tuple[int, int]] = {}  # mtime and size, by path
        self.truncated = False  # the last scan stopped at SCAN_CAP files (or TRAVERSE_CAP)
        self.poller: asyncio.Task[Any] | None = None
        # the traversal's files and ignore files when the project was last walked, the walk's files
        # then (at most SCAN_CAP), and whether it listed more
        self._walked: tuple[tuple[frozenset[Path], Rules] | None, frozenset[Path], bool] = (
            None,
            frozenset(),
            False,
        )

    async def refresh(self) -> None:
        """Tell the server about every file changed on disk behind its back (mtime/size).

        Open documents are always checked. The other files are scanned here (in a thread: the loop
        goes on serving other calls) while a scan is cheap;
        in a tree where it is not (> SYNC_SCAN_BUDGET), a background task polls instead, so a query
        does not pay for the whole tree (a shell's edit is then seen within about POLL_INTERVAL).
        """
        for doc in list(self.conn.docs.values()):
            self.conn.sync_doc(doc)
        if self.poller is not None:
            return
        current, spent = await asyncio.to_thread(self._timed_scan)
        self._apply_scan(current)
        # (another refresh may have started the poller while this one scanned)
        if spent > SYNC_SCAN_BUDGET and self.poller is None and not self.conn.closing:
            self.poller = asyncio.create_task(self._poll())
            self.conn.tasks.append(self.poller)

    def _apply_scan(self, current: dict[Path, tuple[int, int]]) -> None:
        lsp = self.conn.lsp
        events = []
        for path, stat in current.items():
            old = self.files.get(path)
            if old is None:
                events.append(lsp.FileEvent(uri=path.as_uri(), type=lsp.FileChangeType.Created))
            elif old != stat:
                events.append(lsp.FileEvent(uri=path.as_uri(), type=lsp.FileChangeType.Changed))
        for path in self.files.keys() - current.keys():
            events.append(lsp.FileEvent(uri=path.as_uri(), type=lsp.FileChangeType.Deleted))
        self.files = current
        if events:
            self.conn.last_mark = self.conn.mark()
            self.conn.edits.update(e.uri for e in events)
            self.conn.notify(
                "workspace/didChangeWatchedFiles", lsp.DidChangeWatchedFilesParams(changes=events)
            )

    async def _poll(self) -> None:
        while self.conn.alive:
            await asyncio.sleep(POLL_INTERVAL)
            current = await asyncio.to_thread(self.scan)
            # files this process changed meanwhile were told about already (files_changed)
            self._apply_scan(current)

    def files_changed(self, paths: list[Path]) -> None:
        """Tell the server about files we just wrote (or deleted), without waiting for a scan."""
        lsp = self.conn.lsp
        events = []
        for path in paths:
            doc = self.conn.docs.get(path.as_uri())
            if doc is not None:
                self.conn.sync_doc(doc)
                continue
            if not path.name.endswith(self.conn.server.extensions):
                continue
            stat = file_stat(path)
            old = self.files.get(path)
            if stat is None and old is not None:
                del self.files[path]
                events.append(lsp.FileEvent(uri=path.as_uri(), type=lsp.FileChangeType.Deleted))
            elif stat is not None and stat != old:
                self.files[path] = stat
                kind = lsp.FileChangeType.Created if old is None else lsp.FileChangeType.Changed
                events.append(lsp.FileEvent(uri=path.as_uri(), type=kind))
        if events:
            self.conn.last_mark = self.conn.mark()
            self.conn.edits.update(e.uri for e in events)
            self.conn.notify(
                "workspace/didChangeWatchedFiles", lsp.DidChangeWatchedFilesParams(changes=events)
            )

    def _timed_scan(self) -> tuple[dict[Path, tuple[int, int]], float]:
        """The scan and the seconds its traversal took (its own, not the wait for a thread of a busy loop;
        nor the walk it may need, paid once per file added or removed or ignore file changed, not per query)."""
        start = time.perf_counter()
        seen, rules = self._traverse()
        spent = time.perf_counter() - start
        return self._of_project(seen, rules), spent

    def scan(self) -> dict[Path, tuple[int, int]]:
        """mtime and size of the server's source files under its root that are the project's files as
        `tether.walk` lists them (git's answer: a folder or file that .gitignore excludes, such as build
        output, is not the project's sources, nor are hidden files, node_modules or virtual environments):
        at most SCAN_CAP of them; ``truncated`` says whether this scan stopped there."""
        return self._of_project(*self._traverse())

    def _of_project(self, seen: dict[Path, tuple[int, int]], rules: Rules) -> dict[Path, tuple[int, int]]:
        """The project's files among ``seen``. The walk runs git (a process of its own, too slow before
        every query), so it is asked again only when the files the traversal sees, or the ignore files
        (``rules``), changed."""
        walked, listed, cut = self._walked
        if (seen.keys(), rules) != walked:
            exts = self.conn.server.extensions
            found = walk(self.conn.run.root, self.conn.root, wanted=lambda name: name.endswith(exts)).files
            listed = frozenset(Path(f.path) for f in found[:SCAN_CAP])
            cut = len(found) > SCAN_CAP
            self._walked = ((frozenset(seen), rules), listed, cut)  # one assignment: scans run in threads
        self.truncated = cut or len(seen) >= TRAVERSE_CAP
        return {path: stat for path, stat in seen.items() if path in listed}

    def _traverse(self) -> tuple[dict[Path, tuple[int, int]], Rules]:
        """mtime and size of every file with one of the server's extensions under its root, except in
        what the walk always leaves out (hidden, node_modules, __pycache__, virtual environments), at
        most TRAVERSE_CAP of them; and the path, mtime and size of the ignore files on the way."""
        out: dict[Path, tuple[int, int]] = {}
        rules: list[tuple[str, int, int]] = []
        exts = self.conn.server.extensions
        stack = [str(self.conn.root)]
        while stack:
            top = stack.pop()
            try:
                entries = os.scandir(top)
            except OSError:
                continue
            with entries:
                for entry in entries:
                    name = entry.name
                    try:
                        if name in IGNORE_FILES:
                            st = entry.stat()
                            rules.append((entry.path, st.st_mtime_ns, st.st_size))
                        if name.startswith("."):
                            continue
                        if entry.is_dir(follow_symlinks=False):
                            if name not in SKIP_DIRS and not os.path.exists(f"{entry.path}/pyvenv.cfg"):
                                stack.append(entry.path)
                        elif name.endswith(exts):
                            st = entry.stat()
                            out[Path(entry.path)] = (st.st_mtime_ns, st.st_size)
                            if len(out) >= TRAVERSE_CAP:
                                return out, frozenset(rules)
                    except OSError:
                        continue
        return out, frozenset(rules)
