"""vibe_merge with the command roster: a worker's changes, landed in the root, or discarded.

`plan` reads what the worker changed in its worktree against its starting point and checks each file
against the root: a file the root changed since the worker began is refused (a merge never
overwrites the root's own changes; there is no merging of hunks), one that already matches is left
alone. `apply` writes the plan through the run's write path (all or nothing, each target checked
again as the plan saw it); once nothing of the worker's is left to apply, its worktree and branch go.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether.tools import ToolError

from tether_vibe import worktree
from tether_vibe.isolation import relative, summary

if TYPE_CHECKING:
    from tether.atomic import Snapshot
    from tether.run import Run

    from tether_vibe.isolation import WorkerTrees
    from tether_vibe.worker import Worker


@attrs.frozen
class MergePlan:
    """What vibe_merge will do for one worker, checked against the root when it was made."""

    worker_id: str
    action: str
    writes: dict[Path, bytes | None]
    expect: list[Snapshot]  # each target as the worker found it
    applied: list[tuple[str, str, bool]]  # (status, path relative to the root, made executable)
    same: list[str]  # already as the worker left them in the root
    rest: list[str]  # changed by the worker, not chosen by paths
    outside: list[str] = attrs.field(factory=list)  # changed by the worker outside the run's root


def _regular_bytes(path: Path) -> bytes | bool | None:
    """A file's content; None when there is none; False when something else stands there (a folder, a FIFO)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return False
    return path.read_bytes()


def plan(
    run: Run, trees: WorkerTrees, worker: Worker, action: str, paths: tuple[str, ...] | None
) -> MergePlan:
    """What `apply` will do, checked now (blocking: git runs). Raises a ToolError naming the files
    when the merge is refused: the worker is running, or the root changed a file the worker changed."""
    if worker.status.active:
        raise ToolError(
            f"worker {worker.id} is still {worker.status.value}; its tree may change under a merge. "
            f"vibe_wait '{worker.id}' until it is done, or vibe_kill it, then merge.",
            code="worker_running",
            worker_id=worker.id,
        )
    if worker.tree is None or worker.start is None:
        why = (
            "it ran in the root itself (isolation none): its changes are already there"
            if worker.isolation != "worktree"
            else "its worktree was already merged or discarded"
        )
        raise ToolError(
            f"worker {worker.id} has no worktree to merge: {why}.",
            code="no_worktree",
            worker_id=worker.id,
        )
    if action == "discard":
        return MergePlan(worker.id, action, {}, [], [], [], [])
    repo = trees.repo
    assert repo is not None
    made = _plan(run, worker, repo, action, paths, fresh=False) or _plan(
        run, worker, repo, action, paths, fresh=True
    )
    assert made is not None  # a fresh plan is made or refused
    return made


def _plan(
    run: Run, worker: Worker, repo: worktree.Repo, action: str, paths: tuple[str, ...] | None, *, fresh: bool
) -> MergePlan | None:
    """The plan from what the worker's last run left (None when its worktree changed since: then
    again with ``fresh``, from a new snapshot)."""
    assert worker.tree is not None and worker.start is not None
    found = worker.found
    if fresh or found is None:
        try:
            _, found = worktree.changes(worker.tree, worker.start)
        except (worktree.GitError, OSError) as exc:
            raise ToolError(
                f"what worker {worker.id} changed could not be read: {exc}. Nothing was written. Look "
                f"at its branch {worker.branch} (its work is committed there when the run closes), or "
                "vibe_merge it with action 'discard'.",
                code="unreadable",
                worker_id=worker.id,
            ) from None
        worker.found, worker.changes = found, summary(repo, found)
    inside: dict[str, worktree.Change] = {}
    outside = []
    for change in found:
        rel = relative(change.path, repo.sub)
        if rel is None:
            outside.append(change.path)
        else:
            inside[rel] = change
    chosen = dict(inside)
    if paths is not None:
        wanted = {run.relpath(run.resolve_path(p)) for p in paths}
        unknown = sorted(wanted - set(inside))
        if unknown:
            have = ", ".join(sorted(inside)) or "none"
            raise ToolError(
                f"worker {worker.id} did not change {', '.join(unknown)}; the files it changed: {have}. "
                "Give paths as vibe_wait lists them, or leave paths out to apply all.",
                code="not_changed",
                paths=unknown,
                changed=sorted(inside),
            )
        chosen = {p: c for p, c in inside.items() if p in wanted}
    odd = (worktree.SYMLINK, worktree.SUBMODULE)
    kinds = sorted(p for p, c in chosen.items() if c.new_mode in odd or c.old_mode in odd)
    if kinds:
        raise ToolError(
            f"worker {worker.id} changed {', '.join(kinds)} as a symlink or submodule, which a merge does "
            f"not carry; apply the other files with paths, and that change by hand from its branch "
            f"{worker.branch}.",
            code="unsupported_kind",
            paths=kinds,
        )
    from tether.atomic import Snapshot

    writes: dict[Path, bytes | None] = {}
    expect: list[Snapshot] = []
    applied, same, conflicts = [], [], []
    for rel, change in sorted(chosen.items()):
        target = run.root / rel
        new = None
        if change.new_blob is not None:  # the worker's file, checked against the blob it was seen as
            try:
                new = (worker.tree.path / change.path).read_bytes()
            except OSError:
                new = None
            if new is None or worktree.blob_id(new, change.new_blob) != change.new_blob:
                if fresh:
                    raise ToolError(
                        f"worker {worker.id}'s worktree changes under the merge ({rel}); call vibe_merge again.",
                        code="moved",
                        paths=[rel],
                    )
                return None
        now = _regular_bytes(target)
        if now is False:
            conflicts.append(rel)
            continue
        like = change.old_blob or change.new_blob or ""
        now_id = worktree.blob_id(now, like) if isinstance(now, bytes) else None
        if now_id == change.new_blob:
            same.append(rel)
        elif now_id == change.old_blob:
            writes[target] = new
            expect.append(Snapshot.of(target, now if isinstance(now, bytes) else None))
            applied.append((change.status, rel, change.new_mode == "100755" and change.old_mode != "100755"))
        else:
            conflicts.append(rel)
    if conflicts:
        raise ToolError(
            f"refused: {len(conflicts)} file(s) that worker {worker.id} changed were also changed in the "
            f"root since it started: {', '.join(conflicts)}. Nothing was written (a merge never overwrites "
            "the root's own changes). Apply the others with paths, or vibe_send the worker the current "
            f"state to redo them, or look at its branch {worker.branch}.",
            code="conflict",
            paths=conflicts,
            worker_id=worker.id,
        )
    rest = sorted(set(inside) - set(chosen))
    return MergePlan(worker.id, action, writes, expect, applied, same, rest, outside)


async def apply(run: Run, trees: WorkerTrees, worker: Worker, plan: MergePlan) -> dict[str, Any]:
    """Carry out a plan of `plan`: the writes through the run's write path (all or nothing), then the
    worktree and branch go when nothing of the worker's is left to apply."""
    if worker.status.active or worker.tree is None:
        raise ToolError(f"worker {worker.id} changed state meanwhile; call vibe_merge again", code="moved")
    if plan.action == "discard":
        trees.forget(worker)
        worker.note = "its worktree and branch were discarded"
        return {"removed": True}
    if plan.writes:
        from tether.atomic import ChangedSince

        try:
            await run.write_files(plan.writes, expect=plan.expect)
        except ChangedSince as exc:
            moved = sorted(run.relpath(p) for p in exc.paths)
            raise ToolError(
                f"refused: {', '.join(moved)} changed in the root while the merge was prepared; nothing was "
                "written. Call vibe_merge again.",
                code="conflict",
                paths=moved,
                worker_id=worker.id,
            ) from None
        for _, rel, executable in plan.applied:
            if executable:
                path = run.root / rel
                os.chmod(path, os.stat(path).st_mode | 0o111)
    removed = not plan.rest and not plan.outside
    if removed:
        trees.forget(worker)
        worker.note = "its changes were applied; its worktree and branch were removed"
    return {"removed": removed}
