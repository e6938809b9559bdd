"""One live Jupyter kernel of a run: start, run cells (with the stdin bridge), interrupt, shut down.

Messaging is jupyter_client's; what is ours is the discipline around it:
- one reader task per channel (iopub, shell, stdin) awaits messages (no polling loop) and hands each
  to the cell whose ``parent_header.msg_id`` it answers; anything else is dropped, and so are iopub's
  ``execute_input`` and non-idle ``status`` (nobody waits for them);
- a cell ends when both its ``execute_reply`` and its ``status: idle`` arrived; Deno may send a
  cell's stream/execute_result AFTER its idle (measured: 18 of 100 `1+1` results), so for Deno a
  kernel_info round trip follows as a barrier (its idle leaves after what the cell queued: 0 of 600
  missed; waited for BARRIER_WAIT, or SETTLE once its shell reply came, else the cell says output
  may be missing), then, if the run asks for it (`eval_drain`), a wait until iopub is quiet;
- the barrier orders only output Deno had queued, not stdout it is still forwarding (console.log
  reaches iopub with a lag; a cell printing 300,000 lines: its 'done' came 45 s after the barrier):
  so a Deno cell that printed then sends a silent execute writing a fresh token to stdout and to
  stderr, and takes output until both tokens came back (each stream is one ordered pipe, so all the
  cell printed comes before its token; Deno tags late output with the request it runs now, so the
  marker's messages go to the cell); the tokens are dropped. The wait has the cell's own budgets
  (inactivity, restarted by output, and what is left of the total); when they run out the cell says
  its end may be missing, and the next cell says output before its own may be the previous cell's
  (Deno sends a cell's ``execute_input`` after some of its own output now and then, so no message
  tells them apart). A timer's output after the token is the next cell's, like any of its output;
- Deno loses a request that reaches it while it still answers one before it (it runs the code and
  never sends the execute_reply: the cell then waited its whole inactivity budget and the kernel was
  stopped), so nothing is sent to Deno until every request of ours has its shell reply and its idle
  (``_quiesce``): a barrier or probe cut short by its bound is still waited for before the next cell;
- a cell's two budgets, inactivity and total, are one ``asyncio.timeout``: output that changes what
  the model will see restarts the inactivity budget (an empty stream message or a clear of nothing
  does not), the total one never; both stand still while a `tool()` call from the cell is open;
- iopub may drop messages of a flood (ZeroMQ's queue limit: ours is raised to IOPUB_QUEUE, the
  kernel's PUB side still has one), the idle among them: when the idle
  has not come SETTLE seconds after the reply and the cell's last message, a kernel_info probe
  follows; its idle arriving first proves ours was dropped, and the cell ends saying output may
  be missing;
- a ``clear_output`` drops what the cell showed before it (after the next output with ``wait=True``,
  as Jupyter does), so a cell that clears and redraws keeps only its last frame;
- the kernel's death is noticed through a pidfd (or a waiting thread) and ends the cell at once.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
from tether import tracing

log = logging.getLogger("tether.eval")

MARKER = "\u2063tether-call:"  # the prefix of a tool() call's input_request (see kernel_side/)
PING = '{"ping": true}'  # the stdin probe at kernel start (answered here, never by a tool)
_DIED = "died"
MAX_DISPLAYS = 50  # display messages kept per cell (each may hold an image)
# After the execute_reply, how long iopub may stay quiet before a probe asks whether the cell's idle
# was lost (ZeroMQ's PUB socket drops messages once its queue for a slow reader is full).
SETTLE = 2.0
# How long the barrier after a Deno cell waits for its answer: a round trip of milliseconds on an idle
# machine, seconds on a loaded one (1 s lost a late result in CI); the cell says so when it runs out.
BARRIER_WAIT = 15.0
# How long a Deno request waits for the kernel to finish answering the requests of ours before it
# (see ``Kernel._quiesce``): Deno loses a request sent while it still answers another one.
QUIET_WAIT = 30.0
IOPUB_QUEUE = 50_000  # messages our iopub socket queues while the reader is behind (ZeroMQ's default: 1000)


@attrs.frozen
class KernelSpec:
    """How to start one kernel: its argv (with ``{connection_file}``), where, and what to tell the model."""

    language: str  # python | javascript
    argv: tuple[str, ...]
    transport: str  # ipc | tcp
    interpreter: str  # shown to the model: which Python / Deno runs
    environment: str  # "the project's environment (.venv)", "tether's own environment", ...
    where: str  # "host" or "envelope 'name'"
    policy: str = ""  # inside an envelope: what confines the kernel, in one line
    env: dict[str, str] = attrs.field(factory=dict)
    barrier: bool = False  # after reply+idle, a kernel_info round trip flushes output sent late (Deno)
    drain: float = (
        0.0  # then wait until iopub was quiet this long (output of timers that fire after the cell)
    )
    interrupt_mode: str = "signal"  # signal (SIGINT to the process group) | message (interrupt_request)
    # Python: first on sys.path (the kernel runs outside the project's env)
    project_paths: tuple[str, ...] = ()


@attrs.define
class CellEnd:
    """How a cell ended, with the messages it produced (in order)."""

    status: str  # ok | timeout (while running) | interrupted (state kept) | stuck (interrupt failed) | died
    messages: list[dict[str, Any]]
    reply: dict[str, Any] | None = None
    tool_calls: int = 0
    inputs: list[str] = attrs.field(factory=list)  # prompts of plain input() calls (answered empty)
    replied: bool = False
    idle: bool = False
    kept_chars: int = 0  # stream characters kept at the head
    tail: collections.deque = attrs.field(
        factory=collections.deque
    )  # after the head is full: the latest messages
    tail_chars: int = 0
    dropped_chars: int = 0
    displays: int = 0
    dropped_displays: int = 0
    clear_pending: bool = False  # a clear_output(wait=True): clear when the next output arrives
    spent: str = ""  # which budget ran out: inactivity | total
    idle_lost: bool = False  # the reply came, the idle never did: iopub dropped messages of a flood
    barrier: tuple[str, asyncio.Queue] | None = None  # the kernel_info sent after the reply (Deno)
    barrier_lost: bool = False  # the kernel did not answer the barrier: output sent late may be missing
    barrier_answered: bool = False  # its shell reply came (then only its iopub idle was missing)
    printed: bool = False  # stream output came (then the marker follows the barrier, Deno)
    tail_lost: bool = False  # the marker's tokens did not come back within the cell's budget
    after_lost: bool = False  # the cell before this one ended with tail_lost

    def add(self, msg: dict[str, Any], limit: int) -> bool:
        """Keep the head (2/3 of ``limit``) and the tail (1/3) of a cell's output, whatever the cell prints.

        Returns whether what the model will see changed: an empty stream message or a clear of
        nothing does not, so a flood of them neither grows the cell's memory nor counts as activity.
        """
        if msg["msg_type"] == "clear_output":
            if msg["content"].get("wait"):
                self.clear_pending = True
                return False
            return self._clear()
        if msg["msg_type"] == "stream":
            if not msg["content"].get("text"):
                return False
            self.printed = True
        if self.clear_pending:
            self._clear()
        self._store(msg, limit)
        return True

    def _clear(self) -> bool:
        had = bool(self.messages or self.tail or self.dropped_displays)
        self.messages.clear()
        self.tail.clear()
        self.kept_chars = self.tail_chars = self.dropped_chars = self.displays = self.dropped_displays = 0
        self.clear_pending = False
        return had

    def _store(self, msg: dict[str, Any], limit: int) -> None:
        keep = limit * 2 // 3 if not self.tail else limit // 3
        size = len(msg["content"].get("text", "")) if msg["msg_type"] == "stream" else 0
        if msg["msg_type"] in ("display_data", "update_display_data"):
            self.displays += 1
            if self.displays > MAX_DISPLAYS:  # a loop displaying figures: what the model can use is few
                self.dropped_displays += 1
                return
        if not self.tail and self.kept_chars + size <= keep:
            self.kept_chars += size
            self.messages.append(msg)
            return
        if not self.tail and size and self.kept_chars < keep:  # fill the head with the start of a big message
            room = keep - self.kept_chars
            text = msg["content"]["text"]
            self.messages.append({**msg, "content": {**msg["content"], "text": text[:room]}})
            self.kept_chars = keep
            msg = {**msg, "content": {**msg["content"], "text": text[room:]}}
            size -= room
        keep = limit // 3
        self.tail.append((msg, size))
        self.tail_chars += size
        while self.tail_chars > keep and self.tail:
            front, front_size = self.tail[0]
            excess = self.tail_chars - keep
            if front_size <= excess:
                self.tail.popleft()  # wholly older than the tail we keep
                self.tail_chars -= front_size
                self.dropped_chars += front_size
                continue
            text = front["content"]["text"]  # keep the end of the oldest message
            self.tail[0] = (
                {**front, "content": {**front["content"], "text": text[excess:]}},
                front_size - excess,
            )
            self.tail_chars -= excess
            self.dropped_chars += excess

    def finish(self) -> None:
        if self.dropped_chars:
            note = (
                f"\n[... {self.dropped_chars:,} characters of output dropped (showing the first {self.kept_chars:,} and "
                f"the last {self.tail_chars:,} received); write it to a file and read parts of it, or print less ...]\n"
            )
            self.messages.append({"msg_type": "stream", "content": {"name": "stdout", "text": note}})
        self.messages.extend(m for m, _ in self.tail)
        self.tail.clear()
        if self.dropped_displays:
            note = f"[{self.dropped_displays} more display(s) not kept: the cell displayed more than {MAX_DISPLAYS}]\n"
            self.messages.append({"msg_type": "stream", "content": {"name": "stdout", "text": note}})
        if self.idle_lost:
            note = (
                "[the cell sent messages faster than they could be read and the kernel dropped some of them: "
                "output may be missing here; print less often, or write it to a file]\n"
            )
            self.messages.append({"msg_type": "stream", "content": {"name": "stderr", "text": note}})
        if self.barrier_lost:
            why = (
                f"answered, but its confirmation on the output channel did not follow within {SETTLE:g} s "
                "(messages of a flood may have been dropped)"
                if self.barrier_answered
                else f"did not confirm within {BARRIER_WAIT:g} s that it had sent all of this cell's output "
                "(the machine may be busy)"
            )
            note = (
                f"[the kernel {why}: the cell's result or its last lines may be missing here; "
                "show what you need in a new cell]\n"
            )
            self.messages.append({"msg_type": "stream", "content": {"name": "stderr", "text": note}})
        if self.tail_lost:
            note = (
                "[output kept arriving (a timer, or a flood) until this cell's time budget ran out, or the "
                f"kernel went {SETTLE:g} s silent before it confirmed the cell's output was all sent: its result "
                "or its last lines may be missing here, and may show under the next cell; print less, write "
                "it to a file, or stop the timer]\n"
            )
            self.messages.append({"msg_type": "stream", "content": {"name": "stderr", "text": note}})
        if self.after_lost:
            note = "[the cell before this one was still printing when it ended: output above may be its]\n"
            self.messages.insert(0, {"msg_type": "stream", "content": {"name": "stderr", "text": note}})


Bridge = Callable[[str], Awaitable[str]]  # the JSON payload of a tool() call -> the JSON answer


class Budget:
    """A cell's inactivity and total budgets (seconds, 0: none) as the deadline of one asyncio timeout.

    After the execute_reply both end: the cell's code is done and only its idle is awaited, for
    SETTLE seconds of quiet, then (see ``Kernel._collect``) for as long as the inactivity budget.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, idle: float, total: float) -> None:
        self.loop, self.idle = loop, idle
        self.total_end = loop.time() + total if total else None
        self.quiet: float | None = None  # after the reply: how long iopub may be quiet
        self.deadline: asyncio.Timeout | None = None

    def until(self) -> float | None:
        now = self.loop.time()
        if self.quiet is not None:
            return now + self.quiet
        ends = [t for t in (now + self.idle if self.idle else None, self.total_end) if t is not None]
        return min(ends) if ends else None

    def restart(self) -> None:
        """Output: the inactivity budget starts again (the total one goes on)."""
        if self.deadline is not None:
            self.deadline.reschedule(self.until())

    def replied(self, quiet: float) -> None:
        self.quiet = quiet
        self.restart()

    def pause(self) -> float:
        if self.deadline is not None:
            self.deadline.reschedule(None)
        return self.loop.time()

    def resume(self, since: float) -> None:
        """After a tool() call: the total budget did not count its time, the inactivity one restarts."""
        if self.total_end is not None:
            self.total_end += self.loop.time() - since
        self.restart()

    def total_spent(self) -> bool:
        return self.total_end is not None and self.loop.time() >= self.total_end


class KernelDied(Exception):
    pass


class Kernel:
    def __init__(
        self, spec: KernelSpec, workdir: Path, cwd: Path, stop: Callable[[int, float], Awaitable[None]]
    ) -> None:
        self.spec = spec
        self._stop = stop  # the run's stop_process: the kernel's tree, group and what carries its tag
        self.workdir = workdir  # private: kernelspec, connection file, ipc sockets, kernel log
        self.cwd = cwd
        self.km: Any = None
        self.kc: Any = None
        self.pid: int | None = None
        self.dead = False
        self.started_in = 0.0
        # what the helper's install reported (Python: sys.executable, ...)
        self.installed: dict[str, Any] = {}
        self._waiters: dict[str, asyncio.Queue] = {}
        self._readers: list[asyncio.Task] = []
        self._pidfd: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._log_file: Any = None
        self._keep = 100_000
        self._settling: asyncio.Future | None = None  # a cancelled cell being interrupted
        self._asked = 0  # input_requests heard (the stdin probe's)
        self._late = False  # the last cell's marker did not come back: its output may reach the next cell
        # requests of ours the kernel has not finished answering: msg_id -> [shell reply time, idle seen]
        self._unanswered: dict[str, list[float | bool]] = {}
        self._answered = asyncio.Event()  # set whenever one of them gets a part of its answer
        self._closing = False
        self.lost = ""  # why the kernel was given up while its process still ran
        self.catalog = ""  # the run's tools last sent to the kernel's `tools` object (JSON)

    # -- start ----------------------------------------------------------------------------------

    async def start(self, timeout: float, on_pid: Callable[[int], None]) -> None:
        import zmq
        from jupyter_client.kernelspec import KernelSpecManager
        from jupyter_client.manager import AsyncKernelManager
        from jupyter_client.provisioning.local_provisioner import LocalProvisioner

        t0 = time.perf_counter()
        self._loop = asyncio.get_running_loop()
        kernels = self.workdir / "kernels"
        name = f"tether-{self.spec.language}"
        (kernels / name).mkdir(parents=True, exist_ok=True)
        (kernels / name / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": list(self.spec.argv),
                    "display_name": name,
                    "language": self.spec.language,
                    "interrupt_mode": self.spec.interrupt_mode,
                }
            )
        )
        ksm = KernelSpecManager(kernel_dirs=[str(kernels)])
        km = AsyncKernelManager(
            kernel_name=name,
            kernel_spec_manager=ksm,
            transport=self.spec.transport,
            connection_file=str(self.workdir / "connection.json"),
        )
        if self.spec.transport == "ipc":
            km.ip = str(self.workdir / "ipc")  # socket files land here, not in the cwd
        km.shutdown_wait_time = 2.0
        self.km = km
        self._log_file = open(self.workdir / "kernel.log", "ab")  # noqa: SIM115 - local file; closed in shutdown()
        env = {**os.environ, **self.spec.env}
        await km.start_kernel(cwd=str(self.cwd), env=env, stdout=self._log_file, stderr=self._log_file)
        # the kernel.json above names no provisioner: jupyter_client started the kernel with its local
        # one, which holds the kernel's Popen
        provisioner = km.provisioner
        assert isinstance(provisioner, LocalProvisioner) and provisioner.process is not None, provisioner
        proc = provisioner.process
        self.pid = proc.pid
        on_pid(proc.pid)
        self._watch_death(proc)
        kc = km.client()
        # the kernel's PUB socket drops messages once ~1000 wait for a slow reader (a busy machine, a
        # redraw loop sending two per frame); our sockets take more before it must (the default is 1000)
        kc.context.setsockopt(zmq.RCVHWM, IOPUB_QUEUE)
        kc.start_channels(hb=False)
        self.kc = kc
        self._readers = [
            asyncio.create_task(self._read(kc.iopub_channel, "iopub")),
            asyncio.create_task(self._read(kc.shell_channel, "shell")),
            asyncio.create_task(self._read(kc.stdin_channel, "stdin")),
        ]
        for task in self._readers:
            task.add_done_callback(self._reader_ended)
        await self._wait_ready(timeout)
        self.started_in = time.perf_counter() - t0

    async def _wait_ready(self, timeout: float) -> None:
        """kernel_info until it is answered AND its iopub status arrived (iopub subscribed: no lost output).

        jupyter_client's wait_for_ready ends with a 0.2 s iopub flush; this is the same check without it.
        """
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout
        while True:
            if self.dead:
                raise KernelDied(self.log_tail())
            msg_id = self._sent(self.kc.kernel_info())
            queue = self._waiters[msg_id] = asyncio.Queue()
            replied = heard = False
            try:
                async with asyncio.timeout(min(1.0, max(0.05, deadline - time.monotonic()))) as wait:
                    while not (replied and heard):
                        channel, _ = await queue.get()
                        if channel == _DIED:
                            raise KernelDied(self.log_tail())
                        if channel == "shell" and not replied:
                            replied = True
                            wait.reschedule(
                                loop.time() + 0.25
                            )  # its iopub status follows at once when subscribed
                        heard = heard or channel == "iopub"
                # the earlier kernel_infos were answered before iopub was subscribed: no idle will come
                for earlier in [m for m, (reply, _) in self._unanswered.items() if reply]:
                    del self._unanswered[earlier]
                return
            except TimeoutError:
                pass
            finally:
                self._waiters.pop(msg_id, None)
            if time.monotonic() > deadline:
                raise TimeoutError(f"the kernel did not answer within {timeout:g} s")

    async def probe_stdin(self, ping_code: str, budget: float, attempts: int = 5) -> None:
        """Make sure the kernel can reach us on stdin before any cell calls tool() or input().

        The kernel's stdin is a ROUTER: an input_request sent before our socket finished its handshake
        is dropped silently, and the cell would then wait forever for an answer. A silent cell asks
        once; if the question does not arrive in time, the cell is ended and the kernel asked again,
        each attempt waiting twice as long as the one before (1, 2, 4 ... s): a lost question costs a
        second, a slow kernel is not asked over and over in the same too short time.

        How the cell is ended: ipykernel takes any message on its stdin for the answer and drops stale
        ones before it asks, so a Python ping gets an answer nobody was asked for (an interrupt that
        lands in a kernel that is merely slow can leave it without a reply); Deno's is interrupted,
        the interrupt given a share of the start ``budget`` (s).
        """
        grace = max(2.0, budget / 10)
        loop = asyncio.get_running_loop()
        for attempt in range(attempts):
            wait, nudge = 2.0**attempt, None
            if self.spec.language == "python":
                asked = self._asked
                nudge = loop.call_later(wait, lambda asked=asked: self._asked == asked and self.kc.input(""))
                wait = budget  # interrupted only if even the answer does not end it
            try:
                end = await self.execute(ping_code, timeout=wait, grace=grace, silent=True)
            finally:
                if nudge is not None:
                    nudge.cancel()
            if end.status == "ok" and end.tool_calls:
                return
            if end.status in ("died", "stuck"):
                break
        raise KernelDied(
            "the kernel's stdin channel did not connect (tool() and input() could not be answered)\n"
            + self.log_tail()
        )

    def _watch_death(self, proc: Any) -> None:
        loop = self._loop
        assert loop is not None
        try:
            fd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            threading.Thread(
                target=lambda: (proc.wait(), loop.call_soon_threadsafe(self._died)), daemon=True
            ).start()
            return
        self._pidfd = fd
        loop.add_reader(fd, self._died)

    def check_alive(self) -> bool:
        """False once the process is gone, even before the death notice was processed."""
        proc = getattr(getattr(self.km, "provisioner", None), "process", None)
        if not self.dead and proc is not None and proc.poll() is not None:
            self._died()
        return not self.dead

    def _died(self) -> None:
        if self._pidfd is not None and self._loop is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        if self.dead:
            return
        self.dead = True
        for queue in self._waiters.values():
            queue.put_nowait((_DIED, None))
        self._answered.set()  # nothing more will be answered: stop waiting for it

    async def _read(self, channel: Any, name: str) -> None:
        failures = 0
        while True:
            try:
                msg = await channel.get_msg()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception:
                log.debug("eval: unreadable %s message", name, exc_info=True)
                failures += 1
                if self.dead or failures > 50:  # a closed socket fails at once, forever: stop
                    return
                continue
            parent = (msg.get("parent_header") or {}).get("msg_id")
            if parent in self._unanswered:
                self._heard(parent, name, msg)
            if name == "iopub":
                kind = msg["msg_type"]
                if kind == "execute_input" or (
                    kind == "status" and msg["content"].get("execution_state") != "idle"
                ):
                    continue  # nobody waits for these: spare the waiting task a wake-up per message
            queue = self._waiters.get(parent) if isinstance(parent, str) else None
            if queue is not None:
                queue.put_nowait((name, msg))

    def _reader_ended(self, task: asyncio.Task) -> None:
        """A channel's reader ended while the kernel was up: its socket failed for good, or an exception
        meant for another frame (a signal handler's) landed in it. Without it the kernel is deaf (every
        later cell would wait out its budget), so it is given up now and the next cell starts a new one."""
        if self.dead or self._closing:
            return
        error = None if task.cancelled() else task.exception()
        self.lost = "a channel of the kernel stopped being read" + (f" ({error!r})" if error else "")
        log.warning("eval: kernel %s given up: %s", self.pid, self.lost)
        self._died()

    def _sent(self, msg_id: str) -> str:
        """Note a request sent to a kernel that must not get the next one before it answered this."""
        if self.spec.barrier:  # Deno; ipykernel queues its shell requests
            self._unanswered[msg_id] = [0.0, False]
        return msg_id

    def _heard(self, parent: str, channel: str, msg: dict[str, Any]) -> None:
        state = self._unanswered[parent]
        if channel == "shell":
            state[0] = asyncio.get_running_loop().time()
        elif msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
            state[1] = True
        if state[0] and state[1]:
            del self._unanswered[parent]
        self._answered.set()

    async def _quiesce(self) -> None:
        """Wait until the kernel has answered every request of ours: each one's shell reply (QUIET_WAIT s in
        all) and its idle (SETTLE s after its reply: iopub may drop it in a flood).

        Deno loses a request that arrives while it still answers another (measured: with every barrier
        cut short, 10 and 13 of 150 cells in two runs ran but never got their execute_reply). What is still unanswered after
        the bound is given up on, and the cell is sent all the same.
        """
        loop = asyncio.get_running_loop()
        stop = loop.time() + QUIET_WAIT
        while self._unanswered and not self.dead:
            replies = [state[0] for state in self._unanswered.values()]
            until = stop if not all(replies) else min(stop, max(replies) + SETTLE)
            self._answered.clear()
            try:
                async with asyncio.timeout_at(until):
                    await self._answered.wait()
            except TimeoutError:
                if not all(replies):
                    log.debug("eval: %d request(s) unanswered after %g s", len(self._unanswered), QUIET_WAIT)
                break
        self._unanswered.clear()

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = (self.workdir / "kernel.log").read_text(errors="replace")
        except OSError:
            return ""
        kept = [line for line in text.strip().splitlines() if "is unstable and might change" not in line]
        return "\n".join(kept[-lines:])

    # -- cells ----------------------------------------------------------------------------------

    async def execute(
        self,
        code: str,
        *,
        timeout: float,
        grace: float = 5.0,
        bridge: Bridge | None = None,
        silent: bool = False,
        keep_chars: int = 100_000,
        user_expressions: dict[str, str] | None = None,
        total: float = 0.0,
    ) -> CellEnd:
        """Run a cell to its end: reply and idle, or death, or the end of its inactivity ``timeout`` or
        ``total`` budget (seconds; 0: none).

        On timeout the kernel is interrupted and given ``grace`` seconds to end the cell: the status is
        then "interrupted" (state kept) or "stuck" (the interrupt did not take; the caller restarts).
        The cell is a child span of the traced tool call that runs it (see tether.tracing), with its end.
        """
        with tracing.span("kernel execute", {"tether.kernel": self.spec.language, "tether.silent": silent}):
            end = await self._execute(
                code,
                timeout=timeout,
                grace=grace,
                bridge=bridge,
                silent=silent,
                keep_chars=keep_chars,
                user_expressions=user_expressions,
                total=total,
            )
            tracing.annotate({"tether.cell_status": end.status})
            return end

    async def _execute(
        self,
        code: str,
        *,
        timeout: float,
        grace: float,
        bridge: Bridge | None,
        silent: bool,
        keep_chars: int,
        user_expressions: dict[str, str] | None,
        total: float,
    ) -> CellEnd:
        if self._settling is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._settling), grace + 1.0)
            self._settling = None
        if self.dead:
            return CellEnd("died", [])
        await self._quiesce()
        msg_id = self._sent(
            self.kc.execute(
                code,
                silent=silent,
                store_history=not silent,
                allow_stdin=True,
                user_expressions=user_expressions,
            )
        )
        queue: asyncio.Queue = asyncio.Queue()
        self._waiters[msg_id] = queue
        end = CellEnd("ok", [], after_lost=self._late)
        self._late = False
        self._keep = keep_chars
        started = time.monotonic()
        try:
            await self._collect(queue, end, timeout, bridge, extend=True, total=total)
            if end.status == "timeout":
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.km.interrupt_kernel(), grace)
                end.status = "interrupted"
                await self._collect(queue, end, grace, None, extend=False)
                if end.status in ("timeout", "died"):
                    end.status = "stuck"  # the interrupt did not take, or took the kernel with it
            if end.status in ("ok", "interrupted") and self.spec.barrier:
                await self._barrier(queue, end)
            if end.status in ("ok", "interrupted") and self.spec.barrier and end.printed:
                left = total - (time.monotonic() - started) if total else 0.0
                await self._marker(queue, end, timeout, max(left, 0.01) if total else 0.0)
                self._late = end.tail_lost
            if end.status in ("ok", "interrupted") and self.spec.drain:
                await self._drain(queue, end)
        except asyncio.CancelledError:
            # the call was cancelled (the client gave up): stop the cell too, or the next one queues behind
            # it; the next cell waits until this one ended (ipykernel aborts requests sent meanwhile)
            self._settling = asyncio.ensure_future(self._settle_cancelled(msg_id, queue, end, grace))
            raise
        finally:
            if self._settling is None:
                self._waiters.pop(msg_id, None)
            if end.barrier is not None:
                self._waiters.pop(end.barrier[0], None)
            end.finish()
        return end

    async def _collect(
        self,
        queue: asyncio.Queue,
        end: CellEnd,
        timeout: float,
        bridge: Bridge | None,
        *,
        extend: bool,
        total: float = 0.0,
    ) -> None:
        budget = Budget(asyncio.get_running_loop(), timeout, total)
        probe: str | None = None  # a kernel_info sent when the idle is late: its idle follows ours on iopub
        try:
            while end.status != "died" and not (end.replied and end.idle):
                try:
                    async with asyncio.timeout_at(budget.until()) as budget.deadline:
                        await self._messages(queue, end, bridge, budget, extend, probe)
                except TimeoutError:
                    budget.deadline = None  # expired: the next wait enters a new one
                    if not end.replied:
                        end.status = "timeout"
                        end.spent = "total" if budget.total_spent() else "inactivity"
                        return
                    if probe is not None:  # not even the probe's idle, for the whole inactivity budget
                        end.idle_lost = True
                        return
                    sent: str = self._sent(self.kc.kernel_info())
                    self._waiters[sent] = queue
                    probe = sent
                    budget.replied(max(timeout, SETTLE))
        finally:
            if probe is not None:
                self._waiters.pop(probe, None)

    async def _messages(
        self,
        queue: asyncio.Queue,
        end: CellEnd,
        bridge: Bridge | None,
        budget: Budget,
        extend: bool,
        probe: str | None,
    ) -> None:
        """The cell's messages until its reply and idle (or the probe's idle: then ours was dropped)."""
        while not (end.replied and end.idle):
            channel, msg = await queue.get()
            if channel == _DIED:
                end.status = "died"
                return
            kind = msg["msg_type"]
            if channel == "shell":
                if kind == "execute_reply":
                    end.replied = True
                    end.reply = msg["content"]
                    budget.replied(SETTLE)
                    if self.spec.barrier and end.barrier is None:
                        end.barrier = self._send_barrier()  # in flight while idle arrives
            elif channel == "stdin":
                if kind == "input_request":
                    await self._answer(msg, end, bridge, budget if extend else None)
            elif kind == "status":
                if probe is not None and msg["parent_header"].get("msg_id") == probe:
                    end.idle = end.idle_lost = True  # iopub is in order: our idle was sent, and dropped
                else:
                    end.idle = end.idle or msg["content"].get("execution_state") == "idle"
            elif (end.add(msg, self._keep) and extend) or end.replied:  # output that changed something
                budget.restart()  # the cell is alive (or, after its reply, its output still arrives)

    async def _settle_cancelled(self, msg_id: str, queue: asyncio.Queue, end: CellEnd, grace: float) -> None:
        try:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.km.interrupt_kernel(), grace)
            await self._collect(queue, end, grace, None, extend=False)
        finally:
            self._waiters.pop(msg_id, None)

    async def _answer(
        self, msg: dict[str, Any], end: CellEnd, bridge: Bridge | None, budget: Budget | None
    ) -> None:
        prompt = str(msg["content"].get("prompt", ""))
        self._asked += 1
        if prompt == MARKER + PING:
            answer = "pong"
            end.tool_calls += 1
        elif prompt.startswith(MARKER):
            if bridge is None:
                answer = json.dumps(
                    {"is_error": True, "text": "the cell was interrupted; tool() is not answered now"}
                )
            else:
                since = budget.pause() if budget is not None else 0.0  # a slow tool is not an idle cell
                try:
                    answer = await bridge(prompt[len(MARKER) :])
                finally:
                    if budget is not None:
                        budget.resume(since)
                end.tool_calls += 1
        else:
            end.inputs.append(prompt)
            answer = ""  # nobody is at the keyboard: an empty answer, never a hang
        self.kc.input(answer)

    def _send_barrier(self) -> tuple[str, asyncio.Queue]:
        msg_id = self._sent(self.kc.kernel_info())
        barrier: asyncio.Queue = asyncio.Queue()
        self._waiters[msg_id] = barrier
        return msg_id, barrier

    async def _barrier(self, queue: asyncio.Queue, end: CellEnd) -> None:
        """A kernel_info round trip: its iopub status leaves Deno after output the cell queued before it.

        It is sent as soon as the execute_reply arrives (the cell's output was queued before the reply).
        """
        msg_id, barrier = end.barrier or self._send_barrier()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(BARRIER_WAIT) as deadline:
                while True:
                    channel, msg = await barrier.get()
                    if channel == _DIED:
                        end.status = "died"
                        return
                    if channel == "shell":  # the kernel answered: its idle follows unless iopub dropped it
                        end.barrier_answered = True
                        deadline.reschedule(min(deadline.when() or loop.time(), loop.time() + SETTLE))
                    elif (
                        channel == "iopub"
                        and msg["msg_type"] == "status"
                        and msg["content"].get("execution_state") == "idle"
                    ):
                        break
        except TimeoutError:
            end.barrier_lost = True
        finally:
            self._waiters.pop(msg_id, None)
        self._take_queued(queue, end)

    def _take_queued(self, queue: asyncio.Queue, end: CellEnd) -> bool:
        """Add the cell's output already queued; returns whether the kernel died."""
        while not queue.empty():
            if self._take(queue.get_nowait(), end):
                return True
        return False

    def _take(self, item: tuple[str, Any], end: CellEnd) -> bool:
        channel, msg = item
        if channel == _DIED:
            end.status = "died"
            return True
        if channel == "iopub" and msg["msg_type"] != "status":
            end.add(msg, self._keep)
        return False

    async def _marker(self, queue: asyncio.Queue, end: CellEnd, idle: float, total: float) -> None:
        """Take the cell's output until a token written to stdout and to stderr came back on both.

        Each stream is one ordered pipe: what the cell printed comes before the token. The wait has the
        cell's budgets: ``idle`` seconds without output, ``total`` seconds in all (0: none).
        """
        token = f"\u2063tether-end:{uuid.uuid4().hex}"
        code = f"console.log({token!r}); console.error({token!r});"
        msg_id = self._sent(self.kc.execute(code, silent=True, store_history=False, allow_stdin=False))
        self._waiters[msg_id] = queue
        waiting = {"stdout", "stderr", "reply", "idle"}
        # SETTLE of silence while a token is missing: it was lost (seen once on a loaded machine)
        budget = Budget(asyncio.get_running_loop(), min(idle, SETTLE) if idle else SETTLE, total)
        try:
            async with asyncio.timeout_at(budget.until()) as budget.deadline:
                while waiting:
                    channel, msg = await queue.get()
                    if channel == _DIED:
                        end.status = "died"
                        return
                    budget.restart()  # anything from the kernel: it is not silent
                    ours = msg["parent_header"].get("msg_id") == msg_id
                    # the marker's own reply and idle as well: a cell sent while Deno still ran the marker
                    # sometimes never got its reply (1 in ~150 cells), and the cell was lost with its kernel
                    if channel == "shell" and ours and msg["msg_type"] == "execute_reply":
                        waiting.discard("reply")
                    if (
                        channel == "iopub"
                        and ours
                        and msg["msg_type"] == "status"
                        and msg["content"].get("execution_state") == "idle"
                    ):
                        waiting.discard("idle")
                    if channel != "iopub" or msg["msg_type"] == "status":
                        continue
                    if msg["msg_type"] == "stream":
                        text = msg["content"].get("text", "")
                        if token in text:
                            waiting.discard(msg["content"].get("name", ""))
                            text = text.replace(token + "\n", "", 1).replace(token, "", 1)
                            msg = {**msg, "content": {**msg["content"], "text": text}}
                    end.add(msg, self._keep)
        except TimeoutError:
            end.tail_lost = True
            log.debug("eval: end token(s) %s not back", sorted(waiting))
        finally:
            self._waiters.pop(msg_id, None)

    async def _drain(self, queue: asyncio.Queue, end: CellEnd) -> None:
        """Deno may send stream/execute_result after idle: take what comes until it is quiet (bounded)."""
        stop = time.monotonic() + 1.0
        while time.monotonic() < stop:
            try:
                async with asyncio.timeout(self.spec.drain):
                    item = await queue.get()
            except TimeoutError:
                return
            if self._take(item, end):
                return

    # -- shutdown -------------------------------------------------------------------------------

    async def shutdown(self, now: bool = False) -> None:
        """Stop the kernel (gracefully unless ``now``, then by force) and release the channels; bounded."""
        self._closing = True
        for task in self._readers:
            task.cancel()
        for task in self._readers:
            with contextlib.suppress(BaseException):
                await task
        self._readers = []
        if self.km is not None:
            try:
                await asyncio.wait_for(self.km.shutdown_kernel(now=now or self.dead), 5.0)
            except Exception:
                log.debug("eval: kernel shutdown failed", exc_info=True)
        if self.pid is not None:
            # what its cells started goes too, also what left the kernel's session or lost its parent
            await self._stop(self.pid, 0.5)
        if self.kc is not None:
            with contextlib.suppress(Exception):
                self.kc.stop_channels()
        if self._pidfd is not None and self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._pidfd)
                os.close(self._pidfd)
            self._pidfd = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        self.dead = True
