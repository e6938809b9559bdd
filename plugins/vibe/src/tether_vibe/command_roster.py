"""The built-in roster: each worker is a process running the command configured for its tier.

The worker's briefing (the brief, then every message added by vibe_send) is written to its stdin;
its stdout is its result (the bounded tail of it), its stderr its log. Exit status 0 means done,
anything else failed. A worker runs in a session and process group of its own, in the run's root.

vibe_send on a running worker queues: the message joins the briefing at once, and when the current
run ends the worker runs again with the whole briefing. The current run is never interrupted, so a
worker is never stopped halfway through writing a file; to restart it now, vibe_kill it and
vibe_send (a send to a finished worker reruns it at once).

In a git repository with a commit a worker works in a worktree of its own (`tether_vibe.isolation`,
on `tether_vibe.worktree`), on a branch from HEAD plus the user's uncommitted changes; `merge` brings
its changes into the root through the run's write path, refused per file when the root changed there
since the worker began (`tether_vibe.merge`). A watchdog marks a worker stalled when its processes
use no CPU and write nothing (output, files) for ``stall_seconds``, and kills it at the end of its
``budget_seconds``. The worker's live record is `tether_vibe.worker.Worker`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from tether import sandbox
from tether.output import Tail
from tether.tools import ToolError

from tether_vibe import merge as merging
from tether_vibe import watch
from tether_vibe.isolation import WorkerTrees
from tether_vibe.merge import MergePlan
from tether_vibe.roster import Status, WorkerInfo, roster_full, tier_unavailable, unknown_worker
from tether_vibe.worker import Worker

if TYPE_CHECKING:
    from tether.run import Run

    from tether_vibe.options import VibeOptions

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


class CommandRoster:
    """Workers as processes of the configured commands; see the module docstring for the contract."""

    def __init__(self, run: Run, options: VibeOptions, commands: dict[str, tuple[str, ...]]) -> None:
        self.run = run
        self.options = options
        self.commands = commands  # tier -> argv (`tether_vibe.config.worker_commands`)
        self._workers: dict[str, Worker] = {}
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()  # the cap check and the start of a process happen as one step
        self._closed = False
        self.trees = WorkerTrees(run)  # where each worker works (`tether_vibe.isolation`)

    @property
    def tiers(self) -> list[str]:
        return list(self.commands)

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
            mode, why = await self.trees.choose(isolation, self.options.vibe_isolation)
            worker = Worker(
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
                await asyncio.to_thread(self.trees.drop, worker, delete_branch=True)
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
        return await self.trees.kept()

    async def aclose(self) -> None:
        """Close the run's roster: every running worker is stopped (in parallel, each bounded); then
        each worktree is removed, its unmerged work first committed on its branch, which is kept."""
        self._closed = True
        running = [w for w in self._workers.values() if w.status.active]
        await asyncio.gather(*(self._stop(w) for w in running), return_exceptions=True)
        await self.trees.aclose(self._workers.values())

    # -- merging (`tether_vibe.merge`) -----------------------------------------------------------

    def merge_plan(self, worker_id: str, action: str, paths: tuple[str, ...] | None) -> MergePlan:
        """What `merge` will do, checked now (blocking: git runs). Raises a ToolError naming the files
        when the merge is refused: the worker is running, or the root changed a file the worker changed."""
        return merging.plan(self.run, self.trees, self._get(worker_id), action, paths)

    async def merge(self, plan: MergePlan) -> dict[str, Any]:
        """Carry out a plan of `merge_plan`: the writes through the run's write path (all or nothing),
        then the worktree and branch go when nothing of the worker's is left to apply."""
        return await merging.apply(self.run, self.trees, self._get(plan.worker_id), plan)

    # -- inside ------------------------------------------------------------------------------------

    def _get(self, worker_id: str) -> Worker:
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

    def _read_result(self, worker: Worker) -> None:
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
            with contextlib.suppress(OSError):
                path.unlink()

    async def _start(self, worker: Worker) -> asyncio.subprocess.Process:
        if await self.trees.make(worker) and not self._closed:  # a worktree was made for this run
            self.trees.next_spare()
        cwd = self.run.root
        extra = {}
        work = worker.tree.path if worker.tree is not None else None
        if work is not None:
            repo = self.trees.repo
            cwd = work / repo.sub if repo is not None and repo.sub else work
            extra["TETHER_VIBE_WORKTREE"] = str(cwd)
        worker.result_file = self.run.private_dir() / f"vibe-{worker.id}-result.json"
        with contextlib.suppress(OSError):
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

    async def _drive(self, worker: Worker, proc: asyncio.subprocess.Process) -> None:
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
                await self.trees.refresh(worker)
            worker.settled.set()

    async def _collect(self, worker: Worker, proc: asyncio.subprocess.Process) -> int:
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

    async def _watch(self, worker: Worker, proc: asyncio.subprocess.Process) -> None:
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

    async def _stop(self, worker: Worker, *, from_watchdog: bool = False) -> None:
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


def _last_lines(text: str, n: int) -> str:
    lines = [ln for ln in text.rstrip("\n").splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


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
