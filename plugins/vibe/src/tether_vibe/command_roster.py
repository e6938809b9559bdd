"""The built-in roster: each worker is a process running the command configured for its tier.

The worker's briefing (the brief, then every message added by vibe_send) is written to its stdin;
its stdout is its result (the bounded tail of it), its stderr its log. Exit status 0 means done,
anything else failed. A worker runs in a session and process group of its own, in the run's root.

vibe_send on a running worker queues: the message joins the briefing at once, and when the current
run ends the worker runs again with the whole briefing. The current run is never interrupted, so a
worker is never stopped halfway through writing a file; to restart it now, vibe_kill it and
vibe_send (a send to a finished worker reruns it at once).

In a git repository with a commit a worker works in a worktree of its own (`tether_vibe.worktree`),
on a branch from HEAD plus the user's uncommitted changes; `merge` brings its changes into the root
through the run's write path, refused per file when the root changed there since the worker began.
A watchdog marks a worker stalled when its processes use no CPU and write nothing (output, files)
for ``stall_seconds``, and kills it at the end of its ``budget_seconds``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether import sandbox
from tether.output import Tail
from tether.tools import ToolError

from tether_vibe import watch, worktree
from tether_vibe.options import VibeOptions
from tether_vibe.roster import Status, WorkerInfo, roster_full, tier_unavailable, unknown_worker

if TYPE_CHECKING:
    from tether.run import Run

log = logging.getLogger("tether.vibe")

DRAIN_TIMEOUT = 1.0  # after the worker exits, how long its pipes may stay open (an escaped child holds them)
CHUNK = 65_536
WATCH_EVERY = 1.0  # seconds between the watchdog's looks at a running worker
DATA_BYTES = 64_000  # the most of $TETHER_VIBE_RESULT read as the result's data


def briefing_text(brief: str, messages: list[str]) -> str:
    """What the worker reads on stdin: the brief, then each message in the order it was sent."""
    parts = [brief.rstrip("\n")]
    for i, message in enumerate(messages, 1):
        parts.append(f"--- message {i} (sent after the brief) ---\n{message.rstrip(chr(10))}")
    return "\n\n".join(parts) + "\n"


@attrs.define(eq=False)
class _Worker:
    id: str
    label: str
    tier: str
    argv: tuple[str, ...]
    brief: str
    log: Tail
    messages: list[str] = attrs.field(factory=list)
    status: Status = Status.RUNNING
    started_at: float = attrs.field(factory=time.time)
    finished_at: float | None = None
    result: str = ""
    exit_code: int | None = None
    runs: int = 0
    queued: int = 0  # messages the current run has not seen
    killing: bool = False
    proc: asyncio.subprocess.Process | None = None
    driver: asyncio.Task | None = None
    settled: asyncio.Event = attrs.field(factory=asyncio.Event)
    stalled: asyncio.Event = attrs.field(factory=asyncio.Event)  # set while it is marked stalled
    budget: float | None = None
    timed_out: bool = False
    out: Tail | None = None  # the current run's stdout
    isolation: str = "none"
    tree: worktree.Linked | None = None  # its worktree (None: not isolated, or merged/discarded)
    start: str | None = None  # the commit its worktree began from
    branch: str | None = None
    changes: tuple[dict[str, Any], ...] | None = None
    found: list[Any] | None = None  # worktree.Change of what its last run left (for a merge)
    note: str = ""
    data: Any = None
    result_file: Path | None = None
    cleanup: asyncio.Future | None = None  # its last worktree, being removed
    sandbox: str = ""  # how its current run is confined (the envelope's policy line)

    def info(self) -> WorkerInfo:
        return WorkerInfo(
            id=self.id,
            label=self.label,
            tier=self.tier,
            status=self.status,
            started_at=self.started_at,
            finished_at=self.finished_at,
            result=self.result,
            log=self.log.render("log"),
            runs=self.runs,
            queued=self.queued,
            exit_code=self.exit_code,
            isolation=self.isolation,
            branch=self.branch,
            changes=self.changes,
            note=self.note,
            data=self.data,
            sandbox=self.sandbox,
        )


class CommandRoster:
    """Workers as processes of the configured commands; see the module docstring for the contract."""

    def __init__(self, run: Run, options: VibeOptions, commands: dict[str, tuple[str, ...]]) -> None:
        self.run = run
        self.options = options
        self.commands = commands  # tier -> argv (`tether_vibe.config.worker_commands`)
        self._workers: dict[str, _Worker] = {}
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()  # the cap check and the start of a process happen as one step
        self._closed = False
        self._repo: tuple[worktree.Repo | None, str] | None = None  # found on the first spawn
        self._folder: Path | None = None  # this run's folder of worktrees in the repository
        self._cleanups: set[asyncio.Future] = set()  # worktrees being removed after a merge or discard
        self._spare: asyncio.Future | None = None  # a checkout of HEAD being made for the next spawn
        self._spares = itertools.count(1)
        self._orphan_spares: list[worktree.Linked] = []  # spares that could not be taken: removed at close

    @property
    def tiers(self) -> list[str]:
        return list(self.commands)

    @property
    def branch_prefix(self) -> str:
        return f"{worktree.BRANCHES}/{self.run.id}/"

    # -- the roster interface --------------------------------------------------------------------

    async def spawn(
        self,
        brief: str,
        label: str,
        tier: str,
        *,
        isolation: str | None = None,
        budget_seconds: float | None = None,
    ) -> WorkerInfo:
        argv = self.commands.get(tier)
        if argv is None:
            raise tier_unavailable(tier, self.tiers)
        async with self._lock:
            self._check_open()
            self._check_room()
            mode, why = await self._isolation(isolation)
            worker = _Worker(
                id=f"w{next(self._ids)}",
                label=label,
                tier=tier,
                argv=argv,
                brief=brief,
                log=Tail(self.options.vibe_log_chars),
                budget=budget_seconds,
                isolation=mode,
                note=why,
            )
            try:
                proc = await self._start(worker)  # raises before the worker is on the roster
            except BaseException:
                await asyncio.to_thread(self._drop_worktree, worker, delete_branch=True)
                raise
            self._workers[worker.id] = worker
            worker.driver = asyncio.create_task(self._drive(worker, proc), name=f"vibe-{worker.id}")
        return worker.info()

    async def send(self, worker_id: str, message: str) -> WorkerInfo:
        worker = self._get(worker_id)
        async with self._lock:
            self._check_open()
            if worker.status.active and not worker.killing:
                worker.messages.append(message)
                worker.queued += 1  # the driver reruns the worker when the current run ends
                return worker.info()
            if worker.driver is not None and not worker.driver.done():  # a kill is settling: let it end first
                bound = self.options.vibe_kill_grace + DRAIN_TIMEOUT + 3
                await asyncio.wait([worker.driver], timeout=bound)
            self._check_room()
            worker.killing = False
            worker.messages.append(message)
            try:
                proc = await self._start(worker)
            except ToolError:
                worker.messages.pop()  # the message was not delivered: keep the briefing as it was
                raise
            worker.driver = asyncio.create_task(self._drive(worker, proc), name=f"vibe-{worker.id}")
        return worker.info()

    async def wait(self, worker_id: str, timeout: float) -> WorkerInfo:
        """The worker once it settles or is marked stalled (a wait returns early on a stall)."""
        worker = self._get(worker_id)
        waiters = [asyncio.ensure_future(worker.settled.wait()), asyncio.ensure_future(worker.stalled.wait())]
        try:
            await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        return worker.info()

    async def kill(self, worker_id: str) -> WorkerInfo:
        worker = self._get(worker_id)
        if worker.status.active:
            await self._stop(worker)
        return worker.info()

    async def list(self) -> list[WorkerInfo]:
        return [w.info() for w in self._workers.values()]

    async def kept(self) -> list[str]:
        """Branches earlier runs of this repository kept with a worker's unmerged work."""
        repo = self._repo[0] if self._repo is not None else None
        if repo is None:
            repo, _ = await asyncio.to_thread(worktree.find_repo, self.run.root)
        if repo is None:
            return []
        return await asyncio.to_thread(worktree.kept_branches, repo.top, self.branch_prefix)

    async def aclose(self) -> None:
        """Close the run's roster: every running worker is stopped (in parallel, each bounded); then
        each worktree is removed, its unmerged work first committed on its branch, which is kept."""
        self._closed = True
        running = [w for w in self._workers.values() if w.status.active]
        await asyncio.gather(*(self._stop(w) for w in running), return_exceptions=True)
        await asyncio.gather(*self._cleanups, return_exceptions=True)
        if self._spare is not None:
            await asyncio.gather(self._spare, return_exceptions=True)
            spare = self._take_spare()
            if spare is not None:
                self._orphan_spares.append(spare)
        await asyncio.to_thread(self._close_worktrees)

    # -- merging -----------------------------------------------------------------------------------

    def merge_plan(self, worker_id: str, action: str, paths: tuple[str, ...] | None) -> MergePlan:
        """What `merge` will do, checked now (blocking: git runs). Raises a ToolError naming the files
        when the merge is refused: the worker is running, or the root changed a file the worker changed."""
        worker = self._get(worker_id)
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
        repo = self._repo[0] if self._repo else None
        assert repo is not None
        plan = self._plan(worker, repo, action, paths, fresh=False) or self._plan(
            worker, repo, action, paths, fresh=True
        )
        assert plan is not None  # a fresh plan is made or refused
        return plan

    def _plan(
        self, worker: _Worker, repo: worktree.Repo, action: str, paths: tuple[str, ...] | None, *, fresh: bool
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
            worker.found, worker.changes = found, self._summary(repo, found)
        inside: dict[str, worktree.Change] = {}
        outside = []
        for change in found:
            rel = _under(change.path, repo.sub)
            if rel is None:
                outside.append(change.path)
            else:
                inside[rel] = change
        chosen = dict(inside)
        if paths is not None:
            wanted = {self.run.relpath(self.run.resolve_path(p)) for p in paths}
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
        expect: list[Any] = []
        applied, same, conflicts = [], [], []
        for rel, change in sorted(chosen.items()):
            target = self.run.root / rel
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
                applied.append(
                    (change.status, rel, change.new_mode == "100755" and change.old_mode != "100755")
                )
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

    async def merge(self, plan: MergePlan) -> dict[str, Any]:
        """Carry out a plan of `merge_plan`: the writes through the run's write path (all or nothing),
        then the worktree and branch go when nothing of the worker's is left to apply."""
        worker = self._get(plan.worker_id)
        if worker.status.active or worker.tree is None:
            raise ToolError(
                f"worker {worker.id} changed state meanwhile; call vibe_merge again", code="moved"
            )
        if plan.action == "discard":
            self._forget(worker)
            worker.note = "its worktree and branch were discarded"
            return {"removed": True}
        if plan.writes:
            from tether.atomic import ChangedSince

            try:
                await self.run.write_files(plan.writes, expect=plan.expect)
            except ChangedSince as exc:
                moved = sorted(self.run.relpath(p) for p in exc.paths)
                raise ToolError(
                    f"refused: {', '.join(moved)} changed in the root while the merge was prepared; nothing was "
                    "written. Call vibe_merge again.",
                    code="conflict",
                    paths=moved,
                    worker_id=worker.id,
                ) from None
            for _, rel, executable in plan.applied:
                if executable:
                    path = self.run.root / rel
                    os.chmod(path, os.stat(path).st_mode | 0o111)
        removed = not plan.rest and not plan.outside
        if removed:
            self._forget(worker)
            worker.note = "its changes were applied; its worktree and branch were removed"
        return {"removed": removed}

    # -- inside ------------------------------------------------------------------------------------

    def _get(self, worker_id: str) -> _Worker:
        worker = self._workers.get(worker_id)
        if worker is None:
            raise unknown_worker(worker_id, list(self._workers))
        return worker

    def _check_open(self) -> None:
        if self._closed:
            raise ToolError("the run is closing; no worker can be started now", code="closed")

    def _check_room(self) -> None:
        running = [w.id for w in self._workers.values() if w.status.active]
        if len(running) >= self.options.vibe_max_workers:
            raise roster_full(self.options.vibe_max_workers, running)

    async def _isolation(self, asked: str | None) -> tuple[str, str]:
        """The worker's isolation and, when it is not the asked or usual one, why (for the answer)."""
        wanted = asked or self.options.vibe_isolation
        if wanted == "none":
            return "none", ""
        if self._repo is None:
            self._repo = await asyncio.to_thread(worktree.find_repo, self.run.root)
        repo, why = self._repo
        if repo is not None:
            return "worktree", ""
        if wanted == "worktree":
            raise ToolError(
                f"isolation 'worktree' needs a git repository with a commit, and {why}. Use isolation 'none' "
                "(the worker then works in the root itself), or make the root a repository with a commit.",
                code="no_repository",
            )
        return "none", f"it works in the root itself (isolation none): {why}"

    def _make_worktree(self, worker: _Worker, spare: worktree.Linked | None) -> None:
        repo = self._repo[0] if self._repo else None
        assert repo is not None
        if self._folder is None:
            self._folder = worktree.run_folder(repo.common)
        branch = f"{self.branch_prefix}{worker.id}"
        tree, start, dirty, linked = worktree.create(
            repo, self.run.root, self._folder, worker.id, branch, spare
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

    def _next_spare(self) -> None:
        """Make the next worktree's checkout in the background, while this worker works."""
        repo = self._repo[0] if self._repo else None
        if self._spare is not None or self._closed or repo is None or self._folder is None:
            return
        folder, name = self._folder, f"spare-{next(self._spares)}"
        self._spare = asyncio.ensure_future(asyncio.to_thread(worktree.prepare_spare, repo, folder, name))

    def _forget(self, worker: _Worker) -> None:
        """Let go of a merged or discarded worktree now; git removes it and its branch in the background
        (the worker's next worktree, and the run's close, wait for that)."""
        repo = self._repo[0] if self._repo else None
        if worker.tree is None or repo is None:
            return
        tree, branch, record = (
            worker.tree,
            worker.branch,
            (self._folder or worker.tree.path.parent) / f"{worker.id}.json",
        )
        worker.tree = worker.start = worker.branch = None
        worker.found = None

        def remove() -> None:
            worktree.remove(repo.top, tree, branch)
            with _suppress_os():
                record.unlink()

        task = asyncio.ensure_future(asyncio.to_thread(remove))
        worker.cleanup = task
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    def _drop_worktree(self, worker: _Worker, *, delete_branch: bool) -> None:
        repo = self._repo[0] if self._repo else None
        if worker.tree is None or repo is None:
            return
        worktree.remove(repo.top, worker.tree, worker.branch if delete_branch else None)
        if self._folder is not None:
            with _suppress_os():
                (self._folder / f"{worker.id}.json").unlink()
        worker.tree = worker.start = None
        if delete_branch:
            worker.branch = None

    def _close_worktrees(self) -> None:
        repo = self._repo[0] if self._repo else None
        for spare in self._orphan_spares:
            if repo is not None and self._folder is not None:
                with _suppress_git():
                    worktree.remove(repo.top, spare, None)
                with _suppress_os():
                    (self._folder / f"{spare.path.name}.json").unlink()
        for worker in self._workers.values():
            if worker.tree is None or worker.start is None or worker.branch is None:
                continue
            try:
                kept = worktree.keep(worker.tree, worker.branch, worker.start)
                branch = worker.branch
                self._drop_worktree(worker, delete_branch=not kept)
                if kept:
                    log.warning(
                        "vibe: worker %s's unmerged work is kept, committed on branch %s", worker.id, branch
                    )
            except (worktree.GitError, OSError):
                log.warning(
                    "vibe: could not keep worker %s's worktree %s", worker.id, worker.tree.path, exc_info=True
                )
        if self._folder is not None:
            repo = self._repo[0] if self._repo else None
            if repo is not None:
                with _suppress_git():
                    worktree.prune(repo.top)
            if not any(self._folder.glob("*.json")):  # what could not be kept stays for the next sweep
                worktree.close_folder(self._folder)

    def _summary(self, repo: worktree.Repo, found: list[worktree.Change]) -> tuple[dict[str, Any], ...]:
        rows = []
        for c in found:
            rel = _under(c.path, repo.sub)
            rows.append(
                {
                    "status": c.status,
                    "path": rel if rel is not None else f"(outside the root) {c.path}",
                    "added": c.added,
                    "deleted": c.deleted,
                }
            )
        return tuple(rows)

    async def _refresh_changes(self, worker: _Worker) -> None:
        if worker.tree is None or worker.start is None or self._repo is None or self._repo[0] is None:
            return
        repo = self._repo[0]
        try:
            _, found = await asyncio.to_thread(worktree.changes, worker.tree, worker.start)
        except (worktree.GitError, OSError) as exc:
            worker.changes = None
            worker.note = f"what it changed could not be read: {exc}"
            return
        worker.found, worker.changes = found, self._summary(repo, found)

    def _read_result(self, worker: _Worker) -> None:
        worker.data = None
        path = worker.result_file
        if path is None or not path.exists():
            return
        try:
            size = path.stat().st_size
            if size > DATA_BYTES:
                worker.note = (
                    f"its $TETHER_VIBE_RESULT ({size} bytes) is over {DATA_BYTES} bytes and was not read; "
                    "ask it to write a smaller JSON result"
                )
                return
            worker.data = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            worker.note = f"its $TETHER_VIBE_RESULT is not valid JSON ({exc}); ignored"
        finally:
            with _suppress_os():
                path.unlink()

    async def _start(self, worker: _Worker) -> asyncio.subprocess.Process:
        if worker.isolation == "worktree" and worker.tree is None:
            if worker.cleanup is not None:  # its previous worktree (same path, same branch) must be gone
                await asyncio.gather(worker.cleanup, return_exceptions=True)
            spare = self._take_spare()
            try:
                await asyncio.to_thread(self._make_worktree, worker, spare)
            except (worktree.GitError, OSError) as exc:
                if spare is not None:
                    self._orphan_spares.append(spare)
                raise ToolError(
                    f"the worker's git worktree could not be made: {exc}. Use isolation 'none' to run it in "
                    "the root itself.",
                    code="worktree_failed",
                ) from None
            self._next_spare()
        cwd = self.run.root
        extra = {}
        work = worker.tree.path if worker.tree is not None else None
        if work is not None:
            repo = self._repo[0] if self._repo else None
            cwd = work / repo.sub if repo is not None and repo.sub else work
            extra["TETHER_VIBE_WORKTREE"] = str(cwd)
        worker.result_file = self.run.private_dir() / f"vibe-{worker.id}-result.json"
        with _suppress_os():
            worker.result_file.unlink()
        env = self.run.child_env(
            {  # tagged: what the worker starts is stopped with it, also after it exited
                **os.environ,
                "TETHER_VIBE_WORKER_ID": worker.id,
                "TETHER_VIBE_TIER": worker.tier,
                "TETHER_VIBE_LABEL": worker.label,
                # the surface that started it: a worker spawned from `plan` or `readonly` must gate its own
                # tools the same way (vibe_spawn is tier read; the gate belongs on the worker's tools)
                "TETHER_VIBE_SURFACE": self.run.surface.name,
                "TETHER_VIBE_RESULT": str(worker.result_file),
                **extra,
            }
        )
        # in a worktree the worker writes only there (and in git's metadata, to commit): the root is
        # read-only to it, where the envelope can narrow so (the built-in one can)
        envelope = sandbox.envelope(self.run, "worker", writable=work)
        inside = envelope is not None and await envelope.check()  # a ToolError: refused, nothing runs
        argv = worker.argv
        worker.sandbox = ""
        if envelope is not None and inside:
            worker.sandbox = envelope.describe()
            if work is not None and envelope.writable != work:
                worker.sandbox += (
                    "; the envelope did not say it makes only the worktree writable (tether asked it to): "
                    "what the worker may write is the envelope's rule, the root may be writable to it"
                )
            # an envelope starts its command in the run's root (bubblewrap's --chdir; a container's
            # workdir): a worker in a worktree is moved there first (the inside shares the root's paths)
            argv = envelope.wrap(
                ["env", "-C", str(cwd), "--", *worker.argv] if cwd != self.run.root else argv
            )
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,  # its own group: kill stops everything it started
            )
        except OSError as exc:
            raise ToolError(
                f"the {worker.tier} worker command could not be started: {' '.join(worker.argv)!r}: "
                f"{exc.strerror or exc}. Fix '{worker.tier}' under [tool.tether.vibe] in pyproject.toml "
                "(or the run's 'vibe' option) so that it names an installed program.",
                code="spawn_failed",
                tier=worker.tier,
                command=list(worker.argv),
            ) from None
        self.run.track_process(proc)
        worker.proc = proc
        worker.found = None  # what it changes from now on is read again when this run ends
        worker.status = Status.RUNNING
        worker.stalled.clear()
        worker.timed_out = False
        worker.started_at, worker.finished_at = time.time(), None
        worker.exit_code = None
        worker.runs += 1
        worker.queued = 0
        worker.settled.clear()
        return proc

    async def _drive(self, worker: _Worker, proc: asyncio.subprocess.Process) -> None:
        """Run the worker to the end, again as long as messages came in meanwhile; then settle it."""
        try:
            while True:
                code = await self._collect(worker, proc)
                if worker.timed_out:
                    worker.status = Status.TIMED_OUT
                    break
                if worker.killing or self._closed:
                    worker.status = Status.KILLED
                    break
                if not worker.queued:
                    worker.status = Status.DONE if code == 0 else Status.FAILED
                    break
                worker.log.add_text(
                    f"\n[tether: run {worker.runs} ended with exit code {code}; rerunning with "
                    f"{worker.queued} new message(s)]\n"
                )
                try:
                    proc = await self._start(worker)
                except ToolError as exc:
                    worker.log.add_text(f"\n[tether: {exc.message}]\n")
                    worker.status = Status.FAILED
                    break
                if worker.killing:  # killed while the rerun was starting
                    await self.run.stop_process(proc, self.options.vibe_kill_grace)
        except Exception as exc:
            log.exception("vibe worker %s broke", worker.id)
            worker.log.add_text(f"\n[tether: the roster lost this worker: {type(exc).__name__}: {exc}]\n")
            worker.status = Status.KILLED if worker.killing else Status.FAILED
        finally:
            if worker.finished_at is None:
                worker.finished_at = time.time()
            worker.queued = 0
            worker.stalled.clear()
            self._read_result(worker)
            if not self._closed:
                await self._refresh_changes(worker)
            worker.settled.set()

    async def _collect(self, worker: _Worker, proc: asyncio.subprocess.Process) -> int:
        """Feed the briefing, read stdout and stderr (bounded) until the worker exits; its exit code."""
        out = worker.out = Tail(self.options.vibe_result_chars)
        tasks = [
            asyncio.create_task(_pump(proc.stdout, out)),
            asyncio.create_task(_pump(proc.stderr, worker.log)),
            asyncio.create_task(_feed(proc.stdin, briefing_text(worker.brief, worker.messages).encode())),
        ]
        watchdog = asyncio.create_task(self._watch(worker, proc))
        try:
            code = await _exited(proc)
            worker.finished_at = time.time()
            watchdog.cancel()
            # a worker's processes end with it; they may hold its pipes open, so before draining them
            await self.run.stop_process(proc, self.options.vibe_kill_grace)
            # what the worker wrote is in the pipes; a child that escaped unseen may still hold them open
            await asyncio.wait(tasks[:2], timeout=DRAIN_TIMEOUT)
        finally:
            for task in (*tasks, watchdog):
                task.cancel()
            await asyncio.gather(*tasks, watchdog, return_exceptions=True)
        out.finish()
        worker.log.finish()
        worker.result = out.render("result")
        worker.exit_code = code
        return code

    async def _watch(self, worker: _Worker, proc: asyncio.subprocess.Process) -> None:
        """The watchdog of one run: stalled after stall_seconds without CPU, output or a file written;
        killed (timed out) at the end of its budget."""
        stall = self.options.vibe_stall_seconds
        begun = time.monotonic()
        folder = worker.tree.path if worker.tree is not None else self.run.root
        last_sample = None
        last_active, last_active_wall = begun, time.time()
        scanned_at = 0.0
        while proc.returncode is None:
            await asyncio.sleep(WATCH_EVERY)
            now = time.monotonic()
            if worker.budget is not None and now - begun >= worker.budget and not worker.killing:
                worker.timed_out = True
                worker.log.add_text(
                    f"\n[tether: its budget of {worker.budget:g} s ran out; it was stopped]\n"
                )
                await self._stop(worker, from_watchdog=True)
                return
            assert worker.out is not None
            sample = (
                await asyncio.to_thread(watch.tree_sample, proc.pid),
                worker.out.total,
                worker.log.total,
            )
            active = sample != last_sample
            last_sample = sample
            if not active and now - last_active >= stall:
                # CPU and output are quiet: a file written since is activity too (looked for sparingly)
                every = WATCH_EVERY if worker.status is Status.RUNNING else 5 * WATCH_EVERY
                if now - scanned_at >= every:
                    scanned_at = now
                    active = await asyncio.to_thread(watch.written_since, folder, last_active_wall)
            if active:
                last_active, last_active_wall = now, time.time()
                if worker.status is Status.STALLED:
                    worker.status = Status.RUNNING
                    worker.stalled.clear()
                    worker.note = ""
            elif now - last_active >= stall and worker.status is Status.RUNNING:
                states = await asyncio.to_thread(watch.tree_states, proc.pid)
                printed = (
                    _last_lines(worker.out.text(), 5) or _last_lines(worker.log.text(), 5) or "(nothing)"
                )
                worker.status = Status.STALLED
                worker.note = (
                    f"no CPU used, no output and no file written for {now - last_active:.0f} s; it last printed:\n"
                    f"{printed}\nits processes:\n{states}"
                )
                worker.stalled.set()

    async def _stop(self, worker: _Worker, *, from_watchdog: bool = False) -> None:
        worker.killing = True
        worker.queued = 0
        proc = worker.proc
        if proc is not None:
            await self.run.stop_process(proc, self.options.vibe_kill_grace)
        if from_watchdog:
            return  # the driver settles it as the pipes close
        if worker.driver is not None:
            try:  # the driver settles as soon as the pipes close; bounded in case a pipe is held
                await asyncio.wait_for(asyncio.shield(worker.driver), DRAIN_TIMEOUT + 2)
            except Exception:  # noqa: BLE001 - a timeout or a broken driver: the process is gone either way
                worker.driver.cancel()
                worker.status = Status.KILLED
                worker.finished_at = worker.finished_at or time.time()
                worker.settled.set()


@attrs.frozen
class MergePlan:
    """What vibe_merge will do for one worker, checked against the root when it was made."""

    worker_id: str
    action: str
    writes: dict[Path, bytes | None]
    expect: list[Any]  # tether.atomic.Snapshot of each target as the worker found it
    applied: list[tuple[str, str, bool]]  # (status, path relative to the root, made executable)
    same: list[str]  # already as the worker left them in the root
    rest: list[str]  # changed by the worker, not chosen by paths
    outside: list[str] = attrs.field(factory=list)  # changed by the worker outside the run's root


def _regular_bytes(path: Path) -> bytes | bool | None:
    """A file's content; None when there is none; False when something else stands there (a folder, a FIFO)."""
    import stat

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return False
    return path.read_bytes()


def _under(path: str, sub: str) -> str | None:
    if not sub:
        return path
    return path[len(sub) + 1 :] if path.startswith(sub + "/") else None


def _last_lines(text: str, n: int) -> str:
    lines = [ln for ln in text.rstrip("\n").splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


def _suppress_git() -> Any:
    import contextlib

    return contextlib.suppress(worktree.GitError, OSError)


def _suppress_os() -> Any:
    import contextlib

    return contextlib.suppress(OSError)


async def _exited(proc: asyncio.subprocess.Process) -> int:
    """The exit code, as soon as the worker exits.

    ``proc.wait()`` alone also waits for the pipes to close, and a child the worker left behind keeps
    them open; the return code is set when the process is reaped, so it is watched as well.
    """
    waiter = asyncio.ensure_future(proc.wait())
    try:
        while proc.returncode is None and not waiter.done():
            await asyncio.wait([waiter], timeout=0.05)
    finally:
        waiter.cancel()
    return proc.returncode if proc.returncode is not None else waiter.result()


async def _feed(stdin: asyncio.StreamWriter | None, data: bytes) -> None:
    """Write the briefing and close stdin; a worker that exits without reading it is not an error."""
    if stdin is None:
        return
    try:
        stdin.write(data)
        await stdin.drain()
        stdin.close()
        await stdin.wait_closed()
    except (BrokenPipeError, ConnectionResetError):
        pass


async def _pump(stream: asyncio.StreamReader | None, tail: Tail) -> None:
    if stream is None:
        return
    while chunk := await stream.read(CHUNK):
        tail.add(chunk)
