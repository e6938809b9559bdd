"""A git worktree per worker: made from what the user sees, read back as a change, kept when unmerged.

Blocking (git runs as a subprocess): the roster calls these in a thread. Every git command runs
with hooks off (``core.hooksPath=/dev/null``) and no prompt; commits of tether's own are made with
plumbing (``commit-tree``, ``update-ref``) under a fixed identity, so no hook of the project runs.

Layout: ``<git common dir>/tether-vibe/run-XXXX/`` is one run's folder (owned as the core's scratch
folders are, `tether.procs.private_dir`: a shared lock on its ``.owner`` while the run lives), with
one worktree per worker (``w1``, ...) and its record (``w1.json``: branch, starting commit). A folder
whose run died (SIGKILL) is swept by the next run of that repository: what each worktree holds is
committed on its branch, the worktree removed, ``git worktree prune`` run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import attrs
from tether import procs

log = logging.getLogger("tether.vibe")

FOLDER = "tether-vibe"  # in the git common dir
PREFIX = "run-"
BRANCHES = "tether/vibe"
LINKED = (".venv", "venv", "node_modules")  # ignored environments a worker's commands need: linked in
IDENTITY = {
    "GIT_AUTHOR_NAME": "tether vibe",
    "GIT_AUTHOR_EMAIL": "vibe@tether.invalid",
    "GIT_COMMITTER_NAME": "tether vibe",
    "GIT_COMMITTER_EMAIL": "vibe@tether.invalid",
}
GIT_TIMEOUT = 120.0
NO_HOOKS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
SYMLINK, SUBMODULE = "120000", "160000"


class GitError(Exception):
    """A git command failed; the message has its stderr."""


def git(cwd: Path | str, *args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> bytes:
    full_env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **(env or {})}
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR"):
        if env is None or key not in env:
            full_env.pop(key, None)
    try:
        done = subprocess.run(
            ["git", *NO_HOOKS, *args],
            cwd=cwd,
            env=full_env,
            input=input,
            capture_output=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]}: {exc}") from None
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {err[-1] if err else f'exit {done.returncode}'}")
    return done.stdout


def out(cwd: Path | str, *args: str, env: dict[str, str] | None = None) -> str:
    return git(cwd, *args, env=env).decode(errors="surrogateescape").strip()


@attrs.frozen
class Repo:
    top: Path  # the work tree's top
    common: Path  # the git common dir (where worktrees and the tether-vibe folder live)
    sub: str  # the run's root relative to top ("" when it is the top)


def find_repo(root: Path) -> tuple[Repo | None, str]:
    """The repository the root is in, when it has a commit; else None and why not (for the answer)."""
    try:
        top, common = out(root, "rev-parse", "--show-toplevel", "--git-common-dir").splitlines()
    except (GitError, ValueError):
        return None, "the root is not in a git repository"
    try:
        git(root, "rev-parse", "-q", "--verify", "HEAD^{commit}")
    except GitError:
        return None, "the root's git repository has no commit yet"
    top_path = Path(top).resolve()
    common_path = (root / common).resolve() if not os.path.isabs(common) else Path(common).resolve()
    sub = root.resolve().relative_to(top_path).as_posix()
    return Repo(top_path, common_path, "" if sub == "." else sub), ""


def common_dir_quick(root: Path) -> Path | None:
    """The git common dir by stat alone where the root or a parent holds a ``.git`` folder (no git run)."""
    for folder in (root, *root.parents):
        dot = folder / ".git"
        if dot.is_dir():
            return dot
        if dot.exists():  # a file: a linked worktree; ask git
            try:
                common = out(folder, "rev-parse", "--git-common-dir")
            except GitError:
                return None
            return (folder / common).resolve()
    return None


# -- snapshots of a work tree --------------------------------------------------------------------------


def git_dir(work: Path) -> Path:
    """A work tree's own git dir: ``.git`` itself, or where a linked worktree's ``.git`` file points."""
    dot = work / ".git"
    if dot.is_dir():
        return dot
    try:
        text = dot.read_text()
    except OSError:
        text = ""
    if text.startswith("gitdir: "):
        found = Path(text[len("gitdir: ") :].strip())
        return found if found.is_absolute() else (work / found).resolve()
    return Path(out(work, "rev-parse", "--absolute-git-dir"))


def snapshot(work: Path, exclude: Sequence[str] = ()) -> str:
    """The tree object of what ``work`` holds now (tracked and untracked files, not ignored ones),
    through a scratch copy of its index (the real index, the user's staging, is never touched)."""
    gitdir = git_dir(work)
    try:
        fd, scratch = tempfile.mkstemp(prefix="index.tether-", dir=gitdir)
    except OSError:  # a read-only git dir: the scratch index goes to the temporary directory
        fd, scratch = tempfile.mkstemp(prefix="index.tether-")
    os.close(fd)
    try:
        index = gitdir / "index"
        if index.exists():  # its stat cache spares hashing the files that did not change; its time
            shutil.copy2(index, scratch)  # kept, so git still rechecks the racily clean entries
        else:
            os.unlink(scratch)
        env = {"GIT_INDEX_FILE": scratch}
        git(work, "add", "-A", "--", ".", env=env)
        if exclude:
            git(work, "rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", *exclude, env=env)
        return out(work, "write-tree", env=env)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(scratch)


def start_point(top: Path) -> tuple[str, bool]:
    """A commit holding HEAD plus the user's uncommitted changes, and whether there were any."""
    head, head_tree = out(top, "rev-parse", "HEAD^{commit}", "HEAD^{tree}").split()
    tree = snapshot(top)
    if tree == head_tree:
        return head, False
    message = "tether vibe: the uncommitted changes a worker started from"
    return out(top, "commit-tree", tree, "-p", head, "-m", message, env=IDENTITY), True


def links_in(work: Path) -> list[str]:
    return [n for n in LINKED if (work / n).is_symlink()]


def prepare_spare(repo: Repo, folder: Path, name: str) -> Path:
    """A checkout of HEAD made ahead of the next spawn (writing the files is most of a worktree's cost);
    its record (no branch) lets the sweep remove it."""
    path = folder / name
    (folder / f"{name}.json").write_text(json.dumps({"branch": None, "start": None, "path": name}))
    git(repo.top, "-c", "checkout.workers=0", "worktree", "add", "-q", "--detach", str(path), "HEAD")
    return path


def create(
    repo: Repo, root: Path, folder: Path, worker_id: str, branch: str, spare: Path | None = None
) -> tuple[Path, str, bool, list[str]]:
    """A worktree for a worker: (its path, the starting commit, whether it carries uncommitted changes,
    the environments linked in). The record beside it names the branch and the start for the sweep.
    With a ``spare`` (see `prepare_spare`), that checkout is taken: only the files that differ are written."""
    start, dirty = start_point(repo.top)
    if spare is not None:
        path = spare
        git(path, "checkout", "-q", "-f", "-B", branch, start)
    else:
        path = folder / worker_id
        # checkout.workers=0: git checks the files out in parallel (on as many cores as there are)
        git(repo.top, "-c", "checkout.workers=0", "worktree", "add", "-q", "-B", branch, str(path), start)
    record = {"branch": branch, "start": start, "path": path.name}
    (folder / f"{worker_id}.json").write_text(json.dumps(record))
    if spare is not None:
        with contextlib.suppress(OSError):
            (folder / f"{spare.name}.json").unlink()
    linked = []
    work_root = path / repo.sub if repo.sub else path
    for name in LINKED:
        source = root / name
        if not source.is_dir() or os.path.lexists(work_root / name):
            continue
        try:
            git(root, "check-ignore", "-q", "--", name)
        except GitError:
            continue  # not ignored: it is in the tree (or would be added to the branch)
        os.symlink(source, work_root / name)
        linked.append((f"{repo.sub}/" if repo.sub else "") + name)
    return path, start, dirty, linked


@attrs.frozen
class Change:
    status: str  # A added, M modified, D deleted, T type changed
    path: str  # relative to the repository's top
    old_mode: str
    new_mode: str
    old_blob: str | None
    new_blob: str | None
    added: int | None  # lines; None for a binary file
    deleted: int | None


def is_zero(blob: str) -> bool:
    return not blob.strip("0")


def blob_id(data: bytes, like: str) -> str:
    """The git object id of a blob with this content, in the hash of ``like`` (sha1, or sha256 for a
    repository in that object format): comparing it says whether a file holds that blob, without git."""
    import hashlib

    algo = hashlib.sha256 if len(like) == 64 else hashlib.sha1
    return algo(b"blob %d\0" % len(data) + data).hexdigest()


def changes(work: Path, start: str) -> tuple[str, list[Change]]:
    """What the worktree changed against its start: (the tree it holds now, the changed files)."""
    tree = snapshot(work, [*links_in(work)])
    # one diff-tree: the raw records (":modes blobs status" NUL path NUL), then the numstat ones
    # ("added TAB deleted TAB path" NUL)
    fields = iter(
        git(work, "diff-tree", "-r", "--no-renames", "-z", "--raw", "--numstat", start, tree).split(b"\0")
    )
    raw: list[tuple[str, str]] = []
    numbers: dict[str, tuple[int | None, int | None]] = {}
    for item in fields:
        if item.startswith(b":"):
            raw.append((item[1:].decode(), next(fields).decode(errors="surrogateescape")))
        elif item:
            added, deleted, path = item.decode(errors="surrogateescape").split("\t", 2)
            numbers[path] = (int(added) if added != "-" else None, int(deleted) if deleted != "-" else None)
    found = []
    for head, path in raw:
        old_mode, new_mode, old_blob, new_blob, status = head.split(" ")
        added, deleted = numbers.get(path, (None, None))
        found.append(
            Change(
                status[0],
                path,
                old_mode,
                new_mode,
                None if is_zero(old_blob) else old_blob,
                None if is_zero(new_blob) else new_blob,
                added,
                deleted,
            )
        )
    return tree, found


# -- keeping and removing ---------------------------------------------------------------------------


def keep(work: Path, branch: str, start: str) -> bool:
    """Commit what the worktree holds on its branch (fixed identity, no hooks); True when the branch
    now carries work the start did not (it is kept), False when there was none (the branch is deleted)."""
    tree = snapshot(work, links_in(work))
    tip, tip_tree, start_tree = out(
        work, "rev-parse", "HEAD^{commit}", "HEAD^{tree}", f"{start}^{{tree}}"
    ).split()
    if tree != tip_tree:
        message = "tether vibe: a worker's unmerged work, kept when its run closed"
        commit = out(work, "commit-tree", tree, "-p", tip, "-m", message, env=IDENTITY)
        git(work, "update-ref", f"refs/heads/{branch}", commit, tip)
    return tree != start_tree


def remove(top: Path, work: Path, branch: str | None) -> None:
    """Remove a worktree (its links first, so nothing is followed), and its branch when given."""
    for name in LINKED:
        link = work / name
        if link.is_symlink():
            link.unlink()
    try:
        git(top, "worktree", "remove", "--force", "--force", str(work))
    except GitError:
        shutil.rmtree(work, ignore_errors=True)
        git(top, "worktree", "prune")
    if branch is not None:
        with contextlib.suppress(GitError):
            git(top, "branch", "-q", "-D", branch)


def sweep_folder(path: str) -> None:
    """The sweep's step for a run folder whose run died: keep each worktree's work on its branch,
    remove the worktree, prune. Raises when something could not be kept (the folder then stays)."""
    folder = Path(path)
    common = folder.parent.parent
    for record in sorted(folder.glob("*.json")):
        info = json.loads(record.read_text())
        work = folder / info.get("path", record.stem)
        if info["branch"] is None:  # a spare checkout: nothing of anyone's in it
            if (work / ".git").is_file():
                remove(common, work, None)
        elif (work / ".git").is_file():
            kept = keep(work, info["branch"], info["start"])
            remove(common, work, None if kept else info["branch"])
            if kept:
                log.warning(
                    "vibe: kept a worker's unmerged work on branch %s (its run had died)", info["branch"]
                )
        record.unlink()
    git(common, "worktree", "prune")


def sweep(common: Path) -> None:
    """Sweep the run folders of dead runs in this repository (see `sweep_folder`)."""
    base = common / FOLDER
    if base.is_dir():
        procs.sweep_stale(PREFIX, str(base), sweep_folder)


def run_folder(common: Path) -> Path:
    """A new run folder in the repository (sweeping dead runs' first), owned by this process."""
    base = common / FOLDER
    base.mkdir(mode=0o700, exist_ok=True)
    return Path(procs.private_dir(PREFIX, str(base), sweep_folder))


def close_folder(folder: Path) -> None:
    procs.release(str(folder))
    shutil.rmtree(folder, ignore_errors=True)


def kept_branches(top: Path, own_prefix: str) -> list[str]:
    """Branches of earlier runs' workers left with unmerged work."""
    try:
        text = out(top, "for-each-ref", "--format=%(refname:short)", f"refs/heads/{BRANCHES}/")
    except GitError:
        return []
    return [b for b in text.splitlines() if b and not b.startswith(own_prefix)]
