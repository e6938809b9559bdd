"""One live debug session: an adapter process (or a connection), the debuggee, and what it last did.

The launch sequence is the one measured to work for debugpy, lldb-dap and delve: ``initialize`` ->
``launch`` sent without waiting -> the ``initialized`` event -> ``setBreakpoints`` per file and
``setExceptionBreakpoints`` -> ``configurationDone`` -> the launch response (debugpy answers launch
only after configurationDone; lldb-dap sends ``initialized`` only after answering launch) -> a stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import attrs

from tether import sandbox

from tether_debug.adapters import AdapterDef, Located
from tether_debug.dap import DapClient, DapError

log = logging.getLogger("tether.debug")

STOP_EVENTS = ("stopped", "terminated", "exited")
OUTPUT_KEEP = 1_000_000  # characters of unread output kept; older output is dropped and counted
LISTEN_RE = re.compile(rb"listening at:?\s*\[?([0-9a-fA-F.:]+?)\]?:(\d+)")


@attrs.frozen
class Stop:
    reason: str
    thread_id: int | None
    file: str | None  # absolute path as the adapter gave it
    line: int | None
    function: str | None = None
    description: str | None = None  # exception text, when the stop is an exception
    # the innermost frame with a source under the root, when the stop itself is outside (a Go panic
    # stops in the runtime): (file, line, function)
    project_frame: tuple[str, int, str] | None = None

    def data(self, relpath) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "thread_id": self.thread_id,
            "file": relpath(self.file) if self.file else None,
            "line": self.line,
        }


@attrs.frozen
class Ended:
    """The debuggee is gone: how it ended."""

    exit_code: int | None
    how: str


class OutputBuffer:
    """The debuggee's stdout/stderr since the last read, bounded in memory (oldest dropped, counted)."""

    def __init__(self) -> None:
        self._parts: deque[str] = deque()
        self._size = 0
        self.dropped = 0
        self.closed = False  # after `terminated`: lldb-dap floods output while it dies

    def add(self, text: str) -> None:
        if self.closed or not text:
            return
        text = text.replace("\r\n", "\n")  # lldb-dap runs the program on a pty
        self._parts.append(text)
        self._size += len(text)
        while self._size > OUTPUT_KEEP and self._parts:
            old = self._parts.popleft()
            self._size -= len(old)
            self.dropped += len(old)

    def take(self) -> tuple[str, int]:
        text = "".join(self._parts)
        dropped = self.dropped
        self._parts.clear()
        self._size = 0
        self.dropped = 0
        return text, dropped


class SessionError(Exception):
    """Starting or driving the adapter failed in a way the model should read (becomes a ToolError)."""


class Session:
    def __init__(self, adapter: AdapterDef, *, conversation_id: str, ttl: float, request_timeout: float) -> None:
        self.adapter = adapter
        self.conversation_id = conversation_id
        self.started = time.monotonic()
        self.deadline = self.started + ttl
        self.ttl = ttl
        self.request_timeout = request_timeout
        self.proc: asyncio.subprocess.Process | None = None
        self.client: DapClient | None = None
        self.capabilities: dict[str, Any] = {}
        self.output = OutputBuffer()
        self.stderr_tail: deque[str] = deque(maxlen=20)
        self.stop: Stop | None = None
        self.exit_code: int | None = None
        self.frames: dict[int, dict[str, Any]] = {}  # frames fetched at the current stop
        self.total_frames = 0  # the depth the adapter reported at the last stackTrace
        self.references: set[int] = set()  # variable references handed out at the current stop
        self.consumed = 0  # events before this index have been turned into stops or ends
        self.top_frame: int | None = None  # innermost frame of the stopped thread: evaluate's default
        self.breakpoints: dict[str, list[dict[str, Any]]] = {}  # path -> adapter's answer
        self.program: str = ""
        self.root: Path | None = None
        self.attached = False
        self.lock = asyncio.Lock()
        self._tasks: list[asyncio.Task] = []
        self._children: list[int] = []  # processes started for runInTerminal
        self._run: Any = None  # the run: tags, tracks and stops the processes started here
        self.sandboxed = False  # the adapter (and so the program) runs inside the run's envelope

    # -- starting ---------------------------------------------------------------------------------

    async def start(self, located: Located, root: Path, run: Any, start_timeout: float) -> None:
        """Start the adapter process and connect (stdio, or the TCP port it prints)."""
        self._run = run
        tcp = self.adapter.transport == "tcp"
        argv = list(located.argv)
        envelope = sandbox.envelope(run, "debug")
        self.sandboxed = envelope is not None and await envelope.check()  # a ToolError: refused, nothing runs
        if self.sandboxed:
            assert envelope is not None
            if tcp and not envelope.shares_loopback:  # its port is not reachable from here: over stdio instead
                argv, tcp = [sys.executable, "-I", sandbox.RELAY, "stdio", "--", *argv], False
            argv = list(envelope.wrap(argv))
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=str(root),
                env=run.child_env(),  # the debuggee inherits the tag: stopped with the adapter wherever it went
                start_new_session=True,
                limit=2**24,
            )
        except OSError as exc:
            raise SessionError(f"could not start the {self.adapter.id} adapter ({' '.join(located.argv)}): {exc}") from None
        run.track_process(self.proc)
        self._tasks.append(asyncio.get_running_loop().create_task(self._drain_stderr()))
        if tcp:
            host, port = await self._read_port(start_timeout)
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, limit=2**24), start_timeout)
            except (TimeoutError, OSError) as exc:
                raise SessionError(f"could not connect to the {self.adapter.id} adapter at {host}:{port}: {exc}") from None
            if self.adapter.stdout_is_program_output:
                self._tasks.append(asyncio.get_running_loop().create_task(self._drain_stdout()))
        else:
            assert self.proc.stdout is not None
            reader, writer = self.proc.stdout, self.proc.stdin
        self._connect(reader, writer)

    async def connect(self, host: str, port: int, timeout: float) -> None:
        """Attach mode: speak DAP straight to a port a debugger listens on (e.g. ``debugpy --listen``)."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, limit=2**24), timeout)
        except (TimeoutError, OSError) as exc:
            raise SessionError(
                f"nothing accepts connections on {host}:{port} ({type(exc).__name__}: {exc}). Start the program "
                f"under a debugger listening there first, e.g. `python -m debugpy --listen {host}:{port} --wait-for-client app.py`."
            ) from None
        self.attached = True
        self._connect(reader, writer)

    def _connect(self, reader: asyncio.StreamReader, writer: Any) -> None:
        self.client = DapClient(reader, writer, on_event=self._on_event, on_reverse=self._on_reverse, request_timeout=self.request_timeout)
        self.client.start()

    async def _read_port(self, timeout: float) -> tuple[str, int]:
        assert self.proc is not None and self.proc.stdout is not None
        seen = b""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SessionError(f"the {self.adapter.id} adapter did not say which port it listens on within {timeout:g} s")
            try:
                line = await asyncio.wait_for(self.proc.stdout.readline(), left)
            except TimeoutError:
                continue
            if not line:
                raise SessionError(f"the {self.adapter.id} adapter exited before listening: {self._stderr_text() or seen.decode(errors='replace')}")
            seen += line
            if m := LISTEN_RE.search(line):
                return m.group(1).decode(), int(m.group(2))

    async def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        with contextlib.suppress(asyncio.CancelledError, OSError, ValueError):
            while line := await self.proc.stderr.readline():
                text = line.decode(errors="replace")
                self.stderr_tail.append(text.rstrip())
                if self.adapter.stdout_is_program_output:
                    self.output.add(text)

    async def _drain_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        await self._pump_stream(self.proc.stdout)

    async def _pump_stream(self, stream: asyncio.StreamReader) -> None:
        """Copy a stream of the program's output into the buffer until it ends (or we stop it)."""
        with contextlib.suppress(asyncio.CancelledError, OSError, ValueError):
            while chunk := await stream.read(65536):
                self.output.add(chunk.decode(errors="replace"))

    def _stderr_text(self) -> str:
        return " | ".join(line for line in self.stderr_tail if line)[-1500:]

    # -- events and reverse requests ----------------------------------------------------------------

    def _on_event(self, message: dict[str, Any]) -> None:
        event = message.get("event")
        body = message.get("body") or {}
        if event == "output":
            if body.get("category", "console") in self.adapter.output_categories:
                self.output.add(body.get("output", ""))
        elif event == "exited":
            self.exit_code = body.get("exitCode")
        elif event == "terminated" and self.adapter.drop_output_after_terminated:
            self.output.closed = True
        elif event == "breakpoint":
            bp = body.get("breakpoint") or {}
            for answers in self.breakpoints.values():
                for i, known in enumerate(answers):
                    if bp.get("id") is not None and known.get("id") == bp.get("id"):
                        answers[i] = {**known, **bp}

    async def _on_reverse(self, command: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        if command == "runInTerminal" and not self.sandboxed:
            # We have no terminal: run it as a plain child of ours, tracked like the adapter.
            proc = await asyncio.create_subprocess_exec(
                *arguments.get("args", []),
                cwd=arguments.get("cwd") or None,
                env=self._run.child_env({**os.environ, **{k: v for k, v in (arguments.get("env") or {}).items() if v is not None}}),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
            self._run.track_process(proc)
            self._children.append(proc.pid)
            if proc.stdout is not None:
                self._tasks.append(asyncio.get_running_loop().create_task(self._pump_stream(proc.stdout)))
            return {"processId": proc.pid}
        return None  # startDebugging, runInTerminal in a sandbox and the rest: refused, never left hanging


    # -- protocol ----------------------------------------------------------------------------------

    async def initialize(self) -> None:
        assert self.client is not None
        self.capabilities = await self.client.request(
            "initialize",
            {
                "clientID": "tether",
                "clientName": "tether",
                "adapterID": self.adapter.id,
                "pathFormat": "path",
                "linesStartAt1": True,
                "columnsStartAt1": True,
                "supportsVariableType": True,
                "supportsRunInTerminalRequest": True,
                "supportsStartDebuggingRequest": False,
                "locale": "en",
            },
        )

    async def configure(
        self, request: str, arguments: dict[str, Any], pending: dict[str, list[int]], timeout: float
    ) -> None:
        """Send launch/attach, then breakpoints and configurationDone at `initialized`, then await the answer."""
        assert self.client is not None
        client = self.client
        start = len(client.events)
        answer = client.send(request, arguments)
        await client._drain()
        hit = await client.wait_event(("initialized",), start, timeout)
        if hit is None:
            failure = answer.exception() if answer.done() and not answer.cancelled() else None
            if failure is not None:
                raise failure  # the adapter refused the launch itself: its own words say why
            why = "the adapter closed the connection" if client.closed else f"no 'initialized' event within {timeout:g} s"
            raise SessionError(f"{request} did not complete: {why}. {self._stderr_text()}".strip())
        for path, lines in pending.items():
            await self.set_breakpoints(path, lines)
        filters = self._exception_filters()
        if filters is not None:
            await client.request("setExceptionBreakpoints", {"filters": filters})
        await client.request("configurationDone", {})
        await client.wait(answer, request, timeout)

    def _exception_filters(self) -> list[str] | None:
        offered = {f.get("filter") for f in self.capabilities.get("exceptionBreakpointFilters") or ()}
        if not offered:
            return None
        return [f for f in self.adapter.exception_filters if f in offered]

    async def set_breakpoints(self, path: str, lines: list[int]) -> list[dict[str, Any]]:
        assert self.client is not None
        body = await self.client.request(
            "setBreakpoints",
            {"source": {"path": path, "name": Path(path).name}, "breakpoints": [{"line": n} for n in lines], "lines": list(lines)},
        )
        answers = [dict(b) for b in body.get("breakpoints") or ()]
        for requested, answer in zip(lines, answers):
            answer.setdefault("requested", requested)
        if lines:
            self.breakpoints[path] = answers
        else:
            self.breakpoints.pop(path, None)
        return answers

    async def wait_stop(self, after: int, timeout: float) -> Stop | Ended | None:
        """The next stop or the end at or after event ``after``; None while still running at the bound."""
        assert self.client is not None
        hit = self.client.find_event(STOP_EVENTS, after)
        if hit is None and timeout > 0:
            hit = await self.client.wait_event(STOP_EVENTS, after, timeout)
        if hit is None:
            if self.client.closed:
                return self._end("the debug adapter closed its connection")
            return None
        index, event = hit
        self.consumed = index + 1
        if event["event"] != "stopped":
            return self._end("exited" if event["event"] == "exited" else "terminated")
        body = event.get("body") or {}
        thread_id = body.get("threadId")
        if thread_id is None:
            threads = (await self.client.request("threads")).get("threads") or []
            thread_id = threads[0]["id"] if threads else None
        self.frames = {}
        self.references = set()
        reason = body.get("reason", "unknown")
        # both at once: each request to debugpy costs ~44 ms of its own latency
        frames_task = self.stack_trace(thread_id, 30) if thread_id is not None else _nothing([])
        text_task = self._exception_text(thread_id, body) if reason == "exception" else _nothing(None)
        frames, description = await asyncio.gather(frames_task, text_task)
        frame = frames[0] if frames else None
        self.top_frame = frame["id"] if frame else None
        self.stop = Stop(
            reason=reason,
            thread_id=thread_id,
            file=((frame or {}).get("source") or {}).get("path"),
            line=(frame or {}).get("line"),
            function=(frame or {}).get("name"),
            description=description,
            project_frame=self._project_frame(frames),
        )
        return self.stop

    def _project_frame(self, frames: list[dict[str, Any]]) -> tuple[str, int, str] | None:
        root = self.root
        if root is None or not frames:
            return None

        def inside(f: dict[str, Any]) -> bool:
            path = (f.get("source") or {}).get("path")
            return bool(path) and Path(path).is_absolute() and Path(path).resolve().is_relative_to(root)

        if inside(frames[0]):
            return None
        for f in frames[1:]:
            if inside(f):
                return (f["source"]["path"], f.get("line") or 0, f.get("name") or "")
        return None

    def _end(self, how: str) -> Ended:
        self.stop = None
        self.frames = {}
        self.references = set()
        return Ended(self.exit_code, how)

    async def _exception_text(self, thread_id: int | None, body: dict[str, Any]) -> str | None:
        if thread_id is not None and self.client is not None and self.capabilities.get("supportsExceptionInfoRequest"):
            try:
                info = await self.client.request("exceptionInfo", {"threadId": thread_id})
                kind = info.get("exceptionId") or ""
                text = info.get("description") or ""
                return f"{kind}: {text}".strip(": ") or None
            except DapError:
                pass
        return body.get("text") or body.get("description")

    async def stack_trace(self, thread_id: int, levels: int) -> list[dict[str, Any]]:
        assert self.client is not None
        body = await self.client.request("stackTrace", {"threadId": thread_id, "startFrame": 0, "levels": levels})
        frames = list(body.get("stackFrames") or [])
        for f in frames:
            self.frames[f["id"]] = {**f, "thread_id": thread_id}
        self.total_frames = body.get("totalFrames") or len(frames)
        return frames

    # -- ending ------------------------------------------------------------------------------------

    async def close(self, grace: float = 2.0) -> None:
        """Disconnect (terminating a launched debuggee), close stdin, and kill what is left after ``grace``."""
        client = self.client
        if client is not None and not client.closed:
            try:
                fut = client.send("disconnect", {"terminateDebuggee": not self.attached, "restart": False})
                await client._drain()
                await client.wait(fut, "disconnect", min(grace, 1.5))
            except DapError:
                pass
        if client is not None:
            await client.close()  # debugpy's adapter exits only when its stdin closes
        proc = self.proc
        if proc is not None and proc.returncode is None:
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except TimeoutError:
                pass
        # delve's program output is its stdout: let the drains reach end of stream before stopping them
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=0.5 if proc is None or proc.returncode is not None else 0.05)
        for task in self._tasks:
            task.cancel()
        # the adapter may exit before its debuggee (lldb-dap crashes on shutdown), and a debuggee's
        # daemon may leave the session: they carry the adapter's tag, and stop_process follows it
        for pid in (*self._children, proc.pid if proc else None):
            if pid is not None:
                await self._run.stop_process(pid, grace)
        if proc is not None and proc.returncode is None:
            try:
                await asyncio.wait_for(proc.wait(), 1.0)
            except TimeoutError:
                pass


async def _nothing(value: Any) -> Any:
    return value
