"""All-or-nothing writes across files, one writer per root at a time, recoverable after a crash.

Every tool that writes files (the host's write/edit/apply_patch, astgrep's resolve, lsp_rename)
goes through `write_all`, via `Run.write_files`. It holds the root's write lock (a thread lock in
this process, an ``fcntl`` lock on a file in a private state directory across processes) while it
re-checks the snapshots the caller staged against and writes, so a change made after staging is
refused, never overwritten.

A write of several files is a small transaction with an intent record (the journal), kept in the
root's state directory (``$XDG_STATE_HOME/tether/<hash of the root>``, mode 0700):

1. the journal is written and fsynced in state ``staging``; then each file's new content goes to a
   temporary file beside it (``.NAME.<id>.tether-new``, fsynced) and each file that exists gets a
   backup beside it (``.NAME.<id>.tether-old``: a hard link to the old content, a copy where a link
   cannot be made or the file is written in place);
2. the journal turns to ``commit`` (fsynced): from here on the write is rolled forward;
3. each temporary file is renamed onto its target (``os.replace``: the target never stops existing),
   a file with more than one hard link is rewritten in place so its other names see the change, a
   deleted file is unlinked; the folders are fsynced;
4. backups, temporary files and the journal are removed.

A failure in step 1 removes what was staged; in step 3 it restores the files already changed from
their backups. A crash (SIGKILL, power loss) leaves the journal: the next run that opens the root
calls `recover`, and every write checks first (under the lock), so a transaction left in staging has
its files removed and a committed one is finished. Side files of our naming that no journal names
(an older tether's, or a crash whose state dir is gone) are removed from the folders a write touches
once they are an hour old.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from tether.tools import ToolError

NEW_SUFFIX = ".tether-new"
OLD_SUFFIX = ".tether-old"
LOCK_TIMEOUT = 30.0  # how long a write waits for another writer of the same root
STALE_AFTER = 3600.0  # s: a side file of ours this old beside a target is a crash's leftover
STAGING_THREADS = 64  # files written and fsynced at once (a disk commits concurrent fsyncs together)

_replace = os.replace  # one seam, so tests can inject a failure on the n-th rename


def _sha256(data: bytes) -> Any:
    """sha256 of ``data``. CPython's own implementation where it has one (`_sha2`, `_sha256` in 3.11):
    hashlib loads OpenSSL, some milliseconds at the start of every run, which `state_dir` names the root's
    folder with. The same digest either way."""
    global _sha256_of
    if _sha256_of is None:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found]  # CPython 3.12+
        except ImportError:
            try:
                from _sha256 import sha256  # type: ignore[import-not-found,no-redef]  # CPython 3.11
            except ImportError:
                from hashlib import sha256  # type: ignore[assignment]
        _sha256_of = sha256
    return _sha256_of(data)


_sha256_of: Any = None


@attrs.frozen
class Snapshot:
    path: Path
    exists: bool
    digest: str | None  # sha256 of the content when it exists

    @classmethod
    def of(cls, path: Path, data: bytes | None) -> Snapshot:
        """The snapshot of content already read (None: the file does not exist), so it matches what was used."""
        return cls(path, data is not None, _sha256(data).hexdigest() if data is not None else None)

    @classmethod
    def take(cls, path: Path) -> Snapshot:
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO put there would block the read
                return cls(path, True, None)
            data = path.read_bytes()
        except FileNotFoundError:
            return cls(path, False, None)
        return cls(path, True, _sha256(data).hexdigest())

    def still_holds(self) -> bool:
        return Snapshot.take(self.path) == self


class ChangedSince(Exception):
    """Files changed (or appeared, or vanished) since the caller read them; nothing was written."""

    def __init__(self, paths: list[Path]) -> None:
        super().__init__(", ".join(str(p) for p in paths))
        self.paths = paths


def changed_since(snapshots: Iterable[Snapshot]) -> list[Path]:
    """The paths whose content (or existence) differs from their snapshot."""
    return [s.path for s in snapshots if not s.still_holds()]


# -- the root's private state directory and its lock -------------------------------------------------


def state_dir(root: Path, *, create: bool = True) -> Path:
    """The root's private directory for the write lock and journals (created 0700 on first use)."""
    home = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    folder = Path(home) / "tether" / _sha256(os.fsencode(root)).hexdigest()[:24]
    if create:
        folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        while True:
            try:
                folder.mkdir(mode=0o700)
            except FileExistsError:
                if folder.is_dir():
                    break
                if os.path.lexists(folder):
                    raise  # something that is not a folder stands at the state dir's path
                continue  # another process's writer removed it on release, after our mkdir saw it: again
            break
    return folder


_thread_locks: dict[Path, threading.Lock] = {}
_guard = threading.Lock()


@contextlib.contextmanager
def root_lock(root: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[Path]:
    """Hold the root's write lock (threads of this process, then other processes); yield its state dir.

    The lock file and its folder are removed on release when no journal is left, so a root that was
    written to leaves nothing behind. That is safe because a holder checks, once it has the flock,
    that the file it locked is still the one at the path; if not, it locks the new one.
    """
    with _guard:
        lock = _thread_locks.setdefault(root, threading.Lock())
    busy = ToolError(
        f"another writer has held the write lock of this root for {timeout:.0f} s (another tether process "
        "writing here?); nothing was written: try again when it is done",
        code="write_lock_busy",
    )
    if not lock.acquire(timeout=timeout):
        raise busy
    try:
        deadline = time.monotonic() + timeout
        folder, fd = _lock_file(root, deadline, busy)
        try:
            yield folder
        finally:
            if not any(folder.glob("journal-*")):
                with contextlib.suppress(OSError):
                    os.unlink(folder / "lock")
                    folder.rmdir()
            os.close(fd)  # releases the flock
    finally:
        lock.release()


def _lock_file(root: Path, deadline: float, busy: ToolError) -> tuple[Path, int]:
    """The state dir and an open descriptor holding the flock of the lock file now at its path."""
    while True:
        folder = state_dir(root)
        try:
            fd = os.open(folder / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:  # the folder was removed by a holder releasing it: make it again
            continue
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise busy from None
                    time.sleep(0.005)
            with contextlib.suppress(FileNotFoundError):
                if os.stat(folder / "lock").st_ino == os.fstat(fd).st_ino:
                    return folder, fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # the file we locked was removed meanwhile: lock the one at the path now


# -- the transaction ----------------------------------------------------------------------------------


@attrs.frozen
class _Entry:
    kind: str  # "create" | "replace" | "inplace" (more than one hard link) | "delete"
    target: str
    tmp: str | None  # the new content, beside the target
    backup: str | None  # the old content, beside the target


def _fsync_dir(folder: str | Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_file(path: str, data: bytes, mode: int | None) -> None:
    """A new file holding ``data``, fsynced; ``mode`` None: the umask's default mode."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666 if mode is None else 0o600)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _overwrite_in_place(target: str, source: str) -> None:
    """Give ``target`` (same inode, every hard link sees it) the content of ``source``."""
    with open(source, "rb") as src, open(target, "r+b") as dst:
        shutil.copyfileobj(src, dst)
        dst.truncate()
        dst.flush()
        os.fsync(dst.fileno())


def _side_name(target: Path, txid: str, n: int, suffix: str) -> str:
    # the target's name is cut so the side name stays within NAME_MAX (255 bytes); n keeps two long
    # names with the same beginning apart
    name = os.fsencode(target.name)[:180].decode(errors="ignore")
    return str(target.with_name(f".{name}.{txid}-{n}{suffix}"))


def _plan(root: Path, changes: Mapping[Path, bytes | None], txid: str) -> list[_Entry]:
    entries = []
    for n, (target, content) in enumerate(changes.items()):
        try:
            st = os.stat(target)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            shown = os.path.relpath(target, root)
            raise ToolError(
                f"'{shown}' is not a regular file; only regular files are written", code="not_a_file"
            )
        if content is None:
            if st is not None:
                entries.append(_Entry("delete", str(target), None, _side_name(target, txid, n, OLD_SUFFIX)))
            continue
        kind = "create" if st is None else "inplace" if st.st_nlink > 1 else "replace"
        backup = None if st is None else _side_name(target, txid, n, OLD_SUFFIX)
        entries.append(_Entry(kind, str(target), _side_name(target, txid, n, NEW_SUFFIX), backup))
    return entries


def _journal_path(folder: Path, txid: str) -> Path:
    return folder / f"journal-{txid}.json"


def _save_journal(folder: Path, txid: str, state: str, entries: list[_Entry]) -> None:
    record = {"id": txid, "state": state, "entries": [attrs.asdict(e) for e in entries]}
    path = _journal_path(folder, txid)
    tmp = path.with_suffix(".part")
    tmp.unlink(missing_ok=True)
    _write_file(str(tmp), json.dumps(record).encode(), 0o600)
    os.replace(tmp, path)
    _fsync_dir(folder)


def _backup(entry: _Entry) -> None:
    assert entry.backup is not None
    if entry.kind != "inplace":  # a link keeps the old inode, which the rename then detaches
        try:
            os.link(entry.target, entry.backup)
            return
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
    shutil.copy2(entry.target, entry.backup)
    with open(entry.backup, "rb") as fh:
        os.fsync(fh.fileno())


def _commit_one(entry: _Entry) -> None:
    if entry.kind == "delete":
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry.target)
    else:
        assert entry.tmp is not None
        if entry.kind == "inplace":
            _overwrite_in_place(entry.target, entry.tmp)
        else:
            _replace(entry.tmp, entry.target)


def _undo_one(entry: _Entry) -> None:
    if entry.kind == "create":
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry.target)
    elif entry.kind == "inplace":
        assert entry.backup is not None
        _overwrite_in_place(entry.target, entry.backup)
    else:
        assert entry.backup is not None
        os.replace(entry.backup, entry.target)


def _clean(folder: Path, txid: str, entries: list[_Entry]) -> None:
    for e in entries:
        for side in (e.tmp, e.backup):
            if side is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(side)
    for d in {os.path.dirname(e.target) for e in entries}:
        _fsync_dir(d)
    _journal_path(folder, txid).unlink(missing_ok=True)
    _fsync_dir(folder)


def write_all(changes: Mapping[Path, bytes | None], *, root: Path, expect: Iterable[Snapshot] = ()) -> None:
    """Write every file (None deletes it) or none, under the root's write lock.

    ``expect``: snapshots of what the caller read; if any no longer holds, raise `ChangedSince`
    and write nothing (checked under the lock, so no other writer can slip in between).
    """
    with root_lock(root) as folder:
        _recover_locked(folder)  # what another process left when it was killed mid-write
        moved = changed_since(expect)
        if moved:
            raise ChangedSince(moved)
        _transact(root, folder, changes)


def _stage(entry: _Entry, content: bytes | None) -> None:
    """The entry's new content beside its target (fsynced), and its backup."""
    if entry.tmp is not None:
        assert content is not None
        os.makedirs(os.path.dirname(entry.target), exist_ok=True)
        mode = None if entry.kind == "create" else stat.S_IMODE(os.stat(entry.target).st_mode)
        _write_file(entry.tmp, content, mode)
    if entry.backup is not None:
        _backup(entry)


def _transact(root: Path, folder: Path, changes: Mapping[Path, bytes | None]) -> None:
    txid = os.urandom(6).hex()
    entries = _plan(root, changes, txid)
    if not entries:
        return
    _save_journal(folder, txid, "staging", entries)
    try:
        if len(entries) == 1:
            _stage(entries[0], changes[Path(entries[0].target)])
        else:  # fsyncs of many files side by side: the file system commits them together
            # imported by a write, not when a run opens (which only looks for a journal)
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(
                min(STAGING_THREADS, len(entries)), thread_name_prefix="tether-write"
            ) as pool:
                staged = [pool.submit(_stage, e, changes[Path(e.target)]) for e in entries]
                for future in staged:
                    future.result()  # the first failure; leaving the block waits for the others
        _save_journal(folder, txid, "commit", entries)
    except BaseException:
        _clean(folder, txid, entries)
        raise
    done: list[_Entry] = []
    try:
        for entry in entries:
            done.append(entry)
            _commit_one(entry)
    except BaseException:
        for entry in reversed(done):
            with contextlib.suppress(FileNotFoundError):
                _undo_one(entry)
        _clean(folder, txid, entries)
        raise
    _clean(folder, txid, entries)
    _sweep_stale({os.path.dirname(e.target) for e in entries})


def _sweep_stale(folders: Iterable[str]) -> None:
    """Remove side files of our naming that a crash left in these folders without a journal (an older
    tether's, or one whose state dir is gone). Only old ones: a fresh one may be another root's write
    in flight. ctime, not mtime: a backup is a hard link to an old inode, and linking sets its ctime."""
    cutoff = time.time() - STALE_AFTER
    for folder in folders:
        try:
            with os.scandir(folder) as entries:
                stale = [
                    e.path
                    for e in entries
                    if e.name.startswith(".")
                    and e.name.endswith((NEW_SUFFIX, OLD_SUFFIX))
                    and e.is_file(follow_symlinks=False)
                    and e.stat(follow_symlinks=False).st_ctime < cutoff
                ]
        except OSError:
            continue
        for path in stale:
            with contextlib.suppress(OSError):
                os.unlink(path)


def recover(root: Path) -> list[str]:
    """Finish or undo the transactions a crash left under ``root``; say what was done (one line each)."""
    if not state_dir(root, create=False).is_dir():
        return []
    with root_lock(root) as folder:  # on release, a lock file a killed writer left is removed too
        return _recover_locked(folder)


def _recover_locked(folder: Path) -> list[str]:
    """`recover`'s work, the lock held: each journal's staging undone or its commit finished."""
    for part in folder.glob("journal-*.part"):
        part.unlink(missing_ok=True)
    done = []
    for path in sorted(folder.glob("journal-*.json")):
        try:
            record = json.loads(path.read_text())
            entries = [_Entry(**e) for e in record["entries"]]
        except (OSError, ValueError, TypeError, KeyError):
            path.unlink(missing_ok=True)  # not a journal we wrote
            continue
        if record["state"] == "commit":
            for entry in entries:
                if entry.kind == "delete" or (entry.tmp is not None and os.path.exists(entry.tmp)):
                    _commit_one(entry)
            done.append(f"finished an interrupted write of {len(entries)} file(s)")
        else:
            done.append(f"removed the staged files of an interrupted write of {len(entries)} file(s)")
        _clean(folder, record["id"], entries)
    return done
