"""The built-in roster: each worker is a process running the command configured for its tier.

The worker's briefing (the brief, then every message added by vibe_send) is written to its stdin;
its stdout is its result (the bounded tail of it), its stderr its log. Exit status 0 means done,
anything else failed. A worker runs in a session and process group of its own, in the run's root.

vibe_send on a running worker queues: the message joins the briefing at once, and when the current
run ends the worker runs again with the whole briefing. The current run is never interrupted, so a
worker is never stopped halfway through writing a file; to restart it now, vibe_kill it and
vibe_send (a send to a finished worker reruns it at once).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from typing import TYPE_CHECKING

import attrs
from tether import sandbox
from tether.output import Tail
from tether.tools import ToolError

from tether_vibe.config import VibeConfig
from tether_vibe.roster import Status, WorkerInfo, roster_full, tier_unavailable, unknown_worker

if TYPE_CHECKING:
    from tether.run import Run

log = logging.getLogger("tether.vibe")

DRAIN_TIMEOUT = 1.0  # after the worker exits, how long its pipes may stay open (an escaped child holds them)
CHUNK = 65_536


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
        )


class CommandRoster:
    """Workers as processes of the configured commands; see the module docstring for the contract."""

    def __init__(self, run: Run, config: VibeConfig) -> None:
        self.run = run
        self.config = config
        self._workers: dict[str, _Worker] = {}
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()  # the cap check and the start of a process happen as one step
        self._closed = False

    @property
    def tiers(self) -> list[str]:
        return list(self.config.commands)

    # -- the roster interface --------------------------------------------------------------------

    async def spawn(self, brief: str, label: str, tier: str) -> WorkerInfo:
        argv = self.config.commands.get(tier)
        if argv is None:
            raise tier_unavailable(tier, self.tiers)
        async with self._lock:
            self._check_open()
            self._check_room()
            worker = _Worker(
                id=f"w{next(self._ids)}",
                label=label,
                tier=tier,
                argv=argv,
                brief=brief,
                log=Tail(self.config.log_chars),
            )
            proc = await self._start(worker)  # raises before the worker is on the roster
            self._workers[worker.id] = worker
            worker.driver = asyncio.create_task(self._drive(worker, proc), name=f"vibe-{worker.id}")
        return worker.info()

    async def send(self, worker_id: str, message: str) -> WorkerInfo:
        worker = self._get(worker_id)
        async with self._lock:
            self._check_open()
            if worker.status is Status.RUNNING and not worker.killing:
                worker.messages.append(message)
                worker.queued += 1  # the driver reruns the worker when the current run ends
                return worker.info()
            if worker.driver is not None and not worker.driver.done():  # a kill is settling: let it end first
                bound = self.config.kill_grace + DRAIN_TIMEOUT + 3
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
        worker = self._get(worker_id)
        try:
            await asyncio.wait_for(worker.settled.wait(), timeout)
        except TimeoutError:
            pass
        return worker.info()

    async def kill(self, worker_id: str) -> WorkerInfo:
        worker = self._get(worker_id)
        if worker.status is Status.RUNNING:
            await self._stop(worker)
        return worker.info()

    async def list(self) -> list[WorkerInfo]:
        return [w.info() for w in self._workers.values()]

    async def aclose(self) -> None:
        """Close the run's roster: every running worker is stopped (in parallel, each bounded)."""
        self._closed = True
        running = [w for w in self._workers.values() if w.status is Status.RUNNING]
        await asyncio.gather(*(self._stop(w) for w in running), return_exceptions=True)

    # -- inside ------------------------------------------------------------------------------------

    def _get(self, worker_id: str) -> _Worker:
        worker = self._workers.get(worker_id)
        if worker is None:
            raise unknown_worker(worker_id, list(self._workers))
        return worker

    def _check_open(self) -> None:
        if self._closed:
            raise ToolError("the run is closing; no worker can be started now", {"error": "closed"})

    def _check_room(self) -> None:
        running = [w.id for w in self._workers.values() if w.status is Status.RUNNING]
        if len(running) >= self.config.max_workers:
            raise roster_full(self.config.max_workers, running)

    async def _start(self, worker: _Worker) -> asyncio.subprocess.Process:
        env = self.run.child_env(
            {  # tagged: what the worker starts is stopped with it, also after it exited
                **os.environ,
                "TETHER_VIBE_WORKER_ID": worker.id,
                "TETHER_VIBE_TIER": worker.tier,
                "TETHER_VIBE_LABEL": worker.label,
                # the surface that started it: a worker spawned from `plan` or `readonly` must gate its own
                # tools the same way (vibe_spawn is tier read; the gate belongs on the worker's tools)
                "TETHER_VIBE_SURFACE": self.run.surface.name,
            }
        )
        envelope = sandbox.envelope(self.run, "worker")
        inside = envelope is not None and await envelope.check()  # a ToolError: refused, nothing runs
        argv = envelope.wrap(worker.argv) if envelope is not None and inside else worker.argv
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.run.root,
                env=env,
                start_new_session=True,  # its own group: kill stops everything it started
            )
        except OSError as exc:
            raise ToolError(
                f"the {worker.tier} worker command could not be started: {' '.join(worker.argv)!r}: "
                f"{exc.strerror or exc}. Fix '{worker.tier}' under [tool.tether.vibe] in pyproject.toml "
                "(or the run's 'vibe' option) so that it names an installed program.",
                {"error": "spawn_failed", "tier": worker.tier, "command": list(worker.argv)},
            ) from None
        self.run.track_process(proc)
        worker.proc = proc
        worker.status = Status.RUNNING
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
                    await self.run.stop_process(proc, self.config.kill_grace)
        except Exception as exc:
            log.exception("vibe worker %s broke", worker.id)
            worker.log.add_text(f"\n[tether: the roster lost this worker: {type(exc).__name__}: {exc}]\n")
            worker.status = Status.KILLED if worker.killing else Status.FAILED
        finally:
            if worker.finished_at is None:
                worker.finished_at = time.time()
            worker.queued = 0
            worker.settled.set()

    async def _collect(self, worker: _Worker, proc: asyncio.subprocess.Process) -> int:
        """Feed the briefing, read stdout and stderr (bounded) until the worker exits; its exit code."""
        out = Tail(self.config.result_chars)
        tasks = [
            asyncio.create_task(_pump(proc.stdout, out)),
            asyncio.create_task(_pump(proc.stderr, worker.log)),
            asyncio.create_task(_feed(proc.stdin, briefing_text(worker.brief, worker.messages).encode())),
        ]
        try:
            code = await _exited(proc)
            worker.finished_at = time.time()
            # a worker's processes end with it; they may hold its pipes open, so before draining them
            await self.run.stop_process(proc, self.config.kill_grace)
            # what the worker wrote is in the pipes; a child that escaped unseen may still hold them open
            await asyncio.wait(tasks[:2], timeout=DRAIN_TIMEOUT)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        out.finish()
        worker.log.finish()
        worker.result = out.render("result")
        worker.exit_code = code
        return code

    async def _stop(self, worker: _Worker) -> None:
        worker.killing = True
        worker.queued = 0
        proc = worker.proc
        if proc is not None:
            await self.run.stop_process(proc, self.config.kill_grace)
        if worker.driver is not None:
            try:  # the driver settles as soon as the pipes close; bounded in case a pipe is held
                await asyncio.wait_for(asyncio.shield(worker.driver), DRAIN_TIMEOUT + 2)
            except Exception:  # noqa: BLE001 - a timeout or a broken driver: the process is gone either way
                worker.driver.cancel()
                worker.status = Status.KILLED
                worker.finished_at = worker.finished_at or time.time()
                worker.settled.set()


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
