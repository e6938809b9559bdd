"""The project's files: what git (and ast-grep, and ripgrep) would look at under a folder.

One walker for every family. Fast path: ``git ls-files`` (tracked and untracked files that no
ignore rule excludes), when the folder is in a git work tree and holds no ``.ignore`` file. Else the
Rust ``ignore`` crate that ast-grep and ripgrep use (through ``ignore-python``): ``.gitignore`` in
every folder with ``!`` re-includes, ``.ignore`` files, ``.git/info/exclude`` and the global git
excludes (``core.excludesFile``), also outside a git repository. Both paths then leave out hidden
files and folders, ``node_modules``, ``__pycache__`` and virtual environments (a folder holding
``pyvenv.cfg``), as ast-grep does by default.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

import attrs

SKIP_DIRS = frozenset({"node_modules", "__pycache__"})  # .git and .venv are hidden; other venvs hold pyvenv.cfg
GIT_TIMEOUT = 30.0


@attrs.frozen
class FileEntry:
    path: str  # absolute
    size: int
    mtime_ns: int
    inode: int


@attrs.define
class Walk:
    files: list[FileEntry] = attrs.Factory(list)
    ignored: int = 0  # files and folders left out (ignore rules, hidden, venvs, node_modules); a folder counts once
    via: str = "git"  # "git" (git ls-files) or "ignore" (the ignore crate)


def walk(root: Path, start: Path | None = None, wanted: Callable[[str], bool] = lambda name: True) -> Walk:
    """The files under ``start`` (a folder inside ``root``, default the root) whose name ``wanted`` accepts."""
    start = start or root
    listed = None if _has_ignore_files(root, start) else _git_files(start)
    via = "git" if listed is not None else "ignore"
    if listed is None:
        listed = _crate_files(start)
    vendored = cache(_is_venv)
    kept: set[str] = set()
    for path in listed:
        rel = os.path.relpath(path, start)
        parts = rel.split(os.sep)
        if any(p.startswith(".") or p in SKIP_DIRS for p in parts):
            continue
        folders = [os.path.join(start, *parts[:i]) for i in range(1, len(parts))]
        if any(vendored(f) for f in folders):
            continue
        kept.add(path)
    out = Walk(via=via)
    for path in sorted(kept):
        if not wanted(os.path.basename(path)):
            continue
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:  # listed by git but deleted, or gone meanwhile
            continue
        if os.path.isfile(path) and not os.path.islink(path):
            out.files.append(FileEntry(path, st.st_size, st.st_mtime_ns, st.st_ino))
    out.ignored = _count_left_out(start, kept)
    return out


def _is_venv(folder: str) -> bool:
    return os.path.exists(os.path.join(folder, "pyvenv.cfg"))


def _has_ignore_files(root: Path, start: Path) -> bool:
    """A ``.ignore`` file git does not know about, in ``start`` or a folder between it and the root
    (below ``start``, git's own listing shows it)."""
    folders = [start, *[p for p in start.parents if p.is_relative_to(root)]]
    return any((f / ".ignore").is_file() for f in folders)


def _git_files(start: Path) -> list[str] | None:
    """``git ls-files`` in ``start``: tracked and not-ignored untracked files; None outside a work tree."""
    try:
        proc = subprocess.run(
            ["git", "-c", "core.quotePath=false", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=start, capture_output=True, timeout=GIT_TIMEOUT, check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    names = [n for n in proc.stdout.split(b"\0") if n]
    if any(os.path.basename(n) == b".ignore" for n in names):
        return None  # rules git does not apply
    return sorted({os.path.join(start, os.fsdecode(n)) for n in names})


def _crate_files(start: Path) -> list[str]:
    import ignore

    walker = (
        ignore.WalkBuilder(start)
        .hidden(True)
        .ignore(True)
        .parents(True)
        .git_ignore(True)
        .git_global(True)
        .git_exclude(True)
        .require_git(False)
        .follow_links(False)
        .build()
    )
    out = []
    for entry in walker:
        path = str(entry.path())
        if entry.depth() > 0 and not os.path.isdir(path):
            out.append(path)
    return out


def _count_left_out(start: Path, kept: Iterable[str]) -> int:
    """How many files and folders next to the kept ones were left out (a folder once, not its content)."""
    folders = {str(start)}
    for path in kept:
        parent = os.path.dirname(path)
        while parent not in folders and parent.startswith(str(start)):
            folders.add(parent)
            parent = os.path.dirname(parent)
    named = folders | set(kept)
    left = 0
    for folder in folders:
        try:
            with os.scandir(folder) as entries:
                left += sum(1 for e in entries if e.path not in named and not _empty_dir(e))
        except OSError:
            continue
    return left


def _empty_dir(entry: os.DirEntry) -> bool:
    """A folder with nothing in it: nobody ignored anything there."""
    try:
        if not entry.is_dir(follow_symlinks=False):
            return False
        with os.scandir(entry.path) as inside:
            return next(inside, None) is None
    except OSError:
        return False
