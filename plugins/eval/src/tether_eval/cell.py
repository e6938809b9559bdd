"""One cell on a live kernel, from its execute_request to its end (`Kernel.execute` runs it).

What is ours around jupyter_client's messaging (the kernel's readers hand this cell the messages
whose ``parent_header.msg_id`` is its request's, see `tether_eval.kernel`):
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
- a cell's two budgets, inactivity and total, are one ``asyncio.timeout`` (`tether_eval.timing`):
  output that changes what the model will see restarts the inactivity budget (an empty stream
  message or a clear of nothing does not), the total one never; both stand still while a `tool()`
  call from the cell is open (its input_request on the stdin channel, answered by the bridge);
- iopub may drop messages of a flood (ZeroMQ's queue limit: ours is raised to IOPUB_QUEUE, the
  kernel's PUB side still has one), the idle among them: when the idle
  has not come SETTLE seconds after the reply and the cell's last message, a kernel_info probe
  follows; its idle arriving first proves ours was dropped, and the cell ends saying output may
  be missing;
- what the cell keeps of its output, and the notes its end adds, are `tether_eval.cell_end`'s;
- the kernel's death (DIED on the cell's queue) ends the cell at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from tether_eval import timing
from tether_eval.cell_end import CellEnd
from tether_eval.timing import Budget

if TYPE_CHECKING:
    from tether_eval.kernel import Kernel

log = logging.getLogger("tether.eval")

MARKER = "\u2063tether-call:"  # the prefix of a tool() call's input_request (see kernel_side/)
PING = '{"ping": true}'  # the stdin probe at kernel start (answered here, never by a tool)
DIED = "died"  # the channel of the item a cell's queue gets when its kernel died

Bridge = Callable[[str], Awaitable[str]]  # the JSON payload of a tool() call -> the JSON answer


class Cell:
    """One cell on ``kernel``: its request, its messages to its end, the kernel's stdin answered meanwhile.

    ``keep_chars``: the stream characters it keeps (head and tail, see `CellEnd.add`).
    """

    def __init__(self, kernel: Kernel, keep_chars: int = 100_000) -> None:
        self.kernel = kernel
        self.keep = keep_chars

    async def run(
        self,
        code: str,
        *,
        timeout: float,
        grace: float,
        bridge: Bridge | None,
        silent: bool,
        user_expressions: dict[str, str] | None,
        total: float,
    ) -> CellEnd:
        """Send the cell and take its messages to its end (see `Kernel.execute`)."""
        if self.kernel.settling is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self.kernel.settling), grace + 1.0)
            self.kernel.settling = None
        if self.kernel.dead:
            return CellEnd("died", [])
        await self.kernel.quiesce()
        msg_id = self.kernel.sent(
            self.kernel.kc.execute(
                code,
                silent=silent,
                store_history=not silent,
                allow_stdin=True,
                user_expressions=user_expressions,
            )
        )
        queue: asyncio.Queue = asyncio.Queue()
        self.kernel.waiters[msg_id] = queue
        end = CellEnd("ok", [], after_lost=self.kernel.late)
        self.kernel.late = False
        started = time.monotonic()
        try:
            await self._collect(queue, end, timeout, bridge, extend=True, total=total)
            if end.status == "timeout":
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.kernel.km.interrupt_kernel(), grace)
                end.status = "interrupted"
                await self._collect(queue, end, grace, None, extend=False)
                if end.status in ("timeout", "died"):
                    end.status = "stuck"  # the interrupt did not take, or took the kernel with it
            if end.status in ("ok", "interrupted") and self.kernel.spec.barrier:
                await self._barrier(queue, end)
            if end.status in ("ok", "interrupted") and self.kernel.spec.barrier and end.printed:
                left = total - (time.monotonic() - started) if total else 0.0
                await self._marker(queue, end, timeout, max(left, 0.01) if total else 0.0)
                self.kernel.late = end.tail_lost
            if end.status in ("ok", "interrupted") and self.kernel.spec.drain:
                await self._drain(queue, end)
        except asyncio.CancelledError:
            # the call was cancelled (the client gave up): stop the cell too, or the next one queues behind
            # it; the next cell waits until this one ended (ipykernel aborts requests sent meanwhile)
            self.kernel.settling = asyncio.ensure_future(self._settle_cancelled(msg_id, queue, end, grace))
            raise
        finally:
            if self.kernel.settling is None:
                self.kernel.waiters.pop(msg_id, None)
            if end.barrier is not None:
                self.kernel.waiters.pop(end.barrier[0], None)
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
                    sent: str = self.kernel.sent(self.kernel.kc.kernel_info())
                    self.kernel.waiters[sent] = queue
                    probe = sent
                    budget.replied(max(timeout, timing.SETTLE))
        finally:
            if probe is not None:
                self.kernel.waiters.pop(probe, None)

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
            if channel == DIED:
                end.status = "died"
                return
            kind = msg["msg_type"]
            if channel == "shell":
                if kind == "execute_reply":
                    end.replied = True
                    end.reply = msg["content"]
                    budget.replied(timing.SETTLE)
                    if self.kernel.spec.barrier and end.barrier is None:
                        end.barrier = self._send_barrier()  # in flight while idle arrives
            elif channel == "stdin":
                if kind == "input_request":
                    await self._answer(msg, end, bridge, budget if extend else None)
            elif kind == "status":
                if probe is not None and msg["parent_header"].get("msg_id") == probe:
                    end.idle = end.idle_lost = True  # iopub is in order: our idle was sent, and dropped
                else:
                    end.idle = end.idle or msg["content"].get("execution_state") == "idle"
            elif (end.add(msg, self.keep) and extend) or end.replied:  # output that changed something
                budget.restart()  # the cell is alive (or, after its reply, its output still arrives)

    async def _settle_cancelled(self, msg_id: str, queue: asyncio.Queue, end: CellEnd, grace: float) -> None:
        try:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.kernel.km.interrupt_kernel(), grace)
            await self._collect(queue, end, grace, None, extend=False)
        finally:
            self.kernel.waiters.pop(msg_id, None)

    async def _answer(
        self, msg: dict[str, Any], end: CellEnd, bridge: Bridge | None, budget: Budget | None
    ) -> None:
        prompt = str(msg["content"].get("prompt", ""))
        self.kernel.asked += 1
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
        self.kernel.kc.input(answer)

    def _send_barrier(self) -> tuple[str, asyncio.Queue]:
        msg_id = self.kernel.sent(self.kernel.kc.kernel_info())
        barrier: asyncio.Queue = asyncio.Queue()
        self.kernel.waiters[msg_id] = barrier
        return msg_id, barrier

    async def _barrier(self, queue: asyncio.Queue, end: CellEnd) -> None:
        """A kernel_info round trip: its iopub status leaves Deno after output the cell queued before it.

        It is sent as soon as the execute_reply arrives (the cell's output was queued before the reply).
        """
        msg_id, barrier = end.barrier or self._send_barrier()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timing.BARRIER_WAIT) as deadline:
                while True:
                    channel, msg = await barrier.get()
                    if channel == DIED:
                        end.status = "died"
                        return
                    if channel == "shell":  # the kernel answered: its idle follows unless iopub dropped it
                        end.barrier_answered = True
                        deadline.reschedule(min(deadline.when() or loop.time(), loop.time() + timing.SETTLE))
                    elif (
                        channel == "iopub"
                        and msg["msg_type"] == "status"
                        and msg["content"].get("execution_state") == "idle"
                    ):
                        break
        except TimeoutError:
            end.barrier_lost = True
        finally:
            self.kernel.waiters.pop(msg_id, None)
        self._take_queued(queue, end)

    def _take_queued(self, queue: asyncio.Queue, end: CellEnd) -> bool:
        """Add the cell's output already queued; returns whether the kernel died."""
        while not queue.empty():
            if self._take(queue.get_nowait(), end):
                return True
        return False

    def _take(self, item: tuple[str, Any], end: CellEnd) -> bool:
        channel, msg = item
        if channel == DIED:
            end.status = "died"
            return True
        if channel == "iopub" and msg["msg_type"] != "status":
            end.add(msg, self.keep)
        return False

    async def _marker(self, queue: asyncio.Queue, end: CellEnd, idle: float, total: float) -> None:
        """Take the cell's output until a token written to stdout and to stderr came back on both.

        Each stream is one ordered pipe: what the cell printed comes before the token. The wait has the
        cell's budgets: ``idle`` seconds without output, ``total`` seconds in all (0: none).
        """
        token = f"\u2063tether-end:{uuid.uuid4().hex}"
        code = f"console.log({token!r}); console.error({token!r});"
        msg_id = self.kernel.sent(
            self.kernel.kc.execute(code, silent=True, store_history=False, allow_stdin=False)
        )
        self.kernel.waiters[msg_id] = queue
        waiting = {"stdout", "stderr", "reply", "idle"}
        # SETTLE of silence while a token is missing: it was lost (seen once on a loaded machine)
        budget = Budget(
            asyncio.get_running_loop(), min(idle, timing.SETTLE) if idle else timing.SETTLE, total
        )
        try:
            async with asyncio.timeout_at(budget.until()) as budget.deadline:
                while waiting:
                    channel, msg = await queue.get()
                    if channel == DIED:
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
                    end.add(msg, self.keep)
        except TimeoutError:
            end.tail_lost = True
            log.debug("eval: end token(s) %s not back", sorted(waiting))
        finally:
            self.kernel.waiters.pop(msg_id, None)

    async def _drain(self, queue: asyncio.Queue, end: CellEnd) -> None:
        """Deno may send stream/execute_result after idle: take what comes until it is quiet (bounded)."""
        stop = time.monotonic() + 1.0
        while time.monotonic() < stop:
            try:
                async with asyncio.timeout(self.kernel.spec.drain):
                    item = await queue.get()
            except TimeoutError:
                return
            if self._take(item, end):
                return
