"""A git worktree per worker: made from what the user sees, read back as a change, kept when unmerged.

Blocking (git runs as a subprocess): the roster calls these in a thread. Commits of tether's own are
made with plumbing (``commit-tree``, ``update-ref``) under a fixed identity.

Git runs on the host, unconfined, so it must never take its repository or config from a file the
worker can write: a sandboxed worker writes its worktree (``.git`` file, ``.gitattributes``), its
worktree's git dir (``commondir``, ``HEAD``, ``index``, ``config.worktree``) and the repository's
objects, refs and logs. Rewriting ``.git`` or ``commondir`` would point git at a config of the
worker's, whose ``filter.<x>.clean``, ``core.fsmonitor`` or hooks then run; so would a
``config.worktree`` (read under ``extensions.worktreeConfig``), with its ``include.path``. So every
git command in a worker's worktree goes through one door, `door`: git is told the repository by
environment — ``GIT_DIR`` a private git dir of tether's own (its ``HEAD`` written from tether's
record), ``GIT_COMMON_DIR`` the root's git dir, ``GIT_WORK_TREE`` the worktree, ``GIT_INDEX_FILE`` a
scratch index in that private dir — so nothing in the worktree's own git dir is read as config and no
``.git`` file is followed. Config then comes from the user alone (system, global, the repository's
``config``), so a ``.gitattributes`` of the worker's can only name a driver the user defined. The
worktree's own index seeds the scratch one only when it is a regular file naming no path outside the
worktree (git reads a raw index unchecked: ``../x`` in it would have ``git add`` read that file), and
a change is read only when every path git names for it is one git would accept (`_sane`). Every git
command, in the root too, runs with `SAFE`: hooks off, no fsmonitor, no automatic gc or maintenance,
no prompt. Nothing tether runs reaches the network (``core.sshCommand``) or runs an external diff
(``diff.external``, textconv: plumbing never does).

Layout: ``<git common dir>/tether-vibe/run-XXXX/`` is one run's folder (owned as the core's scratch
folders are, `tether.procs.private_dir`: a shared lock on its ``.owner`` while the run lives), with
one worktree per worker (``w1``, ...) and its record (``w1.json``: branch, starting commit, the name
of the git dir git gave it). The folder is not writable to a sandboxed worker: the records are
tether's. A folder whose run died (SIGKILL) is swept by the next run of that repository: what each
worktree holds is committed on its branch, the worktree removed, ``git worktree prune`` run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
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
# on every git command tether runs: what could run a program of someone else's is off
SAFE = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
)
# from tether's own environment (set when it runs inside a git hook): they would redirect every command
REPOSITORY_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
)
SYMLINK, SUBMODULE = "120000", "160000"


class GitError(Exception):
    """A git command failed; the message has its stderr."""


def _run(cwd: Path | str, args: Sequence[str], env: dict[str, str] | None, input: bytes | None) -> bytes:
    """The one runner of git: `SAFE`, no prompt, the repository only as ``env`` names it."""
    full_env = {k: v for k, v in os.environ.items() if k not in REPOSITORY_ENV}
    full_env.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **(env or {})})
    try:
        done = subprocess.run(
            ["git", *SAFE, *args],
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


def git(cwd: Path | str, *args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> bytes:
    """Git in the user's own repository (the root, its top, its git dir), found from there. Never in a
    worker's worktree: that is `door`'s."""
    return _run(cwd, args, env, input)


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


# -- a worker's worktree, and the one door to git in it -------------------------------------------------


@attrs.frozen
class Linked:
    """A worktree tether made, as tether recorded it when git made it: never read back from the
    worktree's ``.git`` file or its git dir's ``commondir``, which the worker may rewrite."""

    path: Path  # the worktree
    common: Path  # the repository's git dir
    admin: str | None  # the name of its own git dir in ``<common>/worktrees`` (None: not recorded)

    @property
    def gitdir(self) -> Path | None:
        """Its own git dir (its ``HEAD`` and index, the worker's to write), when recorded."""
        if not self.admin or Path(self.admin).name != self.admin or self.admin in (".", ".."):
            return None
        return self.common / "worktrees" / self.admin


def _made(common: Path, path: Path) -> Linked:
    """The worktree git has just made at ``path`` (nothing has run in it yet): which git dir it got."""
    try:
        text = (path / ".git").read_text()
    except OSError as exc:
        raise GitError(f"git worktree add left no .git file: {exc}") from None
    found = Path(text.removeprefix("gitdir: ").strip()) if text.startswith("gitdir: ") else None
    if found is not None and not found.is_absolute():
        found = (path / found).resolve()
    if found is None or found.parent.resolve() != (common / "worktrees").resolve():
        raise GitError(f"git worktree add gave {path.name} a git dir outside {common / 'worktrees'}")
    return Linked(path, common, found.name)


@attrs.frozen
class Door:
    """Git in a worker's worktree, its repository named by tether (see the module docstring)."""

    tree: Linked
    private: Path  # the git dir of tether's own for these commands: HEAD, the scratch index
    index: Path

    def git(self, *args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> bytes:
        names = {
            "GIT_DIR": str(self.private),
            "GIT_COMMON_DIR": str(self.tree.common),
            "GIT_WORK_TREE": str(self.tree.path),
            "GIT_INDEX_FILE": str(self.index),
        }
        return _run(self.tree.path, args, {**(env or {}), **names}, input)

    def out(self, *args: str, env: dict[str, str] | None = None) -> str:
        return self.git(*args, env=env).decode(errors="surrogateescape").strip()


@contextlib.contextmanager
def door(tree: Linked, head: str, index: Path | None = None) -> Iterator[Door]:
    """The one door to git in a worker's worktree: a private git dir whose ``HEAD`` is ``head`` (a
    commit), the index a scratch one in it (or ``index``), gone afterwards. Its ``commondir`` names
    the repository too (git's refs backend reads that file, not ``GIT_COMMON_DIR``)."""
    with tempfile.TemporaryDirectory(prefix="tether-git-") as private:
        Path(private, "HEAD").write_text(head + "\n")
        Path(private, "commondir").write_text(f"{tree.common}\n")
        yield Door(tree, Path(private), index or Path(private, "index"))


def _copy_regular(source: Path, target: Path) -> bool:
    """Copy ``source`` with its times when it is a regular file (not followed when a symlink, so a FIFO
    or device the worker put there is never read); False when it is not."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return False
        with open(fd, "rb", closefd=False) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        # its time kept: git still rechecks the racily clean entries
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _sane(path: str) -> bool:
    """Whether a path git names is one inside the worktree that git itself would accept (its
    ``verify_path``): no ``..``, ``.`` or empty component, no ``.git`` (as NTFS and HFS spell it too).
    An index or tree object of the worker's may name any other: git reads a raw index unchecked."""
    for part in path.split("/"):
        low = part.lower().rstrip(". ")
        if part in ("", ".", "..") or low in (".git", "git~1"):
            return False
    return True


def _add_all(run: Door, exclude: Sequence[str]) -> str:
    run.git("add", "-A", "--", ".")
    if exclude:
        run.git("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", *exclude)
    return run.out("write-tree")


def _snapshot(run: Door, start: str, exclude: Sequence[str] = ()) -> str:
    """The tree object of what the worktree holds now (tracked and untracked files, not ignored ones).
    The scratch index starts as a copy of the worktree's own (its stat cache spares hashing the files
    that did not change) when every path it names is `_sane` (else ``git add`` would read a file
    outside the worktree for it); when it is missing, odd or git cannot use it (the worker may have
    rewritten it), from the starting commit's tree (``read-tree`` checks the paths)."""
    gitdir = run.tree.gitdir
    if gitdir is not None and _copy_regular(gitdir / "index", run.index):
        try:
            named = run.git("ls-files", "-z", "--cached").decode(errors="surrogateescape").split("\0")
            if all(_sane(p) for p in named if p):
                return _add_all(run, exclude)
        except GitError:
            pass
        with contextlib.suppress(OSError):
            run.index.unlink()
    run.git("read-tree", start)
    return _add_all(run, exclude)


def start_point(top: Path) -> tuple[str, bool]:
    """A commit holding HEAD plus the user's uncommitted changes, and whether there were any: a
    snapshot of the user's work tree through a scratch copy of its index (the real index, the user's
    staging, is never touched)."""
    found, head, head_tree = out(
        top, "rev-parse", "--absolute-git-dir", "HEAD^{commit}", "HEAD^{tree}"
    ).split("\n")
    gitdir = Path(found)
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
        git(top, "add", "-A", "--", ".", env=env)
        tree = out(top, "write-tree", env=env)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
    if tree == head_tree:
        return head, False
    message = "tether vibe: the uncommitted changes a worker started from"
    return out(top, "commit-tree", tree, "-p", head, "-m", message, env=IDENTITY), True


def links_in(work: Path) -> list[str]:
    return [n for n in LINKED if (work / n).is_symlink()]


def _record(folder: Path, name: str, branch: str | None, start: str | None, tree: Linked | None) -> None:
    path = tree.path.name if tree is not None else name
    record = {"branch": branch, "start": start, "path": path, "admin": tree.admin if tree else None}
    (folder / f"{name}.json").write_text(json.dumps(record))


def prepare_spare(repo: Repo, folder: Path, name: str) -> Linked:
    """A checkout of HEAD made ahead of the next spawn (writing the files is most of a worktree's cost);
    its record (no branch) lets the sweep remove it."""
    path = folder / name
    _record(folder, name, None, None, None)
    git(repo.top, "-c", "checkout.workers=0", "worktree", "add", "-q", "--detach", str(path), "HEAD")
    spare = _made(repo.common, path)
    _record(folder, name, None, None, spare)
    return spare


def _write_head(gitdir: Path, branch: str) -> None:
    fd, temp = tempfile.mkstemp(prefix="HEAD.tether-", dir=gitdir)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(f"ref: refs/heads/{branch}\n")
        os.replace(temp, gitdir / "HEAD")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def create(
    repo: Repo, root: Path, folder: Path, worker_id: str, branch: str, spare: Linked | None = None
) -> tuple[Linked, str, bool, list[str]]:
    """A worktree for a worker: (it, the starting commit, whether it carries uncommitted changes, the
    environments linked in). The record beside it names the branch, the start and its git dir for the
    sweep. With a ``spare`` (see `prepare_spare`), that checkout is taken: only the files that differ
    are written (through the door, into its own index; then its HEAD names the branch)."""
    start, dirty = start_point(repo.top)
    if spare is not None:
        tree = spare
        gitdir = spare.gitdir
        if gitdir is None:
            raise GitError("the spare checkout has no recorded git dir")
        with door(spare, start, index=gitdir / "index") as run:
            run.git("checkout", "-q", "-f", "-B", branch, start)
        _write_head(gitdir, branch)
    else:
        path = folder / worker_id
        # checkout.workers=0: git checks the files out in parallel (on as many cores as there are)
        git(repo.top, "-c", "checkout.workers=0", "worktree", "add", "-q", "-B", branch, str(path), start)
        tree = _made(repo.common, path)
    _record(folder, worker_id, branch, start, tree)
    if spare is not None:
        with contextlib.suppress(OSError):
            (folder / f"{spare.path.name}.json").unlink()
    linked = []
    work_root = tree.path / repo.sub if repo.sub else tree.path
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
    return tree, start, dirty, linked


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


def changes(tree: Linked, start: str) -> tuple[str, list[Change]]:
    """What the worktree changed against its start: (the tree it holds now, the changed files)."""
    with door(tree, start) as run:
        now = _snapshot(run, start, links_in(tree.path))
        # one diff-tree: the raw records (":modes blobs status" NUL path NUL), then the numstat ones
        # ("added TAB deleted TAB path" NUL)
        text = run.git("diff-tree", "-r", "--no-renames", "-z", "--raw", "--numstat", start, now)
    fields = iter(text.split(b"\0"))
    raw: list[tuple[str, str]] = []
    numbers: dict[str, tuple[int | None, int | None]] = {}
    for item in fields:
        if item.startswith(b":"):
            raw.append((item[1:].decode(), next(fields).decode(errors="surrogateescape")))
        elif item:
            added, deleted, path = item.decode(errors="surrogateescape").split("\t", 2)
            numbers[path] = (int(added) if added != "-" else None, int(deleted) if deleted != "-" else None)
    odd = sorted(p for _, p in raw if not _sane(p))
    if odd:  # its start's objects were rewritten (the repository's objects are the worker's to write)
        raise GitError(f"git names paths outside the worktree for it ({', '.join(odd[:3])}); not read")
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
    return now, found


# -- keeping and removing ---------------------------------------------------------------------------


def keep(tree: Linked, branch: str, start: str) -> bool:
    """Commit what the worktree holds on its branch (fixed identity, no hooks); True when the branch
    now carries work the start did not (it is kept), False when there was none (the branch is deleted).
    The branch is the one tether recorded, whatever the worktree's HEAD names now; made again from
    the start when it is gone."""
    ref = f"refs/heads/{branch}"
    with door(tree, start) as run:
        now = _snapshot(run, start, links_in(tree.path))
        start_tree = _tree_of(run, start)
        try:
            tip = run.out("rev-parse", "-q", "--verify", f"{ref}^{{commit}}")
            tip_tree = _tree_of(run, tip)
        except GitError:
            tip, tip_tree = "", None
        if now != tip_tree:
            message = "tether vibe: a worker's unmerged work, kept when its run closed"
            commit = run.out("commit-tree", now, "-p", tip or start, "-m", message, env=IDENTITY)
            run.git("update-ref", ref, commit, tip)
    return now != start_tree


def _tree_of(run: Door, commit: str) -> str:
    """A commit's tree id, from the commit alone (``^{tree}`` would read the tree object too, which
    the worker may have rewritten: objects are its to write)."""
    head = run.git("cat-file", "commit", commit).split(b"\n", 1)[0].decode(errors="replace")
    if not head.startswith("tree "):
        raise GitError(f"commit {commit[:12]} names no tree")
    return head[len("tree ") :].strip()


def remove(top: Path, tree: Linked, branch: str | None) -> None:
    """Remove a worktree and its own git dir (as recorded: neither its ``.git`` file nor that git dir
    is read), and its branch when given. No symlink in it is followed (its links go first anyway)."""
    for name in LINKED:
        link = tree.path / name
        if link.is_symlink():
            link.unlink()
    shutil.rmtree(tree.path, ignore_errors=True)
    gitdir = tree.gitdir
    if gitdir is not None and not gitdir.is_symlink():
        shutil.rmtree(gitdir, ignore_errors=True)
    else:  # not recorded: git's entry goes once the worktree is gone
        prune(top)
    if branch is not None:
        with contextlib.suppress(GitError):
            git(top, "branch", "-q", "-D", branch)


def prune(top: Path) -> None:
    git(top, "worktree", "prune")


def sweep_folder(path: str) -> None:
    """The sweep's step for a run folder whose run died: keep each worktree's work on its branch,
    remove the worktree, prune. Raises when something could not be kept (the folder then stays)."""
    folder = Path(path)
    common = folder.parent.parent
    for record in sorted(folder.glob("*.json")):
        info = json.loads(record.read_text())
        name = Path(str(info.get("path") or record.stem)).name
        tree = Linked(folder / name, common, info.get("admin"))
        if not tree.path.is_dir():
            pass  # never made, or already removed
        elif info["branch"] is None:  # a spare checkout: nothing of anyone's in it
            remove(common, tree, None)
        else:
            kept = keep(tree, info["branch"], info["start"])
            remove(common, tree, None if kept else info["branch"])
            if kept:
                log.warning(
                    "vibe: kept a worker's unmerged work on branch %s (its run had died)", info["branch"]
                )
        record.unlink()
    prune(common)


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
