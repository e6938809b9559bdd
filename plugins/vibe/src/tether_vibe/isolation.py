"""Where a worker of the command roster works: a git worktree of its own, or the run's root itself.

The roster's side of `tether_vibe.worktree` (which runs git): the repository, found on the first
spawn; this run's folder of worktrees in it; a worker's worktree, made on a branch from HEAD plus the
user's uncommitted changes, from a spare checkout of HEAD made in the background meanwhile; what a
worker changed there, read when its run ends; a merged or discarded worktree, removed in the
background; and at the run's close every worktree removed, its unmerged work first committed on its
branch, which is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.tools import ToolError

from tether_vibe import worktree

if TYPE_CHECKING:
    from tether.run import Run

    from tether_vibe.worker import Worker

log = logging.getLogger("tether.vibe")


def relative(path: str, sub: str) -> str | None:
    """A path git names (relative to the repository's top) relative to the run's root, which is
    ``sub`` below the top; None when it is outside the root."""
    if not sub:
        return path
    return path[len(sub) + 1 :] if path.startswith(sub + "/") else None


def summary(repo: worktree.Repo, found: list[worktree.Change]) -> tuple[dict[str, Any], ...]:
    """What a worker changed, as `WorkerInfo.changes` gives it (paths relative to the root)."""
    rows = []
    for c in found:
        rel = relative(c.path, repo.sub)
        rows.append(
            {
                "status": c.status,
                "path": rel if rel is not None else f"(outside the root) {c.path}",
                "added": c.added,
                "deleted": c.deleted,
            }
        )
    return tuple(rows)


class WorkerTrees:
    """The worktrees of one run's workers, in the repository the run's root is in."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._found: tuple[worktree.Repo | None, str] | None = None  # the repository, or why none
        self.folder: Path | None = None  # this run's folder of worktrees in the repository
        self._cleanups: set[asyncio.Future[None]] = set()  # worktrees being removed after a merge or discard
        self._spare: asyncio.Future[worktree.Linked] | None = None  # a checkout of HEAD for the next spawn
        self._spares = itertools.count(1)
        self._orphan_spares: list[worktree.Linked] = []  # spares that could not be taken: removed at close

    @property
    def repo(self) -> worktree.Repo | None:
        """The repository, once a spawn looked for it (None: not looked for yet, or there is none)."""
        return self._found[0] if self._found else None

    @property
    def branch_prefix(self) -> str:
        return f"{worktree.BRANCHES}/{self.run.id}/"

    async def choose(self, asked: str | None, default: str) -> tuple[str, str]:
        """A worker's isolation and, when it is not the asked or usual one, why (for the answer)."""
        wanted = asked or default
        if wanted == "none":
            return "none", ""
        if self._found is None:
            self._found = await asyncio.to_thread(worktree.find_repo, self.run.root)
        repo, why = self._found
        if repo is not None:
            return "worktree", ""
        if wanted == "worktree":
            raise ToolError(
                f"isolation 'worktree' needs a git repository with a commit, and {why}. Use isolation 'none' "
                "(the worker then works in the root itself), or make the root a repository with a commit.",
                code="no_repository",
            )
        return "none", f"it works in the root itself (isolation none): {why}"

    async def make(self, worker: Worker) -> bool:
        """The worker's worktree, made when it is isolated and has none (whether one was made)."""
        if worker.isolation != "worktree" or worker.tree is not None:
            return False
        if worker.cleanup is not None:  # its previous worktree (same path, same branch) must be gone
            await asyncio.gather(worker.cleanup, return_exceptions=True)
        spare = self._take_spare()
        try:
            await asyncio.to_thread(self._make, worker, spare)
        except (worktree.GitError, OSError) as exc:
            if spare is not None:
                self._orphan_spares.append(spare)
            raise ToolError(
                f"the worker's git worktree could not be made: {exc}. Use isolation 'none' to run it in "
                "the root itself.",
                code="worktree_failed",
            ) from None
        return True

    def _make(self, worker: Worker, spare: worktree.Linked | None) -> None:
        repo = self.repo
        assert repo is not None
        if self.folder is None:
            self.folder = worktree.run_folder(repo.common)
        branch = f"{self.branch_prefix}{worker.id}"
        tree, start, dirty, linked = worktree.create(
            repo, self.run.root, self.folder, worker.id, branch, spare
        )
        worker.tree, worker.start, worker.branch = tree, start, branch
        worker.changes = ()
        parts = [f"it works in a git worktree of its own on branch {branch}, from HEAD"]
        parts.append(" plus your uncommitted changes" if dirty else " (no uncommitted changes)")
        if linked:
            parts.append(f"; linked in (not copied, not on the branch): {', '.join(linked)}")
        worker.note = "".join(parts)

    def _take_spare(self) -> worktree.Linked | None:
        """The spare checkout when it is ready (a spare still being made is not waited for)."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        if not spare.done():
            self._spare = spare
            return None
        if spare.cancelled() or spare.exception() is not None:
            return None
        return spare.result()

    def next_spare(self) -> None:
        """Make the next worktree's checkout in the background, while this worker works."""
        repo = self.repo
        if self._spare is not None or repo is None or self.folder is None:
            return
        folder, name = self.folder, f"spare-{next(self._spares)}"
        self._spare = asyncio.ensure_future(asyncio.to_thread(worktree.prepare_spare, repo, folder, name))

    async def refresh(self, worker: Worker) -> None:
        """Read what the worker's run left in its worktree (for its answers, and for a merge)."""
        repo = self.repo
        if worker.tree is None or worker.start is None or repo is None:
            return
        try:
            _, found = await asyncio.to_thread(worktree.changes, worker.tree, worker.start)
        except (worktree.GitError, OSError) as exc:
            worker.changes = None
            worker.note = f"what it changed could not be read: {exc}"
            return
        worker.found, worker.changes = found, summary(repo, found)

    def forget(self, worker: Worker) -> None:
        """Let go of a merged or discarded worktree now; git removes it and its branch in the background
        (the worker's next worktree, and the run's close, wait for that)."""
        repo = self.repo
        if worker.tree is None or repo is None:
            return
        tree, branch, record = (
            worker.tree,
            worker.branch,
            (self.folder or worker.tree.path.parent) / f"{worker.id}.json",
        )
        worker.tree = worker.start = worker.branch = None
        worker.found = None

        def remove() -> None:
            worktree.remove(repo.top, tree, branch)
            with contextlib.suppress(OSError):
                record.unlink()

        task = asyncio.ensure_future(asyncio.to_thread(remove))
        worker.cleanup = task
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    def drop(self, worker: Worker, *, delete_branch: bool) -> None:
        """Remove the worker's worktree now (blocking), and its branch with ``delete_branch``."""
        repo = self.repo
        if worker.tree is None or repo is None:
            return
        worktree.remove(repo.top, worker.tree, worker.branch if delete_branch else None)
        if self.folder is not None:
            with contextlib.suppress(OSError):
                (self.folder / f"{worker.id}.json").unlink()
        worker.tree = worker.start = None
        if delete_branch:
            worker.branch = None

    async def kept(self) -> list[str]:
        """Branches earlier runs of this repository kept with a worker's unmerged work."""
        repo = self.repo
        if repo is None:
            repo, _ = await asyncio.to_thread(worktree.find_repo, self.run.root)
        if repo is None:
            return []
        return await asyncio.to_thread(worktree.kept_branches, repo.top, self.branch_prefix)

    async def aclose(self, workers: Iterable[Worker]) -> None:
        """At the run's close, once the workers are stopped: the removals under way end, then each
        worktree is removed, its unmerged work first committed on its branch, which is kept."""
        await asyncio.gather(*self._cleanups, return_exceptions=True)
        if self._spare is not None:
            await asyncio.gather(self._spare, return_exceptions=True)
            spare = self._take_spare()
            if spare is not None:
                self._orphan_spares.append(spare)
        await asyncio.to_thread(self._close, list(workers))

    def _close(self, workers: list[Worker]) -> None:
        repo = self.repo
        for spare in self._orphan_spares:
            if repo is not None and self.folder is not None:
                with contextlib.suppress(worktree.GitError, OSError):
                    worktree.remove(repo.top, spare, None)
                with contextlib.suppress(OSError):
                    (self.folder / f"{spare.path.name}.json").unlink()
        for worker in workers:
            if worker.tree is None or worker.start is None or worker.branch is None:
                continue
            try:
                kept = worktree.keep(worker.tree, worker.branch, worker.start)
                branch = worker.branch
                self.drop(worker, delete_branch=not kept)
                if kept:
                    log.warning(
                        "vibe: worker %s's unmerged work is kept, committed on branch %s", worker.id, branch
                    )
            except (worktree.GitError, OSError):
                log.warning(
                    "vibe: could not keep worker %s's worktree %s", worker.id, worker.tree.path, exc_info=True
                )
        if self.folder is not None:
            if repo is not None:
                with contextlib.suppress(worktree.GitError, OSError):
                    worktree.prune(repo.top)
            if not any(self.folder.glob("*.json")):  # what could not be kept stays for the next sweep
                worktree.close_folder(self.folder)
