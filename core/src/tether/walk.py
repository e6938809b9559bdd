"""The project's files: what git (and ast-grep, and ripgrep) would look at under a folder.

One walker for every family. Fast path: ``git ls-files`` (tracked and untracked files that no
ignore rule excludes), when the folder is in a git work tree and holds no ``.ignore`` file. Else the
Rust ``ignore`` crate that ast-grep and ripgrep use (through ``ignore-python``): ``.gitignore`` in
every folder with ``!`` re-includes, ``.ignore`` files, ``.git/info/exclude`` and the global git
excludes (``core.excludesFile``), also outside a git repository. Both paths then leave out hidden
files and folders, ``node_modules``, ``__pycache__`` and virtual environments (a folder holding
``pyvenv.cfg``), as ast-grep does by default.

A repeated walk of a folder nothing changed in reuses the last listing (`_WalkCache`): it is valid
while every folder it looked into keeps its modification time (an entry added, removed or renamed
changes it), and so do the ignore files it obeyed, git's index, ``info/exclude``, every git config file
git read (included ones too), git's HEAD (the branch an ``onbranch:`` include follows) and the global
excludes file. A symlinked folder is watched where it really is. Each file is still stat-ed on every
walk, so a file's stamp (size, mtime, ctime, inode) is always current.
"""

from __future__ import annotations

import collections
import os
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

import attrs

# .git and .venv are hidden; other venvs hold pyvenv.cfg
SKIP_DIRS = frozenset({"node_modules", "__pycache__"})
GIT_TIMEOUT = 30.0
CACHE_WALKS = 16  # listings kept (one per root and start folder)
CACHE_PATHS = 400_000  # files kept across them, about 100 bytes each
# a stamp this recent when the listing began may hide a change made during the listing, within one tick
# of the file system's clock: the listing is not reused then. Clocks that stamp in nanoseconds tick every
# 1-10 ms (Linux's coarse clock); where every stamp is a whole second (FAT: 2 s, ext3: 1 s), 2 s
RACY_NS = 100_000_000
COARSE_RACY_NS = 2_000_000_000
IGNORE_FILES = (".gitignore", ".ignore")
# (mtime_ns, ctime_ns, size, inode), or None where nothing exists
Stamp = tuple[int, int, int, int] | None


@attrs.frozen
class FileEntry:
    path: str  # absolute
    size: int
    mtime_ns: int
    inode: int
    # moved by every write, and by setting the mtime (`touch -r`, `cp -p`, `rsync -t`): nobody can put it back
    ctime_ns: int

    @classmethod
    def of(cls, path: str, st: os.stat_result) -> FileEntry:
        return cls(path, st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)

    @property
    def stamp(self) -> tuple[int, int, int, int]:
        """What changes when the file's content may have: a result read from it is valid while this holds,
        if it was `settled` when read."""
        return (self.size, self.mtime_ns, self.ctime_ns, self.inode)


@attrs.define
class Walk:
    files: list[FileEntry] = attrs.Factory(list)
    # files and folders left out (ignore rules, hidden, venvs, node_modules); a folder counts once
    ignored: int = 0
    via: str = "git"  # "git" (git ls-files) or "ignore" (the ignore crate)


def walk(root: Path, start: Path | None = None, wanted: Callable[[str], bool] = lambda name: True) -> Walk:
    """The files under ``start`` (a folder inside ``root``, default the root) whose name ``wanted`` accepts."""
    base = str(start or root)
    # listed and stamped where the folders really are (git, too, sees a symlinked folder's target)
    root, start = root.resolve(), (start or root).resolve()
    key = (str(root), str(start), _environment())
    listing = _cache.get(key)
    fresh: dict[str, os.stat_result] = {}
    if listing is None:
        listing, fresh = _list(root, start)
        _cache.put(key, listing)
    out = Walk(via=listing.via, ignored=listing.ignored)
    for rel in listing.kept:
        if not wanted(rel.rpartition("/")[2]):
            continue
        path = f"{base}/{rel}"
        st = fresh.get(rel)
        if st is None:
            try:
                st = os.lstat(path)
            except OSError:  # gone since the listing
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
        out.files.append(FileEntry.of(path, st))
    return out


@attrs.frozen
class _Listing:
    via: str
    kept: tuple[str, ...]  # the regular files kept, relative to the start, sorted (before ``wanted``)
    ignored: int
    # what the listing depends on: stamps by path, and paths that must stay there (or absent);
    # None: it is never reused (see `_list`)
    stamps: dict[str, Stamp] | None
    there: dict[str, bool] = attrs.Factory(dict)

    def holds(self) -> bool:
        if self.stamps is None:
            return False
        return all(os.path.lexists(p) == was for p, was in self.there.items()) and all(
            _stamp(p) == was for p, was in self.stamps.items()
        )


class _WalkCache:
    """The last listings, each reused while its stamps hold; bounded in listings and in files."""

    def __init__(self) -> None:
        self._data: collections.OrderedDict[tuple, _Listing] = collections.OrderedDict()
        self._lock = threading.Lock()  # walks run in threads

    def get(self, key: tuple) -> _Listing | None:
        with self._lock:
            listing = self._data.get(key)
        if listing is None or not listing.holds():
            return None
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
        return listing

    def put(self, key: tuple, listing: _Listing) -> None:
        with self._lock:
            self._data.pop(key, None)
            if listing.stamps is None or len(listing.kept) > CACHE_PATHS:
                return
            self._data[key] = listing
            total = sum(len(x.kept) for x in self._data.values())
            while len(self._data) > CACHE_WALKS or total > CACHE_PATHS:
                _, old = self._data.popitem(last=False)
                total -= len(old.kept)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


_cache = _WalkCache()


def _stamp(path: str) -> Stamp:
    try:
        return _of(os.lstat(path))
    except OSError:
        return None


def _of(st: os.stat_result) -> Stamp:
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def _environment() -> tuple:
    """What in the environment changes which files git and the ignore crate choose."""
    return tuple(
        sorted(
            (k, v) for k, v in os.environ.items() if k.startswith("GIT_") or k in ("HOME", "XDG_CONFIG_HOME")
        )
    )


def _list(root: Path, start: Path) -> tuple[_Listing, dict[str, os.stat_result]]:
    """Walk ``start`` now: the listing, and the stat of each regular file kept.

    The listing's stamps: each folder the listing went into (an entry added, removed or renamed in it
    changes its mtime) and the ignore files in them; each folder left out (whether it is empty counts);
    the ignore files of every folder above the start, and whether a ``.git`` is there; git's index,
    ``info/exclude``, every config file git read (and each one they include), HEAD and the global excludes
    file. It is never reused where git's own files cannot be told, or where a stamp is so recent that a
    change made during the listing may not have moved it.
    """
    began = time.time_ns()
    # whether a .git is there (not its stamp: git writes in it all the time), before anything is listed
    there = {f"{folder}/.git": os.path.lexists(folder / ".git") for folder in (start, *start.parents)}
    in_git = any(there.values()) or "GIT_DIR" in os.environ  # else git would only say it is no work tree
    repo = _repository_files(start) if in_git else []
    # with the repository's config and HEAD (which branch's includes apply)
    configs = {c: _stamp(c) for c in [*_config_files(), *(repo or [])[2:]]}
    top = next((f for f in (start, *start.parents) if there[f"{f}/.git"]), start)  # where git runs
    excludes = _ask_excludes(start, configs, top)
    try:
        base = str(start)
        listed = _git_files(start) if in_git and not _has_ignore_files(root, start) else None
        via = "git" if listed is not None else "ignore"
        if listed is None:
            listed = _crate_files(start)
        skipped_folder = _folder_filter(base)
        kept = []
        for rel in listed:
            folder, _, name = rel.rpartition("/")
            if not name.startswith(".") and not (folder and skipped_folder(folder)):
                kept.append(rel)
        regular: dict[str, os.stat_result] = {}
        went_into: dict[str, Stamp] = {base: _stamp(base)}
        for rel in sorted(kept):
            path = f"{base}/{rel}"
            try:
                st = os.lstat(path)
            except OSError:  # listed by git but deleted, or gone meanwhile
                continue
            if stat.S_ISDIR(st.st_mode):  # a folder the crate went into
                went_into[path] = _of(st)
            elif stat.S_ISREG(st.st_mode):  # not a symlink
                regular[rel] = st
        ignored, folders, left_out = _left_out(base, regular)
    finally:
        asked = excludes()
    if repo is None or asked is None:
        return _Listing(via, tuple(regular), ignored, None), regular
    excludes_file, read = asked
    for folder in folders:
        path = f"{base}/{folder}" if folder else base
        went_into.setdefault(path, _stamp(path))
    stamps = {
        f"{folder}/{name}": _stamp(f"{folder}/{name}") for folder in start.parents for name in IGNORE_FILES
    }
    stamps.update(configs)
    stamps.update(read)
    default = f"{_config_home()}/git/ignore"
    stamps.update({path: _stamp(path) for path in {*repo[:2], excludes_file or default, default}})
    stamps.update({f"{base}/{f}": _stamp(f"{base}/{f}") for f in left_out if f != ".git"})
    _add_folders(stamps, went_into)
    if via == "git":  # git lists no folders: one left out may be a folder it goes into that holds no file yet
        folder_stamps = {*went_into, *(f"{base}/{f}" for f in left_out)}
        rules = {path: was for path, was in stamps.items() if path not in folder_stamps}
        for folder in _not_git_ignored(start, [f for f in left_out if not skipped_folder(f)], rules):
            _add_folders(stamps, _subtree_stamps(f"{base}/{folder}", skipped_folder, folder))
    trusted = _settled(stamps.values(), began)
    return _Listing(via, tuple(regular), ignored, stamps if trusted else None, there), regular


def _settled(stamps: Iterable[Stamp], began: int) -> bool:
    # the ctime too: where the mtime was put back (`rsync -a`, `cp -p`, `tar x`), only the ctime is recent
    return settled((t for s in stamps if s is not None for t in s[:2]), began)


def settled(times: Iterable[int], began: int) -> bool:
    """Whether each file system time (ns) is older than one tick of its clock before ``began`` (when the
    listing or read began): else a change made after it, within the same tick, may leave the time as it was.
    A whole-second time (FAT, ext3, or a file copied with its date kept) by 2 s, a nanosecond one by 100 ms.
    Changes are told by this machine's clock; a network file system whose server's clock is behind may stamp
    a change made now as older than it is (git has the same limit against its index's stamp)."""
    return all(t < began - (COARSE_RACY_NS if t % 1_000_000_000 == 0 else RACY_NS) for t in times)


def _add_folders(stamps: dict[str, Stamp], folders: dict[str, Stamp]) -> None:
    """Each folder's stamp, and those of the ignore files in it (one created later changes the folder's)."""
    for path, was in folders.items():
        stamps[path] = was
        for name in IGNORE_FILES:
            if (mine := _stamp(f"{path}/{name}")) is not None:
                stamps[f"{path}/{name}"] = mine


def clear_cache() -> None:
    """Forget every listing: the next walk of each folder lists it afresh (a benchmark's cold run)."""
    _cache.clear()
    _excludes.clear()
    _not_ignored.clear()


def _config_home() -> str:
    return os.environ.get("XDG_CONFIG_HOME") or f"{os.environ.get('HOME', '')}/.config"


def _config_files() -> list[str]:
    """git's global and system config files (where ``core.excludesFile`` is set)."""
    home = os.environ.get("HOME", "")
    found = [f"{home}/.gitconfig", f"{_config_home()}/git/config", "/etc/gitconfig"]
    return [*found, os.environ["GIT_CONFIG_GLOBAL"]] if "GIT_CONFIG_GLOBAL" in os.environ else found


# the global excludes file and the config files git read, by start folder, environment and config stamps
_excludes: dict[tuple, tuple[str, dict[str, Stamp]]] = {}


def _ask_excludes(
    start: Path, configs: dict[str, Stamp], top: Path
) -> Callable[[], tuple[str, dict[str, Stamp]] | None]:
    """Ask git, while the listing goes on, which global excludes file ``start`` sees (``core.excludesFile``),
    and which config files it read for that (included ones too; ``top``: the work tree's top, where git
    names the repository's files from). Calling the result gives the path ("" where none is set) and the
    stamps of the files read, None where git cannot say. A known answer is reused while the config files,
    the ones they include and the environment stay the same."""
    key = (str(start), _environment(), tuple(configs.items()))
    known = _excludes.get(key)  # another walk's thread may clear it meanwhile
    if known is not None and all(_stamp(p) == was for p, was in known[1].items()):
        return lambda: known
    began = time.time_ns()
    try:
        proc = subprocess.Popen(
            ["git", "config", "--list", "--show-origin", "-z"],
            cwd=start,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return lambda: None

    def answer() -> tuple[str, dict[str, Stamp]] | None:
        try:
            out, _ = proc.communicate(timeout=GIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None
        told = _told(out, top) if proc.returncode == 0 else None
        if told is None:
            return None
        read = {path: _stamp(path) for path in told[1]}
        found = (told[0], read)
        if _settled(read.values(), began):  # else one may have changed while git read it
            if len(_excludes) > 64:
                _excludes.clear()
            _excludes[key] = found
        return found

    return answer


def _told(listed: bytes, top: Path) -> tuple[str, set[str]] | None:
    """From ``git config --list --show-origin -z`` (its relative paths are from ``top``): the
    excludes file (the last ``core.excludesFile``, its ``~`` expanded as git does; "" where none is
    set), and the config files read with those their ``include.path`` and ``includeIf.<cond>.path``
    name (which may not exist yet, or whose condition may not hold now). None where git's
    ``%(prefix)`` is in the excludes file."""
    fields = listed.split(b"\0")
    excludes, read = "", set()
    for origin, entry in zip(fields[::2], fields[1::2], strict=False):
        name, _, value = os.fsdecode(entry).partition("\n")
        if name == "core.excludesfile":
            excludes = value
        if not origin.startswith(b"file:"):  # command line, blob, standard input
            continue
        where = top / os.fsdecode(origin.removeprefix(b"file:"))
        read.add(str(where))
        if name.startswith(("include.", "includeif.")) and name.endswith(".path") and value:
            read.add(str(where.parent / os.path.expanduser(value)))
    if excludes.startswith("%(prefix)/"):
        return None
    return (str(top / os.path.expanduser(excludes)) if excludes else "", read)


def _repository_files(start: Path) -> list[str] | None:
    """Git's index, ``info/exclude``, config and HEAD of the repository holding ``start``: found as git
    finds them (a ``.git`` folder, or a ``.git`` file naming the folder, as in a linked worktree or a
    submodule, with its ``commondir``; then those two files too); None where the environment chooses them."""
    if any(k in os.environ for k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR")):
        return None
    for folder in (start, *start.parents):
        dot = folder / ".git"
        pointers = []  # the files that name git's folder: one rewritten points elsewhere
        try:
            if dot.is_dir():
                git_dir = dot
            elif dot.is_file():
                text = dot.read_text(encoding="utf-8").strip()
                if not text.startswith("gitdir:"):
                    return None
                git_dir = folder / text.removeprefix("gitdir:").strip()
                pointers = [str(dot), str(git_dir / "commondir")]
            else:
                continue
            common = git_dir
            if (git_dir / "commondir").is_file():
                common = git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        # HEAD: the branch an `includeIf "onbranch:..."` include follows (a linked worktree's own)
        files = [str(git_dir / "index"), str(common / "info" / "exclude"), str(common / "config")]
        return [*files, str(git_dir / "HEAD"), *pointers]
    return None


# folders git does not ignore, by start folder, the folders asked about and the ignore rules' stamps
_not_ignored: dict[tuple, list[str]] = {}


def _not_git_ignored(start: Path, folders: list[str], rules: dict[str, Stamp]) -> list[str]:
    """Those of ``folders`` (relative to ``start``) that no git ignore rule excludes (all of them when git
    cannot tell). Asked again only when the ignore files, git's index, excludes or config changed (``rules``)."""
    if not folders:
        return []
    key = (str(start), tuple(folders), tuple(rules.items()))
    if (known := _not_ignored.get(key)) is not None:  # another walk's thread may clear it meanwhile
        return known
    stdin = b"".join(os.fsencode(f) + b"\0" for f in folders)
    out = _git(start, ["check-ignore", "-z", "--stdin"], stdin=stdin, ok=(0, 1))  # 1: none is ignored
    if out is None:
        return folders
    ignored = {os.fsdecode(n).rstrip("/") for n in out.split(b"\0") if n}
    if len(_not_ignored) > 64:
        _not_ignored.clear()
    _not_ignored[key] = kept = [f for f in folders if f not in ignored]
    return kept


def _subtree_stamps(top: str, skipped_folder: Callable[[str], bool], rel: str) -> dict[str, Stamp]:
    """The stamps of ``top`` and every folder below it that is not hidden or vendored; a venv's own stamp
    but not below it (it stops being one when its ``pyvenv.cfg`` goes, which changes that stamp)."""
    out: dict[str, Stamp] = {}
    todo = [(top, rel)]
    while todo:
        path, rel = todo.pop()
        out[path] = _stamp(path)
        if skipped_folder(rel):
            continue
        try:
            with os.scandir(path) as entries:
                for e in entries:
                    if _is_dir(e) and not (e.name.startswith(".") or e.name in SKIP_DIRS):
                        todo.append((e.path, f"{rel}/{e.name}"))
        except OSError:
            continue
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


def _git(
    start: Path, args: list[str], *, stdin: bytes | None = None, ok: tuple[int, ...] = (0,)
) -> bytes | None:
    """The output of ``git args`` run in ``start``, paths unquoted and no optional lock taken (a walk must
    not hold up the user's own git); None when git cannot run, runs past GIT_TIMEOUT or exits other than ``ok``."""
    try:
        proc = subprocess.run(
            ["git", "-c", "core.quotePath=false", *args],
            input=stdin,
            cwd=start,
            capture_output=True,
            timeout=GIT_TIMEOUT,
            check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode in ok else None


def _git_files(start: Path) -> list[str] | None:
    """``git ls-files`` in ``start`` (paths relative to it): tracked and not-ignored untracked files;
    None outside a work tree, or when a ``.ignore`` file asks for rules git does not apply."""
    out = _git(start, ["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
    if out is None:
        return None
    # a file both tracked and changed comes twice
    names = {os.fsdecode(n) for n in out.split(b"\0") if n}
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


def _left_out(base: str, kept: Iterable[str]) -> tuple[int, list[str], list[str]]:
    """How many files and folders beside the kept ones were left out (a folder once, not its content);
    the folders holding kept files, and the folders left out (both relative to ``base``)."""
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
    left_folders: list[str] = []
    for folder, names in children.items():
        try:
            with os.scandir(f"{base}/{folder}" if folder else base) as entries:
                for e in entries:
                    if e.name in names:
                        continue
                    is_dir = _is_dir(e)
                    if is_dir:
                        left_folders.append(f"{folder}/{e.name}" if folder else e.name)
                    if not (is_dir and _empty(e.path)):  # an empty folder: nobody ignored anything there
                        left += 1
        except OSError:
            continue
    return left, list(children), left_folders


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _empty(folder: str) -> bool:
    try:
        with os.scandir(folder) as inside:
            return next(inside, None) is None
    except OSError:
        return False
