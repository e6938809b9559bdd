"""File watching for one running language server: what changed on disk under its root is told to it.

The server is told about files changed behind its back (by a shell, another program) with
workspace/didChangeWatchedFiles, and about open documents that changed with didChange. What it hears
about is every file of the server's languages under its root, .gitignore'd ones included: a server
analyses what its imports reach (pyright reads no .gitignore, so a generated *_pb2.py is in its
program) and relies on these events, so an ignored file left out would stay stale for the whole run.
The model-facing listings use tether.walk's ignore rules; this one must not. The tree is scanned
(mtime and size) before every query while that is cheap, in a thread so the event loop goes on; in a
tree where it is not, a background task polls instead. A scan lists again only the folders whose stamp
changed (an entry added, removed or renamed), and stats every file it knows.
"""

from __future__ import annotations

import asyncio
import os
import stat as stat_module
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from tether.files import MAX_FILE_BYTES
from tether.tools import ToolError
from tether.walk import SKIP_DIRS, settled

if TYPE_CHECKING:
    from tether_lsp.connection import Connection, Mark

# files of the server's languages, ignored ones included; a bigger tree is only partly watched (said in status)
SCAN_CAP = 20_000
# s of the scan's own CPU time (not the wall clock's, which a loaded machine stretches): a scan costlier than
# this moves to a background poller
SYNC_SCAN_BUDGET = 0.015
POLL_INTERVAL = 1.0  # s between background scans of a large tree


def file_stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def too_large(path: Path, rel: str, then: str = "") -> ToolError | None:
    """The error for a file past MAX_FILE_BYTES (decided from ``stat``, before a byte is read), else None."""
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size <= MAX_FILE_BYTES:
        return None
    return ToolError(
        f"'{rel}' is {size / 2**20:.1f} MiB, more than the {MAX_FILE_BYTES // 2**20} MiB a language server is "
        f"given, so it is not opened{then}; search it with grep in a shell instead",
        code="too_large",
        size=size,
    )


def read_text(path: Path) -> str | None:
    """The UTF-8 text of a regular file of at most MAX_FILE_BYTES, else None: the size is decided from
    ``fstat`` before a byte is read, and no more than MAX_FILE_BYTES + 1 bytes are read (a file that
    grew meanwhile). Opened non-blocking, so a FIFO put in the file's place is never waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat_module.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = fh.read(MAX_FILE_BYTES + 1)
        return data.decode("utf-8") if len(data) <= MAX_FILE_BYTES else None
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        if fd >= 0:
            os.close(fd)


class _Listing(NamedTuple):
    """What a scan found in one folder."""

    stamp: tuple[int, int]  # the folder's mtime and ctime (ns) when it was listed
    settled: bool  # the stamp was old enough then that a later change must change it (`tether.walk.settled`)
    dirs: tuple[str, ...]  # subfolders to scan
    files: tuple[tuple[str, Path], ...]  # files of the server's extensions


class Watcher:
    """The files of a connection's server under its root, as last told to the server."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.files: dict[Path, tuple[int, int]] = {}  # mtime and size, by path
        self.truncated = False  # the last scan stopped at SCAN_CAP files
        self.poller: asyncio.Task[Any] | None = None
        # the changes found on disk (made outside tether) that no answer has yet seen the server analyse:
        # the mark of the latest, and the files changed
        self.outside: tuple[Mark, list[Path]] | None = None
        self._listings: dict[str, _Listing] = {}  # each scanned folder's last listing, by path
        # what files_changed told, and when (its count of calls): a scan that began before is older there
        self._told = 0
        self._told_at: dict[Path, int] = {}

    async def refresh(self) -> None:
        """Tell the server about every file changed on disk behind its back (mtime/size).

        Open documents are always checked. The other files are scanned here (in a thread: the loop
        goes on serving other calls) while a scan is cheap; in a tree where it is not
        (> SYNC_SCAN_BUDGET), a background task polls instead, so a query does not pay for the whole
        tree (a shell's edit is then seen within about POLL_INTERVAL).
        """
        for doc in list(self.conn.docs.values()):
            if self.conn.sync_doc(doc):
                self._outside([doc.path])
        if self.poller is not None:
            return
        begun = self._told
        current, spent = await asyncio.to_thread(self._timed_scan)
        self._apply_scan(current, begun)
        # (another refresh may have started the poller while this one scanned)
        if spent > SYNC_SCAN_BUDGET and self.poller is None and not self.conn.closing:
            self.poller = asyncio.create_task(self._poll())
            self.conn.tasks.append(self.poller)

    def _apply_scan(self, current: dict[Path, tuple[int, int]], begun: int) -> None:
        """What a scan found, told as changes; ``begun`` is ``_told`` when the scan began. A file that
        files_changed told about after that is taken as it is now, not as the scan saw it: a scan that
        listed a folder before a move and ended after it dropped the moved file, and the move's deletion
        later found nothing to tell."""
        kinds = self.conn.lsp.FileChangeType
        for path, when in self._told_at.items():
            if when > begun:
                stat = file_stat(path)
                if stat is None:
                    current.pop(path, None)
                else:
                    current[path] = stat
        changed: dict[Path, Any] = {}
        for path, stat in current.items():
            old = self.files.get(path)
            if old is None:
                changed[path] = kinds.Created
            elif old != stat:
                changed[path] = kinds.Changed
        for path in self.files.keys() - current.keys():
            # gone from disk, not merely out of the scan's reach: a document tether opened in a hidden
            # folder (sync_doc follows it), a file past SCAN_CAP
            if file_stat(path) is None:
                changed[path] = kinds.Deleted
        self.files = current
        self._send([self.conn.lsp.FileEvent(uri=path.as_uri(), type=kind) for path, kind in changed.items()])
        self._outside(list(changed))

    def _outside(self, paths: list[Path]) -> None:
        """Remember changes found on disk: an answer about the project waits for the server's round after
        them (`analysed`)."""
        if paths and self.conn.last_mark is not None:
            earlier = self.outside[1] if self.outside is not None else []
            self.outside = (self.conn.last_mark, [*earlier, *(p for p in paths if p not in earlier)])

    def analysed(self, outside: tuple[Mark, list[Path]]) -> None:
        """The server's round after ``outside`` was seen complete: later answers need not wait for it."""
        if self.outside is outside:
            self.outside = None

    async def _poll(self) -> None:
        while self.conn.alive:
            await asyncio.sleep(POLL_INTERVAL)
            begun = self._told
            current = await asyncio.to_thread(self.scan)
            self._apply_scan(current, begun)

    def files_changed(self, paths: list[Path]) -> None:
        """Tell the server about files we just wrote (or deleted), without waiting for a scan.

        Each is known here afterwards, whether or not a scan has seen it: a file this run created and then
        deleted before any scan (one moved twice) is said deleted all the same. Without that, the deletion
        was told to no one, and basedpyright kept the module for its importers for the rest of the run
        (they showed "unknown import symbol" instead of a missing import)."""
        lsp = self.conn.lsp
        events = []
        self._told += 1
        for path in paths:
            doc = self.conn.docs.get(path.as_uri())
            stat = file_stat(path)
            if path.name.endswith(self.conn.server.extensions):
                self._told_at[path] = self._told
            if doc is not None:
                # a document deleted is said deleted and closed (sync_doc, close_doc: `gone`)
                synced = self.conn.sync_doc(doc)
                if not synced and stat is not None and path.name.endswith(self.conn.server.extensions):
                    self.files[path] = stat  # the server has its text: a scan need not say it created
                continue
            if not path.name.endswith(self.conn.server.extensions):
                continue
            old = self.files.get(path)
            if stat is None:
                # deleted by the write being told, known to a scan or not (a document closed just before was
                # said deleted by `gone` too: told twice, the second is nothing to the server)
                self.files.pop(path, None)
                events.append(lsp.FileEvent(uri=path.as_uri(), type=lsp.FileChangeType.Deleted))
            elif stat != old:
                self.files[path] = stat
                kind = lsp.FileChangeType.Created if old is None else lsp.FileChangeType.Changed
                events.append(lsp.FileEvent(uri=path.as_uri(), type=kind))
        self._send(events)

    def gone(self, path: Path) -> None:
        """An open document's file is gone from disk: said deleted now, before its didClose. basedpyright
        takes a deletion only of a file its program holds; told after the close, the deletion was
        dropped at times on a loaded machine (most likely for a document it had opened before its
        workspace was listed, which the close took out of its program), and the importers kept the
        module: "unknown import symbol" for the rest of the run."""
        self.files.pop(path, None)
        self._send([self.conn.lsp.FileEvent(uri=path.as_uri(), type=self.conn.lsp.FileChangeType.Deleted)])

    def _send(self, events: list[Any]) -> None:
        """Notify the server of watched-file events; the next wait for diagnostics counts from here."""
        if events:
            self.conn.last_mark = self.conn.mark()
            self.conn.edits.update(e.uri for e in events)
            self.conn.notify(
                "workspace/didChangeWatchedFiles", self.conn.lsp.DidChangeWatchedFilesParams(changes=events)
            )

    def _timed_scan(self) -> tuple[dict[Path, tuple[int, int]], float]:
        """The scan and the CPU seconds it took in its thread: its own cost, neither the wait for a thread of
        a busy loop nor the machine's load (timed by the wall clock, a loaded machine moved a 3-file tree to
        the poller, and a query right after a shell's edit then ran before any scan had seen that edit)."""
        start = time.thread_time()
        current = self.scan()
        return current, time.thread_time() - start

    def scan(self) -> dict[Path, tuple[int, int]]:
        """mtime and size of every file with one of the server's extensions under its root, ignored ones
        included (the server analyses a .gitignore'd generated module an import reaches); a symlink is
        followed to its file. Left out: hidden entries, SKIP_DIRS (node_modules, __pycache__, ...) and
        virtual environments (a folder holding pyvenv.cfg). At most SCAN_CAP files; ``truncated`` says
        whether this scan stopped there.

        A folder whose stamp (mtime, ctime) is what it was when last listed, long enough before that
        listing that no change since can have left it so (`tether.walk.settled`), is not listed again:
        an entry added, removed or renamed changes it. Its files are still stat-ed, each one, so an edit
        in place is seen by every scan."""
        out: dict[Path, tuple[int, int]] = {}
        before = self._listings
        listings: dict[str, _Listing] = {}
        root = str(self.conn.root)
        stack = [root]
        while stack:
            top = stack.pop()
            try:
                st = os.stat(top)
            except OSError:
                continue
            stamp = (st.st_mtime_ns, st.st_ctime_ns)
            listing = before.get(top)
            if listing is None or not listing.settled or listing.stamp != stamp:
                listing = self._list(top, stamp, root=top == root)
                if listing is None:
                    continue
            listings[top] = listing
            for name, path in listing.files:
                try:
                    st = os.stat(name)
                except OSError:
                    continue
                out[path] = (st.st_mtime_ns, st.st_size)
                if len(out) >= SCAN_CAP:
                    self.truncated = True
                    self._listings = listings
                    return out
            stack.extend(listing.dirs)
        self.truncated = False
        self._listings = listings
        return out

    def _list(self, top: str, stamp: tuple[int, int], *, root: bool) -> _Listing | None:
        """The folder's subfolders to scan and files of the server's extensions, as they are now."""
        began = time.time_ns()
        exts = self.conn.server.extensions
        dirs: list[str] = []
        files: list[tuple[str, Path]] = []
        try:
            entries = os.scandir(top)
        except OSError:
            return None
        with entries:
            for entry in entries:
                name = entry.name
                if name == "pyvenv.cfg" and not root:
                    dirs, files = [], []  # a virtual environment: nothing in it is scanned
                    break
                try:
                    if name.startswith("."):
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        if name not in SKIP_DIRS:
                            dirs.append(entry.path)
                    elif name.endswith(exts):
                        files.append((entry.path, Path(entry.path)))
                except OSError:
                    continue
        return _Listing(stamp, settled(stamp, began), tuple(dirs), tuple(files))
