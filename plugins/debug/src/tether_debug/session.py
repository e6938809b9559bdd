"""One live debug session: an adapter process (or a connection), the debuggee, and what it last did.

The launch sequence is the one measured to work for debugpy, lldb-dap and delve: ``initialize`` and
``launch`` sent back to back -> the ``initialized`` event -> ``setBreakpoints`` per file and
``setExceptionBreakpoints`` -> ``configurationDone`` -> the launch response (debugpy answers launch
only after configurationDone; lldb-dap sends ``initialized`` only after answering launch) -> a stop.

Beside it: the build before the adapter starts (`tether_debug.build`), the breakpoints it sends and
the adapter's answers (`tether_debug.breakpoints`), and the program's output it keeps until read
(`tether_debug.output`).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import re
import signal
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether import sandbox, tracing

from tether_debug.adapters import AdapterDef, Located
from tether_debug.breakpoints import (
    condition_failures,
    set_breakpoints,
    set_exceptions,
    set_function_breakpoints,
)
from tether_debug.dap import DapClient, DapClosed, DapError, DapTimeout
from tether_debug.options import DebugOptions
from tether_debug.output import OutputBuffer

if TYPE_CHECKING:
    from tether.run import Run

    from tether_debug.breakpoints import Plan

log = logging.getLogger("tether.debug")

STOP_EVENTS = ("stopped", "terminated", "exited")
MAX_LOGGED = 200  # logpoint lines kept for one call's result (all of them are in `output`)
MAX_EXCEPTION_STACK = 12  # lines of an exception's own stack shown with the stop
SIGNAL_NAME = re.compile(r"\bSIG[A-Z0-9]+\b")
LISTEN_RE = re.compile(rb"listening at:?\s*\[?([0-9a-fA-F.:]+?)\]?:(\d+)")


@attrs.frozen
class Stop:
    reason: str
    thread_id: int | None
    file: str | None  # absolute path as the adapter gave it
    line: int | None
    function: str | None = None
    description: str | None = None  # exception text, when the stop is an exception
    exception: dict[str, Any] | None = None  # exceptionInfo: type, message, the top of its stack
    # the innermost frame with a source under the root, when the stop itself is outside (a Go panic
    # stops in the runtime): (file, line, function)
    project_frame: tuple[str, int, str] | None = None
    # the top frame's first scope (its locals), fetched with the stop: (scope name, variables)
    snapshot: tuple[str, list[dict[str, Any]]] | None = None
    # why there is no stack at this stop, in the adapter's words (delve at entry: no goroutine yet)
    no_stack: str | None = None
    stack_late: bool = False  # the adapter did not answer stackTrace in time (no_stack says so)

    def data(self, relpath: Callable[[str], str]) -> dict[str, Any]:
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
    signal: int | None = None  # the signal that killed the program, when the adapter's report shows one


class SessionError(Exception):
    """Starting or driving the adapter failed in a way the model should read (becomes a ToolError)."""


class LaunchBound:
    """``debug_launch_timeout``: one deadline for a launch as a whole, shared by its phases in turn
    (the build, the adapter's start, its configuration). Running out says in which phase, and how
    long each took ("other": the time between them)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = asyncio.get_running_loop().time() + seconds
        self.spent: list[tuple[str, float]] = []  # the phases run so far, with their seconds

    @contextlib.asynccontextmanager
    async def phase(self, name: str, detail: str = "") -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        began = loop.time()
        bound = asyncio.timeout_at(self.deadline)
        try:
            async with bound:
                yield
        except TimeoutError:
            if not bound.expired():
                raise
            self.spent.append((name, loop.time() - began))
            # what ran between the phases (making the build folder, starting a stdio adapter) counts too
            other = loop.time() - (self.deadline - self.seconds) - sum(s for _, s in self.spent)
            took = ", ".join(f"{n} {s:.1f} s" for n, s in [*self.spent, ("other", other)])
            raise SessionError(
                f"the launch did not finish within {self.seconds:g} s: the time ran out in {name}{detail} "
                f"(time taken: {took}). "
                "debug_launch_timeout bounds the whole launch (the build, the adapter's start and its "
                "configuration together): raise that run option if this one needs longer"
            ) from None
        self.spent.append((name, loop.time() - began))


class Session:
    """One conversation's session in ``run``, of ``program`` (as the model is told it) under ``adapter``."""

    def __init__(self, adapter: AdapterDef, run: Run, program: str) -> None:
        options = run.options.of(DebugOptions)
        ttl = options.debug_ttl
        self.adapter = adapter
        self.run = run  # tags, tracks and stops the processes started here, and removes the scratch
        self.conversation_id = run.conversation_id or ""
        self.program = program
        self.root = run.root
        self.started = time.monotonic()
        self.deadline = self.started + ttl
        self.ttl = ttl
        self.request_timeout = options.debug_request_timeout
        self.proc: asyncio.subprocess.Process | None = None
        self.client: DapClient | None = None
        self.capabilities: dict[str, Any] = {}
        self.output = OutputBuffer()
        self.stderr_tail: deque[str] = deque(maxlen=20)
        self.stop: Stop | None = None
        self.exit_code: int | None = None
        self.frames: dict[int, dict[str, Any]] = {}  # frames fetched at the current stop
        # a frame's source path as the model sees it, worked out once a session (`inspection.frame_path`)
        self.shown_paths: dict[str, str] = {}
        self.total_frames = 0  # the depth the adapter reported at the last stackTrace
        self.references: set[int] = set()  # variable references handed out at the current stop
        self.consumed = 0  # events before this index have been turned into stops or ends
        self.top_frame: int | None = None  # innermost frame of the stopped thread: evaluate's default
        self.breakpoints: dict[str, list[dict[str, Any]]] = {}  # path -> one row per requested line
        self.function_breakpoints: list[dict[str, Any]] = []
        self.exceptions: tuple[str, str] = ("uncaught", "")  # the mode, and what setting it said
        self.logged: list[str] = []  # logpoint lines since the running call began (read by its result)
        self.last_signal: int | None = None  # the signal of the last stop on one (lldb: SIGSEGV)
        # what the adapter said of breakpoints meanwhile (a condition that failed)
        self.notices: list[str] = []
        self.logpoint: re.Pattern[str] | None = None  # the lines the logpoints print (`breakpoints`)
        self.attached = False
        self.lock = asyncio.Lock()
        self._tasks: list[asyncio.Task] = []
        self._children: list[int] = []  # processes started for runInTerminal
        self._envelope_decided = False
        self._inside: sandbox.Envelope | None = None  # the adapter (and so the program) runs in it
        self.scratch: Path | None = None  # where a build writes the program (`build`); removed at close
        self.building: asyncio.subprocess.Process | None = None  # the build, stopped at close

    # -- starting ---------------------------------------------------------------------------------

    async def envelope(self) -> sandbox.Envelope | None:
        """The envelope the adapter and the build run in, decided once; None: on the host.

        A ToolError when the run asks for one it cannot have: refused, nothing runs.
        """
        if not self._envelope_decided:
            envelope = sandbox.envelope(self.run, "debug")
            self._inside = envelope if envelope is not None and await envelope.check() else None
            self._envelope_decided = True
        return self._inside

    async def start(self, located: Located, bound: LaunchBound) -> None:
        """Start the adapter process and connect (stdio, or the TCP port it prints)."""
        run = self.run
        tcp = self.adapter.transport == "tcp"
        argv = list(located.argv)
        envelope = await self.envelope()
        if envelope is not None:
            if (
                tcp and not envelope.shares_loopback
            ):  # its port is not reachable from here: over stdio instead
                argv, tcp = [sys.executable, "-I", sandbox.RELAY, "stdio", "--", *argv], False
            argv = list(envelope.wrap(argv))
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=str(self.root),
                env=run.child_env(),  # the debuggee inherits the tag: stopped with the adapter wherever it went
                start_new_session=True,
                limit=2**24,
            )
        except OSError as exc:
            raise SessionError(
                f"could not start the {self.adapter.id} adapter ({' '.join(located.argv)}): {exc}"
            ) from None
        run.track_process(self.proc)
        self._tasks.append(asyncio.get_running_loop().create_task(self._drain_stderr()))
        if tcp:
            async with bound.phase(f"the {self.adapter.id} adapter's start"):
                host, port = await self._read_port()
                try:
                    reader, writer = await asyncio.open_connection(host, port, limit=2**24)
                except OSError as exc:
                    raise SessionError(
                        f"could not connect to the {self.adapter.id} adapter at {host}:{port}: {exc}"
                    ) from None
            if self.adapter.stdout_is_program_output:
                self._tasks.append(asyncio.get_running_loop().create_task(self._drain_stdout()))
        else:
            assert self.proc.stdout is not None and self.proc.stdin is not None
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

    def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.client = DapClient(
            reader,
            writer,
            on_event=self._on_event,
            on_reverse=self._on_reverse,
            request_timeout=self.request_timeout,
        )
        self.client.start()

    async def _read_port(self) -> tuple[str, int]:
        assert self.proc is not None and self.proc.stdout is not None
        seen = b""
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                raise SessionError(
                    f"the {self.adapter.id} adapter exited before listening: {self.stderr_text() or seen.decode(errors='replace')}"
                )
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
                    self.output.add(text, "stderr")

    async def _drain_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        await self._pump_stream(self.proc.stdout, "stdout")

    async def _pump_stream(self, stream: asyncio.StreamReader, name: str) -> None:
        """Copy a stream of the program's output into the buffer until it ends (or we stop it)."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a character cut between reads
        with contextlib.suppress(asyncio.CancelledError, OSError, ValueError):
            while chunk := await stream.read(65536):
                self.output.add(decoder.decode(chunk), name)

    def stderr_text(self) -> str:
        """The adapter's last lines on stderr, on one line (what it said before it failed)."""
        return " | ".join(line for line in self.stderr_tail if line)[-1500:]

    # -- events and reverse requests ----------------------------------------------------------------

    def _on_event(self, message: dict[str, Any]) -> None:
        event = message.get("event")
        body = message.get("body") or {}
        if event == "output":
            text = body.get("output", "")
            pattern = self.logpoint
            logged = [m.group(1) for line in text.splitlines() if pattern and (m := pattern.fullmatch(line))]
            if logged and len(self.logged) < MAX_LOGGED:
                self.logged.extend(logged[: MAX_LOGGED - len(self.logged)])
            if logged or body.get("category", "console") in self.adapter.output_categories:
                self.output.add(text, body.get("category", "console"))  # lldb-dap logs to its console
            if "error evaluating condition" in text:
                self.notices.extend(condition_failures(self, text))
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
        if command == "runInTerminal" and self._envelope_decided and self._inside is None:
            # We have no terminal: run it as a plain child of ours, tracked like the adapter. Only for
            # an adapter we started on the host (one attached to by port decided no envelope).
            proc = await asyncio.create_subprocess_exec(
                *arguments.get("args", []),
                cwd=arguments.get("cwd") or None,
                env=self.run.child_env(
                    {**os.environ, **{k: v for k, v in (arguments.get("env") or {}).items() if v is not None}}
                ),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
            self.run.track_process(proc)
            self._children.append(proc.pid)
            if proc.stdout is not None:
                self._tasks.append(
                    asyncio.get_running_loop().create_task(
                        self._pump_stream(proc.stdout, f"terminal {proc.pid}")
                    )
                )
            return {"processId": proc.pid}
        return None  # startDebugging, runInTerminal in a sandbox and the rest: refused, never left hanging

    # -- protocol ----------------------------------------------------------------------------------

    async def configure(
        self, request: str, arguments: dict[str, Any], plan: Plan, bound: LaunchBound
    ) -> None:
        """``initialize`` and launch/attach sent together, then breakpoints and configurationDone at
        `initialized`, then the launch's answer.

        The two requests go out back to back (each adapter answers them in order; the capabilities
        are needed only for the breakpoints). A launch the adapter refuses at once is answered at
        once: the wait for `initialized` ends with the refusal, not at the bound.
        """
        async with bound.phase(
            f"the {request}'s configuration", " (initialize, breakpoints, configurationDone)"
        ):
            # one child span of the traced call for the handshake (initialize and the launch or attach,
            # answered only after configurationDone), its configuration requests within it
            with tracing.span(f"dap {request}", {"rpc.system": "dap", "rpc.method": request}):
                await self._configure(request, arguments, plan)

    async def _configure(self, request: str, arguments: dict[str, Any], plan: Plan) -> None:
        assert self.client is not None
        client = self.client
        start = len(client.events)
        capabilities = client.send(
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
        answer = client.send(request, arguments)
        await client._drain()
        try:
            self.capabilities = await client.wait(capabilities, "initialize")
        except DapError:
            if answer.done() and not answer.cancelled():
                answer.exception()  # retrieved: the initialize failure is the one to report
            raise
        initialized = asyncio.ensure_future(client.wait_event(("initialized",), start))
        try:
            await asyncio.wait((initialized, answer), return_when=asyncio.FIRST_COMPLETED)
            if answer.done() and not initialized.done():
                refused = answer.exception()
                if refused is not None:
                    raise refused  # the adapter refused the launch itself: its own words say why
                await initialized  # lldb-dap answers launch before it sends initialized
            hit = initialized.result()
        finally:
            initialized.cancel()
        if hit is None:
            raise SessionError(
                f"{request} did not complete: the adapter closed the connection. {self.stderr_text()}".strip()
            )
        for path, specs in plan.lines.items():
            await set_breakpoints(self, path, specs)
        if plan.functions:
            await set_function_breakpoints(self, plan.functions)
        await set_exceptions(self, plan.exceptions)
        await client.request("configurationDone", {})
        await answer

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
        frames_task = self._stop_frames(thread_id) if thread_id is not None else _nothing(([], None, False))
        info_task = self._exception_info(thread_id, body) if reason == "exception" else _nothing(None)
        (frames, no_stack, late), info = await asyncio.gather(frames_task, info_task)
        frame = frames[0] if frames else None
        self.top_frame = frame["id"] if frame else None
        if info and (named := SIGNAL_NAME.search(info.get("message") or "")):
            with contextlib.suppress(KeyError):
                self.last_signal = signal.Signals[named.group(0)].value
        snapshot = await self._snapshot(frame["id"]) if frame else None
        self.stop = Stop(
            reason=reason,
            thread_id=thread_id,
            file=((frame or {}).get("source") or {}).get("path"),
            line=(frame or {}).get("line"),
            function=(frame or {}).get("name"),
            description=(f"{info['type']}: {info['message']}".strip(": ") or None) if info else None,
            exception=info,
            project_frame=self._project_frame(frames),
            snapshot=snapshot,
            no_stack=no_stack,
            stack_late=late,
        )
        return self.stop

    async def _stop_frames(self, thread_id: int) -> tuple[list[dict[str, Any]], str | None, bool]:
        """The stopped thread's frames; none, why not, and whether it was only late, when there are none.

        delve stops on entry before the Go runtime has started a goroutine, and answers stackTrace
        with "unknown goroutine 1": that is still a stop the program can continue from. An adapter
        that does not answer in time (a slow one at an ordinary stop) has stopped all the same.
        """
        try:
            return await self.stack_trace(thread_id, 30), None, False
        except DapClosed:
            raise
        except DapTimeout as exc:
            return [], exc.message, True
        except DapError as exc:
            return [], exc.message, False

    def _project_frame(self, frames: list[dict[str, Any]]) -> tuple[str, int, str] | None:
        root = self.root
        if not frames:
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
        return Ended(self.exit_code, how, self._killed_by())

    def _killed_by(self) -> int | None:
        code = self.exit_code
        if code is None or code == 0:
            return None
        if code < 0:
            return -code
        if code == self.last_signal:
            return code  # lldb-dap: a signal death's exit status is the number of the signal it stopped at
        return self.adapter.signal_exit(code) if self.adapter.signal_exit else None

    async def _exception_info(self, thread_id: int | None, body: dict[str, Any]) -> dict[str, Any] | None:
        """What the adapter says of the exception: its type, message, and the top of its stack when given."""
        if (
            thread_id is not None
            and self.client is not None
            and self.capabilities.get("supportsExceptionInfoRequest")
        ):
            try:
                info = await self.client.request("exceptionInfo", {"threadId": thread_id})
            except DapError:
                pass
            else:
                details = info.get("details") or {}
                stack = [line for line in str(details.get("stackTrace") or "").splitlines() if line.strip()]
                return {
                    "type": info.get("exceptionId") or details.get("typeName") or "",
                    "message": info.get("description") or details.get("message") or "",
                    "break_mode": info.get("breakMode"),
                    "stack": stack[-MAX_EXCEPTION_STACK:],
                }
        text = body.get("text") or body.get("description")
        return {"type": "", "message": text, "break_mode": None, "stack": []} if text else None

    async def _snapshot(self, frame_id: int) -> tuple[str, list[dict[str, Any]]] | None:
        """The top frame's first shown scope (its locals), so a stop answers without three more calls."""
        assert self.client is not None
        try:
            scopes = (await self.client.request("scopes", {"frameId": frame_id})).get("scopes") or ()
            scope = next(
                (
                    s
                    for s in scopes
                    if s.get("name") not in self.adapter.skip_scopes and s.get("variablesReference")
                ),
                None,
            )
            if scope is None:
                return None
            self.references.add(scope["variablesReference"])
            body = await self.client.request("variables", {"variablesReference": scope["variablesReference"]})
        except DapError:
            return None  # the stop stands without its locals; 'scopes' says why
        variables = [v for v in body.get("variables") or () if v.get("name") not in self.adapter.group_names]
        return scope.get("name", ""), variables

    async def stack_trace(self, thread_id: int, levels: int) -> list[dict[str, Any]]:
        assert self.client is not None
        body = await self.client.request(
            "stackTrace", {"threadId": thread_id, "startFrame": 0, "levels": levels}
        )
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
            await asyncio.wait(
                self._tasks, timeout=0.5 if proc is None or proc.returncode is not None else 0.05
            )
        for task in self._tasks:
            task.cancel()
        # the adapter may exit before its debuggee (lldb-dap crashes on shutdown), and a debuggee's
        # daemon may leave the session: they carry the adapter's tag, and stop_process follows it
        for pid in (*self._children, proc.pid if proc else None):
            if pid is not None:
                await self.run.stop_process(pid, grace)
        if proc is not None and proc.returncode is None:
            try:
                await asyncio.wait_for(proc.wait(), 1.0)
            except TimeoutError:
                pass
        building = self.building
        if building is not None and building.returncode is None:  # a second cancel cut its own stop short
            await self.run.stop_process(building)
        if self.scratch is not None:
            await asyncio.to_thread(self.run.remove_scratch_dir, self.scratch)


async def _nothing(value: Any) -> Any:
    return value
