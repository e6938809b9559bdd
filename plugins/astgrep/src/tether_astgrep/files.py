"""Which files a search reads: `path` walked with .gitignore honoured, and what was left out.

Skipped without reading: `.git`, `node_modules`, virtual environments (a folder holding
`pyvenv.cfg`), hidden files and folders (as ast-grep does by default), and
whatever a `.gitignore` on the way (or `.git/info/exclude`) ignores.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import attrs

_SKIP_DIRS = {".git", "node_modules", "__pycache__"}  # .venv is hidden; other venvs hold pyvenv.cfg


@attrs.frozen
class FileEntry:
    path: str  # absolute
    size: int
    mtime_ns: int
    inode: int


@attrs.define
class Walk:
    files: list[FileEntry] = attrs.Factory(list)
    ignored: int = 0  # files and folders left out by .gitignore, hidden names, venvs, node_modules


def _spec(lines: list[str]):
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(lines)


def _read_ignore(path: Path):
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    lines = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    return _spec(lines) if lines else None


def _ignored(specs: list[tuple[str, object]], abs_path: str, is_dir: bool) -> bool:
    for base, spec in specs:
        rel = os.path.relpath(abs_path, base).replace(os.sep, "/")
        if is_dir:
            rel += "/"
        if spec.match_file(rel):  # type: ignore[attr-defined]
            return True
    return False


def walk(root: Path, start: Path, wanted: Callable[[str], bool]) -> Walk:
    """Files under ``start`` (a folder inside ``root``) whose name ``wanted`` accepts."""
    out = Walk()
    specs: list[tuple[str, object]] = []
    exclude = root / ".git" / "info" / "exclude"
    if exclude.is_file():
        spec = _read_ignore(exclude)
        if spec is not None:
            specs.append((str(root), spec))
    # .gitignore files of the folders above the start folder (up to the root) apply too
    parts = start.relative_to(root).parts
    for i in range(len(parts)):
        folder = root.joinpath(*parts[:i])
        spec = _read_ignore(folder / ".gitignore")
        if spec is not None:
            specs.append((str(folder), spec))
    _walk_dir(str(start), specs, wanted, out)
    return out


def _walk_dir(folder: str, specs: list, wanted: Callable[[str], bool], out: Walk) -> None:
    local = _read_ignore(Path(folder) / ".gitignore")
    if local is not None:
        specs = [*specs, (folder, local)]
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    subdirs = []
    for entry in entries:
        name = entry.name
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = entry.is_file(follow_symlinks=False)
        except OSError:
            continue
        if is_dir:
            if name in _SKIP_DIRS or name.startswith(".") or os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
                out.ignored += 1
                continue
            if specs and _ignored(specs, entry.path, True):
                out.ignored += 1
                continue
            subdirs.append(entry.path)
        elif is_file:
            if not wanted(name):
                continue
            if name.startswith(".") or (specs and _ignored(specs, entry.path, False)):
                out.ignored += 1
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            out.files.append(FileEntry(entry.path, st.st_size, st.st_mtime_ns, st.st_ino))
    for sub in subdirs:
        _walk_dir(sub, specs, wanted, out)
