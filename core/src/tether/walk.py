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
import stat
import subprocess
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

import attrs

# .git and .venv are hidden; other venvs hold pyvenv.cfg
SKIP_DIRS = frozenset({"node_modules", "__pycache__"})
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
    # files and folders left out (ignore rules, hidden, venvs, node_modules); a folder counts once
    ignored: int = 0
    via: str = "git"  # "git" (git ls-files) or "ignore" (the ignore crate)


def walk(root: Path, start: Path | None = None, wanted: Callable[[str], bool] = lambda name: True) -> Walk:
    """The files under ``start`` (a folder inside ``root``, default the root) whose name ``wanted`` accepts."""
    start = start or root
    base = str(start)
    listed = None if _has_ignore_files(root, start) else _git_files(start)
    via = "git" if listed is not None else "ignore"
    if listed is None:
        listed = _crate_files(start)
    skipped_folder = _folder_filter(base)
    kept = []
    for rel in listed:
        folder, _, name = rel.rpartition("/")
        if not name.startswith(".") and not (folder and skipped_folder(folder)):
            kept.append(rel)
    out = Walk(via=via)
    regular = []
    for rel in sorted(kept):
        path = f"{base}/{rel}"
        try:
            st = os.lstat(path)
        except OSError:  # listed by git but deleted, or gone meanwhile
            continue
        if not stat.S_ISREG(st.st_mode):  # a symlink, or a folder the crate lists
            continue
        regular.append(rel)
        if wanted(rel.rpartition("/")[2]):
            out.files.append(FileEntry(path, st.st_size, st.st_mtime_ns, st.st_ino))
    out.ignored = _count_left_out(base, regular)
    return out


def _folder_filter(base: str) -> Callable[[str], bool]:
    """Whether a folder (relative to ``base``) is hidden, vendored, a virtual environment, or inside one."""

    @cache
    def skipped(folder: str) -> bool:
        parent, _, name = folder.rpartition("/")
        if name.startswith(".") or name in SKIP_DIRS or os.path.exists(f"{base}/{folder}/pyvenv.cfg"):
            return True
        return bool(parent) and skipped(parent)

    return skipped


def _has_ignore_files(root: Path, start: Path) -> bool:
    """A ``.ignore`` file git does not know about, in ``start`` or a folder between it and the root
    (below ``start``, git's own listing shows it)."""
    folders = [start, *[p for p in start.parents if p.is_relative_to(root)]]
    return any((f / ".ignore").is_file() for f in folders)


def _git_files(start: Path) -> list[str] | None:
    """``git ls-files`` in ``start`` (paths relative to it): tracked and not-ignored untracked files;
    None outside a work tree, or when a ``.ignore`` file asks for rules git does not apply."""
    try:
        proc = subprocess.run(
            [
                "git",
                "-c",
                "core.quotePath=false",
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            cwd=start,
            capture_output=True,
            timeout=GIT_TIMEOUT,
            check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    names = {
        os.fsdecode(n) for n in proc.stdout.split(b"\0") if n
    }  # a file both tracked and changed comes twice
    if any(n == ".ignore" or n.endswith("/.ignore") for n in names):
        return None
    return list(names)


def _crate_files(start: Path) -> list[str]:
    """What the ignore crate walks under ``start`` (files and folders: `walk` keeps the regular files), relative to it."""
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
    cut = len(str(start)) + 1
    return [str(entry.path())[cut:] for entry in walker if entry.depth() > 0]


def _count_left_out(base: str, kept: Iterable[str]) -> int:
    """How many files and folders beside the kept ones were left out (a folder once, not its content)."""
    children: dict[str, set[str]] = {"": set()}
    for rel in kept:
        while rel:
            folder, _, name = rel.rpartition("/")
            known = folder in children
            children.setdefault(folder, set()).add(name)
            if known:
                break
            rel = folder
    left = 0
    for folder, names in children.items():
        try:
            with os.scandir(f"{base}/{folder}" if folder else base) as entries:
                left += sum(1 for e in entries if e.name not in names and not _empty_dir(e))
        except OSError:
            continue
    return left


def _empty_dir(entry: os.DirEntry[str]) -> bool:
    """A folder with nothing in it: nobody ignored anything there."""
    try:
        if not entry.is_dir(follow_symlinks=False):
            return False
        with os.scandir(entry.path) as inside:
            return next(inside, None) is None
    except OSError:
        return False
