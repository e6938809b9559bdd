"""A small asyncio Debug Adapter Protocol client: framing, one reader task, bounded waits.

DAP framing is the LSP base protocol (``Content-Length`` headers, then JSON). There is no well-kept
Python DAP client library, so this is ours: requests carry per-request timeouts, events land in a
log that waiters scan from a cursor (a stop that arrives before anyone waits is not lost), and
reverse requests (``runInTerminal``, ``startDebugging``) are always answered - an adapter that
gets no answer stalls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from tether import tracing

log = logging.getLogger("tether.debug")

EventSink = Callable[[dict[str, Any]], None]
ReverseHandler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | None]]

# Events nobody waits on: kept out of the log so a flood (lldb-dap's output) cannot grow it.
UNLOGGED = frozenset({"output", "telemetry", "loadedSource", "module", "process", "progressUpdate"})


class DapError(Exception):
    """The adapter refused a request (``success: false``); the message is the adapter's own."""

    def __init__(self, command: str, message: str) -> None:
        super().__init__(message)
        self.command = command
        self.message = message


class DapTimeout(DapError):
    pass


class DapClosed(DapError):
    pass


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """One framed message, or None at end of stream."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None  # a clean end between messages
        raise
    length = None
    for line in head.split(b"\r\n"):
        name, _, value = line.decode("ascii", "replace").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    if length is None:
        raise ValueError(f"a DAP message without Content-Length: {head[:200]!r}")
    body = await reader.readexactly(length)
    return json.loads(body)


def _time_out(fut: asyncio.Future, command: str, limit: float) -> None:
    if not fut.done():
        fut.set_exception(
            DapTimeout(command, f"the debug adapter did not answer '{command}' within {limit:g} s")
        )


class DapClient:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: Any,
        *,
        on_event: EventSink | None = None,
        on_reverse: ReverseHandler | None = None,
        request_timeout: float = 10.0,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._on_event = on_event
        self._on_reverse = on_reverse
        self.request_timeout = request_timeout
        self._seq = 0
        self._pending: dict[int, tuple[str, asyncio.Future]] = {}
        self.events: list[dict[str, Any]] = []
        self._changed = asyncio.Condition()
        self.closed = False
        self._task: asyncio.Task | None = None
        self._reverse_tasks: set[asyncio.Task] = set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._read_loop(), name="dap-reader")

    # -- sending ----------------------------------------------------------------------------------

    def _write(self, message: dict[str, Any]) -> None:
        if self.closed:
            raise DapClosed(message.get("command", "?"), "the debug adapter has closed its connection")
        self._seq += 1
        message["seq"] = self._seq
        self._writer.write(encode(message))

    def send(self, command: str, arguments: dict[str, Any] | None = None) -> asyncio.Future:
        """Send a request without waiting: the future resolves to the response body (or raises DapError)."""
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        message: dict[str, Any] = {"type": "request", "command": command}
        if arguments is not None:
            message["arguments"] = arguments
        self._write(message)
        self._pending[self._seq] = (command, fut)
        return fut

    async def wait(self, fut: asyncio.Future, command: str, timeout: float | None = None) -> dict[str, Any]:
        limit = self.request_timeout if timeout is None else timeout
        if fut.done():
            return fut.result()
        # a plain timer: cheaper than wait_for (a task) or asyncio.timeout, and requests are many
        timer = asyncio.get_running_loop().call_later(limit, _time_out, fut, command, limit)
        try:
            return await fut
        finally:
            timer.cancel()

    async def request(
        self, command: str, arguments: dict[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        # a child span of the traced tool call that asks it (see tether.tracing)
        with tracing.span(f"dap {command}", {"rpc.system": "dap", "rpc.method": command}):
            fut = self.send(command, arguments)
            await self._drain()
            return await self.wait(fut, command, timeout)

    async def _drain(self) -> None:
        transport = getattr(self._writer, "transport", None)
        if transport is not None and not transport.is_closing() and transport.get_write_buffer_size() == 0:
            return  # everything was written straight through: nothing to wait for
        try:
            async with asyncio.timeout(
                self.request_timeout
            ):  # an adapter that stops reading must not hang us
                await self._writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise DapClosed("write", f"the debug adapter's connection broke ({exc})") from None
        except TimeoutError:
            raise DapTimeout(
                "write", f"the debug adapter stopped reading requests for {self.request_timeout:g} s"
            ) from None

    # -- waiting for events -------------------------------------------------------------------------

    def find_event(self, names: Iterable[str], after: int) -> tuple[int, dict[str, Any]] | None:
        """Without waiting: the first event named in ``names`` at log index >= ``after``."""
        wanted = frozenset(names)
        for i in range(after, len(self.events)):
            if self.events[i].get("event") in wanted:
                return i, self.events[i]
        return None

    async def wait_event(
        self, names: Iterable[str], after: int, timeout: float | None = None
    ) -> tuple[int, dict[str, Any]] | None:
        """The first event named in ``names`` at log index >= ``after``: (index, event); None on timeout
        or close (None: no bound of its own, the caller's)."""
        wanted = frozenset(names)

        def find() -> tuple[int, dict[str, Any]] | None:
            return self.find_event(wanted, after)

        async def loop() -> tuple[int, dict[str, Any]] | None:
            async with self._changed:
                while True:
                    hit = find()
                    if hit is not None or self.closed:
                        return hit
                    await self._changed.wait()

        try:
            return await asyncio.wait_for(loop(), timeout)
        except TimeoutError:
            return None

    # -- reading -------------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        try:
            while True:
                message = await read_message(self._reader)
                if message is None:
                    break
                kind = message.get("type")
                if kind == "response":
                    entry = self._pending.pop(message.get("request_seq", -1), None)
                    if entry is None:
                        continue
                    command, fut = entry
                    if fut.done():
                        continue
                    if message.get("success", False):
                        fut.set_result(message.get("body") or {})
                    else:
                        text = message.get("message") or "request failed"
                        detail = ((message.get("body") or {}).get("error") or {}).get("format")
                        fut.set_exception(DapError(command, detail or text))
                elif kind == "event":
                    if self._on_event is not None:
                        try:
                            self._on_event(message)
                        except Exception:
                            log.exception("debug event handler failed")
                    if message.get("event") not in UNLOGGED:
                        async with self._changed:
                            self.events.append(message)
                            self._changed.notify_all()
                elif kind == "request":
                    task = asyncio.get_running_loop().create_task(self._answer(message))
                    self._reverse_tasks.add(task)
                    task.add_done_callback(self._reverse_tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError) as exc:
            log.debug("dap reader stopped: %s", exc)
        except asyncio.CancelledError:
            pass
        finally:
            self.closed = True
            for command, fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(
                        DapClosed(command, "the debug adapter closed its connection before answering")
                    )
                    fut.exception()  # mark retrieved: nobody may be waiting any more
            self._pending.clear()
            try:
                async with self._changed:
                    self._changed.notify_all()
            except RuntimeError:
                pass

    async def _answer(self, request: dict[str, Any]) -> None:
        command = request.get("command", "")
        body: dict[str, Any] | None = None
        error = f"tether does not support the reverse request '{command}'"
        if self._on_reverse is not None:
            try:
                body = await self._on_reverse(command, request.get("arguments") or {})
                error = "" if body is not None else error
            except Exception as exc:  # noqa: BLE001 - answer with the failure rather than stall the adapter
                error = f"{type(exc).__name__}: {exc}"
        response = {
            "type": "response",
            "request_seq": request.get("seq"),
            "command": command,
            "success": not error,
        }
        if error:
            response["message"] = error
        else:
            response["body"] = body
        try:
            self._write(response)
            await self._drain()
        except DapError as exc:
            log.debug("could not answer %s: %s", command, exc)

    async def close(self) -> None:
        """Stop reading and close our end of the connection (for a stdio adapter: its stdin)."""
        with contextlib.suppress(OSError, RuntimeError):
            self._writer.close()
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._task, 1.0)
        for task in list(self._reverse_tasks):
            task.cancel()
