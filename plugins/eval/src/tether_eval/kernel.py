"""One live Jupyter kernel of a run: start, the channels it answers on, interrupt, shut down.

Messaging is jupyter_client's; what is ours is the discipline around it (a cell's own story, from its
request to its end, is `tether_eval.cell`'s):
- one reader task per channel (iopub, shell, stdin) awaits messages (no polling loop) and hands each
  to the cell whose ``parent_header.msg_id`` it answers; anything else is dropped, and so are iopub's
  ``execute_input`` and non-idle ``status`` (nobody waits for them); a reader that ends while the
  kernel is up gives the kernel up (it would be deaf);
- before any cell, the stdin channel is probed (`probe_stdin`): an input_request sent before our
  socket finished its handshake is dropped, and a tool() call would wait forever;
- Deno loses a request that reaches it while it still answers one before it (it runs the code and
  never sends the execute_reply: the cell then waited its whole inactivity budget and the kernel was
  stopped), so nothing is sent to Deno until every request of ours has its shell reply and its idle
  (``quiesce``): a barrier or probe cut short by its bound is still waited for before the next cell;
- the kernel's death is noticed through a pidfd (or a waiting thread) and ends the cell at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether import tracing

from tether_eval import timing
from tether_eval.cell import DIED, MARKER, Cell

if TYPE_CHECKING:
    import subprocess

    from tether_eval.cell import Bridge
    from tether_eval.cell_end import CellEnd

# MARKER (the prefix of a tool() call's input_request, defined with the cell) is imported from here too
__all__ = ["MARKER", "Kernel", "KernelDied", "KernelSpec"]

log = logging.getLogger("tether.eval")

# How long a Deno request waits for the kernel to finish answering the requests of ours before it
# (see ``Kernel.quiesce``): Deno loses a request sent while it still answers another one.
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


class KernelDied(Exception):
    pass


class Kernel:
    """One kernel process of a run and its channels; `execute` runs a cell on it (see `tether_eval.cell`)."""

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
        self.waiters: dict[str, asyncio.Queue] = {}
        self._readers: list[asyncio.Task] = []
        self._pidfd: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._log_file: io.BufferedWriter | None = None
        self.settling: asyncio.Future | None = None  # a cancelled cell being interrupted
        self.asked = 0  # input_requests heard (the stdin probe's)
        self.late = False  # the last cell's marker did not come back: its output may reach the next cell
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
            msg_id = self.sent(self.kc.kernel_info())
            queue = self.waiters[msg_id] = asyncio.Queue()
            replied = heard = False
            try:
                async with asyncio.timeout(min(1.0, max(0.05, deadline - time.monotonic()))) as wait:
                    while not (replied and heard):
                        channel, _ = await queue.get()
                        if channel == DIED:
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
                self.waiters.pop(msg_id, None)
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
                asked = self.asked
                nudge = loop.call_later(wait, lambda asked=asked: self.asked == asked and self.kc.input(""))
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

    def _watch_death(self, proc: subprocess.Popen[bytes]) -> None:
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
        for queue in self.waiters.values():
            queue.put_nowait((DIED, None))
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
            queue = self.waiters.get(parent) if isinstance(parent, str) else None
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

    def sent(self, msg_id: str) -> str:
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

    async def quiesce(self) -> None:
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
            until = stop if not all(replies) else min(stop, max(replies) + timing.SETTLE)
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
            end = await Cell(self, keep_chars).run(
                code,
                timeout=timeout,
                grace=grace,
                bridge=bridge,
                silent=silent,
                user_expressions=user_expressions,
                total=total,
            )
            tracing.annotate({"tether.cell_status": end.status})
            return end

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
