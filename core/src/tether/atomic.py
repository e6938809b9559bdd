"""All-or-nothing writes across files, and snapshots to refuse changes made behind our back.

Used by every tool that writes several files at once (apply_patch, resolve, lsp_rename): a partly
applied multi-file change leaves a tree that is neither the old nor the new one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

_replace = os.replace  # one seam, so tests can inject a failure on the n-th file


@attrs.frozen
class Snapshot:
    path: Path
    exists: bool
    digest: str | None  # sha256 of the content when it exists

    @classmethod
    def of(cls, path: Path, data: bytes | None) -> Snapshot:
        """The snapshot of content already read (None: the file does not exist), so it matches what was used."""
        return cls(path, data is not None, hashlib.sha256(data).hexdigest() if data is not None else None)

    @classmethod
    def take(cls, path: Path) -> Snapshot:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return cls(path, False, None)
        return cls(path, True, hashlib.sha256(data).hexdigest())

    def still_holds(self) -> bool:
        return Snapshot.take(self.path) == self


def changed_since(snapshots: Iterable[Snapshot]) -> list[Path]:
    """The paths whose content (or existence) differs from their snapshot."""
    return [s.path for s in snapshots if not s.still_holds()]


def write_all(changes: Mapping[Path, bytes | None]) -> None:
    """Write every file (None deletes it) or none: on any failure the files already replaced are restored."""
    staged: list[tuple[Path, Path | None]] = []  # (target, temp file with the new content)
    try:
        for target, content in changes.items():
            if content is None:
                staged.append((target, None))
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tether-new", dir=target.parent)
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
            if target.exists():
                os.chmod(tmp, target.stat().st_mode & 0o7777)
            staged.append((target, Path(tmp)))
    except BaseException:
        for _, tmp in staged:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
        raise

    done: list[tuple[Path, Path | None]] = []  # (target, backup of the old content or None if it was new)
    try:
        for target, tmp in staged:
            backup = None
            if target.exists():
                backup = target.with_name(f".{target.name}.tether-old")
                _replace(target, backup)
            done.append((target, backup))
            if tmp is not None:
                _replace(tmp, target)
    except BaseException:
        for target, backup in reversed(done):
            if backup is not None:
                os.replace(backup, target)
            else:
                target.unlink(missing_ok=True)
        for _, tmp in staged:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
        raise
    for _, backup in done:
        if backup is not None:
            backup.unlink(missing_ok=True)
