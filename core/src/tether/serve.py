"""`tether serve`: one process = one run, over the Model Context Protocol: stdio, or Streamable HTTP.

Built on the official MCP SDK's low-level server (imported only here: the SDK is heavy), which speaks
both protocol revisions on the same server; the client's first request decides which:

- 2025-11-25: the `initialize` handshake; a card (`ask_user`, an approval card) goes to the client as
  an `elicitation/create` request while the call waits for the answer.
- 2026-07-28: `server/discover`, and every request carries its client's version and capabilities in
  `_meta`. The server sends no requests of its own, so a call whose tool asks the human answers with
  an `InputRequiredResult` holding the form, and the client retries the call with the answer
  (multi round-trip requests). Between the rounds the call stays suspended in this process, at the
  question; the `requestState` (sealed by the SDK, bound to the call's tool and arguments) names the
  call and the cards sent, so the retry resumes the same question and a card is never sent twice: a
  retry that does not answer it fails the card closed, and a client that never retries meets the
  card's timeout, as with `elicitation/create`.

The run opens on the first request that reaches a tool: for a client that declared `elicitation` (in
`initialize`, or in that request's `_meta`), the server answers the run's `tether_elicitation` hook,
which the askuser family turns into a question port. End of stdin, or SIGTERM, SIGHUP or SIGINT, closes the run, and closing the
run reaps every child process.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import hmac
import json
import logging
import os
import re
import signal
import socket
import sys
import time
import uuid
from collections import OrderedDict
from importlib.metadata import version
from typing import Any

import anyio
import mcp_types as types
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.lowlevel.server import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import trace
from pydantic import ValidationError

from tether.hookspecs import Elicit, hookimpl
from tether.run import Run
from tether.tools import Image, Tier, ToolResult

log = logging.getLogger("tether.serve")

SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
DATA_META_KEY = "tether/data"  # a result's `data`, in the result's `_meta`
HEARTBEAT, HEARTBEAT_ENV = 10.0, "TETHER_SERVE_HEARTBEAT"  # seconds between "still running" reports
# How long a finished call whose client never came back for its result is kept for a late retry.
KEEP_UNCLAIMED = 600.0
# The sealed requestState outlives any card's wait: the call it names is bounded by the card's own
# timeout, so a late token finds a finished or forgotten call, never an open question.
STATE_TTL = 24 * 3600.0
# A call of a tool that is not read-only may carry an idempotency key in its `_meta`: a retry with the
# same key gets the first call's result instead of running again. No standard key exists yet.
IDEMPOTENCY_KEY = "tether/idempotency_key"
REPLAY_META_KEY = "tether/replay"  # set on a result answered from the idempotency memory
IDEMPOTENCY_TTL = 600.0  # seconds a finished keyed call is remembered
IDEMPOTENCY_MAX = 1000  # keyed calls remembered at most (the oldest finished ones go first)
IDEMPOTENCY_KEY_MAX = 256  # characters
TOOLS_TTL_MS = 3_600_000  # how long a 2026-07-28 client may keep the tool list (it is fixed for the run)


def _annotations(tool) -> types.ToolAnnotations:
    """What clients that auto-approve by annotation are told. A read-tier tool is read-only unless it
    says otherwise; anything else may destroy. Exec-tier tools run code, and a read-tier tool that is
    not read-only starts work of its own (an agent): both reach an open world."""
    read_only = tool.tier is Tier.READ if tool.read_only is None else tool.read_only
    return types.ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=not read_only,
        open_world_hint=tool.tier is Tier.EXEC or tool.read_only is False,
    )


def _mcp_tool(tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        annotations=_annotations(tool),
    )


def _mcp_result(result: ToolResult, *, replay: bool = False) -> types.CallToolResult:
    """The result as MCP content, and `data` under `_meta` for programs, never as `structuredContent`.

    Clients (Claude Code, Codex CLI, pydantic-ai) hand the model `structuredContent` instead of the
    content when both are there, as the spec has the text be its serialization; tether's `data` is a
    summary for programs (for `read`: the path and line numbers, not the lines), so the model would
    lose the result."""
    blocks: list[Any] = []
    for b in result.content:
        if isinstance(b, Image):
            blocks.append(types.ImageContent(type="image", data=b.to_json()["data"], mime_type=b.mime_type))
        else:
            blocks.append(types.TextContent(type="text", text=b.text))
    meta: dict[str, Any] = {DATA_META_KEY: result.data} if result.data else {}
    if replay:
        meta[REPLAY_META_KEY] = True
    return types.CallToolResult(content=blocks, is_error=result.is_error, _meta=meta or None)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(is_error=True, content=[types.TextContent(type="text", text=text)])


class _Card:
    def __init__(self, key: str, message: str, schema: dict[str, Any]) -> None:
        self.key, self.message, self.schema = key, message, schema
        self.answer: asyncio.Future[tuple[str, dict[str, Any] | None]] = (
            asyncio.get_running_loop().create_future()
        )

    def request(self) -> types.ElicitRequest:
        return types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=self.message, requested_schema=self.schema)
        )


class _Call:
    """One `tools/call`, from its first request to its result, across the rounds of a 2026-07-28 client."""

    def __init__(self, ctx, name: str) -> None:
        self.id, self.name, self.started = uuid.uuid4().hex, name, time.monotonic()
        self.ctx = ctx  # the latest request of this call
        self.serving = 0  # how many requests of this call are waiting for an answer now
        self.keyed = False  # it carries an idempotency key: it outlives its request, for a retry to join
        self.fresh: list[_Card] = []  # asked, not yet sent
        self.sent: dict[str, _Card] = {}  # sent in an InputRequiredResult, waiting for the retry
        self.changed = asyncio.Event()
        self.task: asyncio.Task[ToolResult] | None = None
        self.reports = False  # whether the tool reports progress of its own
        self._cards = 0

    async def progress(self, done: float, total: float | None, message: str | None) -> None:
        self.reports = True
        if self.serving:  # between the rounds there is no request to report on
            await self.ctx.session.report_progress(done, total, message)

    async def heartbeat(self, every: float) -> None:
        """Progress for a long call whose tool reports none (an eval cell, a debug `continue`), so a
        client sees it alive; a tool that reports its own progress owns the stream."""
        while True:
            await asyncio.sleep(every)
            if not self.reports:
                elapsed = time.monotonic() - self.started
                await self.ctx.session.report_progress(
                    round(elapsed, 1), None, f"{self.name} still running ({elapsed:.0f} s)"
                )

    async def ask(self, message: str, schema: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        self._cards += 1
        card = _Card(f"card{self._cards}", message, schema)
        self.fresh.append(card)
        self.changed.set()
        try:
            return await card.answer
        finally:  # answered, or withdrawn by the card's timeout
            if card in self.fresh:
                self.fresh.remove(card)
            self.sent.pop(card.key, None)

    def answer(self, responses: dict[str, Any]) -> None:
        for key, card in self.sent.items():
            reply = responses.get(key)
            if card.answer.done():
                continue
            if isinstance(reply, types.ElicitResult):
                card.answer.set_result((reply.action, reply.content))
            else:
                card.answer.set_exception(
                    RuntimeError("the client retried the call without answering the card")
                )
        self.sent.clear()


_current: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("tether_mcp_call", default=None)


async def _elicit(message: str, requested_schema: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """Ask the connected client's human, the way the revision of the request being served allows."""
    call = _current.get()
    if call is None:
        raise RuntimeError("no MCP request is being served, so there is no client to ask")
    session = call.ctx.session
    if session.client_capabilities is None or session.client_capabilities.elicitation is None:
        raise RuntimeError("the client did not declare the elicitation capability on this request")
    if call.ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return await call.ask(message, requested_schema)
    answer = await session.elicit_form(message, requested_schema, related_request_id=call.ctx.request_id)
    return answer.action, answer.content


class _ClientHuman:
    """The run's channel to the human at a client that declared elicitation (the host's resource)."""

    @hookimpl
    def tether_elicitation(self) -> Elicit:
        return _elicit


class _Keyed:
    """A call remembered under its idempotency key: what it was called with, and the call itself."""

    def __init__(self, fingerprint: str, call: _Call) -> None:
        self.fingerprint, self.call = fingerprint, call
        self.finished: float | None = None  # monotonic time it finished


class _Replays:
    """The keyed calls of a run: each for ``ttl`` seconds after it finishes, at most ``size`` of them.

    When full, the oldest finished call is forgotten first; a running call only when none has finished
    (its retry then runs the tool again)."""

    def __init__(
        self, ttl: float = IDEMPOTENCY_TTL, size: int = IDEMPOTENCY_MAX, clock=time.monotonic
    ) -> None:
        self.ttl, self.size, self.clock = ttl, size, clock
        self._running: OrderedDict[str, _Keyed] = OrderedDict()
        self._finished: OrderedDict[str, _Keyed] = OrderedDict()  # in the order they finished

    def __len__(self) -> int:
        return len(self._running) + len(self._finished)

    def get(self, key: str) -> _Keyed | None:
        self._expire()
        return self._running.get(key) or self._finished.get(key)

    def add(self, key: str, keyed: _Keyed) -> None:
        self._expire()
        self._finished.pop(key, None)
        self._running[key] = keyed
        while len(self) > self.size:
            (self._finished or self._running).popitem(last=False)

    def finished(self, key: str, keyed: _Keyed) -> None:
        if self._running.get(key) is keyed:
            del self._running[key]
            keyed.finished = self.clock()
            self._finished[key] = keyed

    def running(self) -> list[_Call]:
        return [k.call for k in self._running.values()]

    def _expire(self) -> None:
        now = self.clock()
        while self._finished:
            first = next(iter(self._finished.values()))
            if first.finished is not None and now - first.finished < self.ttl:
                return
            self._finished.popitem(last=False)


def _fingerprint(name: str, arguments: dict[str, Any]) -> str:
    """What a retry must repeat: the tool and its arguments (key order aside)."""
    text = json.dumps([name, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class _BadKey(Exception):
    pass


def _idempotency_key(params) -> str | None:
    meta = params.meta or {}
    if IDEMPOTENCY_KEY not in meta:
        return None
    key = meta[IDEMPOTENCY_KEY]
    if not isinstance(key, str) or not key.strip() or len(key) > IDEMPOTENCY_KEY_MAX:
        shown = json.dumps(key)[:80]
        raise _BadKey(
            f'_meta["{IDEMPOTENCY_KEY}"] must be a non-empty string of at most {IDEMPOTENCY_KEY_MAX} characters '
            f"(a fresh UUID per call is a good key); got {shown}. The call did not run: send it again with a "
            "valid key, or without one."
        )
    return key


class _Host:
    def __init__(self, run_kwargs: dict[str, Any]) -> None:
        self.run_kwargs = run_kwargs
        self.run: Run | None = None
        self.closed = False
        self._lock = asyncio.Lock()
        self._calls: dict[str, _Call] = {}  # calls waiting for a client's retry, by id
        self.replays = _Replays()  # keyed calls, by idempotency key

    async def ensure_run(self, ctx) -> Run:
        async with self._lock:
            if self.closed:
                raise MCPError(code=types.INTERNAL_ERROR, message="the server is shutting down")
            if self.run is None:
                plugins = list(self.run_kwargs.pop("plugins", ()))
                caps = ctx.session.client_capabilities
                if caps is not None and caps.elicitation is not None:
                    plugins.append(_ClientHuman())
                run = Run(plugins=plugins, **self.run_kwargs)
                await run._open()
                self.run = run
            return self.run

    async def close(self) -> None:
        async with self._lock:
            self.closed = True
        for call in [*self._calls.values(), *self.replays.running()]:
            if call.task is not None:
                call.task.cancel()
        if self.run is not None:
            with anyio.CancelScope(shield=True):
                await self.run.aclose()

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """For the SDK's check of a 2026-07-28 HTTP call's headers, without a tools/list per call."""
        tools = self.run.tools() if self.run is not None else ()
        return next((t.input_schema for t in tools if t.name == name), None)

    async def list_tools(self, ctx, params) -> types.ListToolsResult:
        run = await self.ensure_run(ctx)
        # by name (run.listed_tools() is sorted); the families register when the run opens, which this
        # request did, so the list is fixed for the run: a 2026-07-28 client may keep it. A tool the
        # surface does not list stays callable (from a cell, or by name).
        return types.ListToolsResult(
            tools=[_mcp_tool(t) for t in run.listed_tools()], ttl_ms=TOOLS_TTL_MS, cache_scope="private"
        )

    def readiness(self) -> dict[str, Any]:
        """What `GET /readyz` answers: whether MCP requests are served, and the run's families."""
        if self.closed:
            return {"ready": False, "why": "the server is shutting down"}
        if self.run is None:
            return {"ready": True, "run": "not open yet: it opens on the first MCP request"}
        return {
            "ready": True,
            "run": "open",
            "families": sorted({t.family for t in self.run.tools() if t.family}),
            "unavailable": {u.family: u.reason for u in self.run.unavailable},
        }

    async def call_tool(self, ctx, params) -> types.CallToolResult | types.InputRequiredResult:
        """A `tools/call`, with tether's attributes on the span the SDK opened for it."""
        span = trace.get_current_span()
        result = await self._call_tool(ctx, params)
        if span.is_recording():
            tool = self.run._visible.get(params.name) if self.run is not None else None
            replay = bool(
                isinstance(result, types.CallToolResult) and (result.meta or {}).get(REPLAY_META_KEY)
            )
            span.set_attributes(
                {
                    "tether.tool": params.name,
                    "tether.tier": tool.tier.value if tool is not None else "unknown",
                    "tether.family": (tool.family or "") if tool is not None else "",
                    "tether.surface": self.run.surface.name if self.run is not None else "",
                    "tether.outcome": "input_required"
                    if isinstance(result, types.InputRequiredResult)
                    else ("error" if result.is_error else "ok"),
                    "tether.replay": replay,
                }
            )
        return result

    async def _call_tool(self, ctx, params) -> types.CallToolResult | types.InputRequiredResult:
        run = await self.ensure_run(ctx)
        if params.request_state is not None:  # the next round of a call: never answered from the replays
            call = self._calls.get(json.loads(params.request_state)["call"])
            if call is None or call.serving:
                return _error(
                    "This retry names no call waiting for an answer: its card was answered by an earlier "
                    "retry, or the call ended and was forgotten (a card is never asked twice). Call the "
                    "tool again if it is still needed."
                )
            call.ctx = ctx
            call.answer(params.input_responses or {})
            return await self._round(call)
        arguments = dict(params.arguments or {})
        try:
            key = _idempotency_key(params)
        except _BadKey as exc:
            return _error(str(exc))
        tool = next((t for t in run.tools() if t.name == params.name), None)
        if key is not None and tool is not None and not _annotations(tool).read_only_hint:
            fingerprint = _fingerprint(params.name, arguments)
            seen = self.replays.get(key)
            if seen is not None:
                return await self._replay(key, seen, fingerprint, ctx)
            call = self._start(run, ctx, params.name, arguments)
            call.keyed = True
            keyed = _Keyed(fingerprint, call)
            self.replays.add(key, keyed)
            assert call.task is not None
            call.task.add_done_callback(lambda _: self.replays.finished(key, keyed))
        else:
            call = self._start(run, ctx, params.name, arguments)
        return await self._round(call)

    def _start(self, run: Run, ctx, name: str, arguments: dict[str, Any]) -> _Call:
        call = _Call(ctx, name)
        token = _current.set(call)
        try:
            call.task = asyncio.create_task(run.call(name, arguments, progress=call.progress))
        finally:
            _current.reset(token)
        call.task.add_done_callback(lambda _: self._finished(call))
        return call

    async def _replay(
        self, key: str, seen: _Keyed, fingerprint: str, ctx
    ) -> types.CallToolResult | types.InputRequiredResult:
        """A call whose key was seen: the first call's result, or a round of it while it runs."""
        call = seen.call
        if seen.fingerprint != fingerprint:
            return _error(
                f"The idempotency key {json.dumps(key)} names an earlier call of {call.name} with other "
                "arguments (a key names one call; its retries repeat the call exactly). This call did not "
                "run. Send a new key for a new call."
            )
        assert call.task is not None
        if call.task.done():
            if call.task.cancelled():
                return _error(
                    f"The call of {call.name} this key names was cancelled: the server is shutting down."
                )
            return _mcp_result(call.task.result(), replay=True)
        # Still running: this request joins it. Cards sent in a response the client may have lost are
        # sent again (the same cards, not new ones: the human is asked once).
        call.ctx = ctx
        call.fresh[:0] = list(call.sent.values())
        call.sent.clear()
        return await self._round(call, replay=True)

    def _finished(self, call: _Call) -> None:
        call.changed.set()
        if not call.serving and call.id in self._calls:
            asyncio.get_running_loop().call_later(KEEP_UNCLAIMED, self._calls.pop, call.id, None)

    async def _round(
        self, call: _Call, *, replay: bool = False
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Serve one request of ``call``: its result, or the cards it waits on for a 2026-07-28 client."""
        assert call.task is not None
        call.serving += 1
        beat = asyncio.create_task(call.heartbeat(_heartbeat_seconds()))
        try:
            while True:
                call.changed.clear()
                if call.task.done():
                    self._calls.pop(call.id, None)
                    return _mcp_result(call.task.result(), replay=replay)
                if call.fresh:
                    cards, call.fresh = call.fresh, []
                    call.sent.update((c.key, c) for c in cards)
                    self._calls[call.id] = call
                    return types.InputRequiredResult(
                        input_requests={c.key: c.request() for c in cards},
                        request_state=json.dumps({"call": call.id, "cards": [c.key for c in cards]}),
                    )
                await call.changed.wait()
        except BaseException:  # the client cancelled the request, or the server is closing
            # A keyed call outlives its request (a lost connection looks the same as a cancel): its
            # retry joins it, or finds its result. The server's close cancels it.
            if not call.keyed or self.closed:
                call.task.cancel()
                self._calls.pop(call.id, None)
            raise
        finally:
            call.serving -= 1
            beat.cancel()


def _heartbeat_seconds() -> float:
    try:
        return max(float(os.environ.get(HEARTBEAT_ENV, HEARTBEAT)), 0.1)
    except ValueError:
        return HEARTBEAT


def _server(host: _Host) -> Server:
    server = Server(
        "tether",
        version=version("tether-core"),
        instructions="Run-bound tools for coding agents: each tool is bound to a live resource of this run.",
        on_list_tools=host.list_tools,
        on_call_tool=host.call_tool,
        get_tool_input_schema=host.input_schema,
    )
    server.middleware.append(
        RequestStateBoundary(RequestStateSecurity.ephemeral(ttl=STATE_TTL), default_audience="tether")
    )
    return server


# -- stdio ----------------------------------------------------------------------------------------


_STRING = re.compile(r'"(?:[^"\\]+|\\.)*"', re.S)
_SPACE = re.compile(r"\s*")


def _skip_space(text: str, i: int) -> int:
    """Index of the first non-space at or after ``i`` (``\\s*`` matches, if only the empty string)."""
    m = _SPACE.match(text, i)
    return m.end() if m else i


def _member_end(text: str, i: int) -> int:
    """Index of the ``,`` or ``}`` that ends the object member whose value starts at ``i``; -1 if none.

    A scan of brackets and strings that never recurses, however deep the value is nested."""
    depth = 0
    while i < len(text):
        c = text[i]
        if c == '"':
            m = _STRING.match(text, i)
            if m is None:
                return -1
            i = m.end()
            continue
        if c in "[{":
            depth += 1
        elif c in "]}":
            if depth == 0:
                return i if c == "}" else -1
            depth -= 1
        elif c == "," and depth == 0:
            return i
        i += 1
    return -1


def _top_level_id(text: Any) -> types.RequestId | None:
    """The ``id`` of a JSON-RPC message the SDK could not read, so the error reaches its caller."""
    if not isinstance(text, str):
        return None
    i = _skip_space(text, 0)
    if not text.startswith("{", i):
        return None
    i += 1
    while True:
        key = _STRING.match(text, _skip_space(text, i))
        if key is None:
            return None
        i = _skip_space(text, key.end())
        if not text.startswith(":", i):
            return None
        i = _skip_space(text, i + 1)
        if json.loads(key.group()) == "id":
            with contextlib.suppress(ValueError):
                value, _ = json.JSONDecoder().raw_decode(text, i)
                return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None
            return None
        i = _member_end(text, i)
        if i < 0 or text[i] == "}":
            return None
        i += 1


def _unreadable(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC error for a line the SDK's reader could not turn into a message."""
    first = exc.errors()[0] if isinstance(exc, ValidationError) and exc.errors() else {}
    if first.get("type") == "json_invalid":
        error = types.ErrorData(code=types.PARSE_ERROR, message=f"Parse error: {first.get('msg')}")
    else:
        error = types.ErrorData(
            code=types.INVALID_REQUEST,
            message="Invalid Request: not a JSON-RPC 2.0 request, notification or response",
        )
    return types.JSONRPCError(jsonrpc="2.0", id=_top_level_id(first.get("input")), error=error)


@contextlib.asynccontextmanager
async def _stdio():
    """The SDK's stdio transport, answering the lines it cannot read instead of dropping them.

    The SDK hands a line that is not JSON-RPC (not JSON, nested deeper than its parser goes, the
    wrong shape) to the server as an exception, which the server drops: the caller would wait for ever.
    """
    async with stdio_server() as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            async with send:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                            await write_stream.send(SessionMessage(_unreadable(item)))
                    else:
                        await send.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(relay)
            yield receive, write_stream
            tg.cancel_scope.cancel()


async def _serve_stdio(host: _Host, server: Server) -> None:
    async def serving() -> None:
        async with _stdio() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    loop_task = asyncio.create_task(serving())
    stop_task = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({loop_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop_task.cancel()
        await host.close()
    if loop_task.done():  # end of input
        loop_task.result()
        return
    # A signal while the client keeps stdin open. The SDK reads stdin in a worker thread that no
    # cancellation reaches, so unwinding its loop would wait for end of input: the run is closed
    # (every child reaped), and the process leaves now.
    log.info("signal received: the run is closed, the server exits")
    sys.stderr.flush()
    os._exit(0)


# -- Streamable HTTP ------------------------------------------------------------------------------


class _Bearer:
    """The SDK's token verifier for one static bearer token, compared in constant time."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token):
            return AccessToken(token=token, client_id="tether", scopes=[])
        return None


def _listen(bind: tuple[str, int]) -> socket.socket:
    """The listening socket, made with the TCP protocol named so that asyncio turns Nagle off on the
    connections it accepts (it does so only for sockets whose ``proto`` is ``IPPROTO_TCP``, and
    ``socket.create_server`` leaves it 0). With Nagle on, a response whose headers and body go out as
    two writes waits for the client's delayed ACK of the headers: 40 ms a request on Linux."""
    family = socket.AF_INET6 if ":" in bind[0] else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:  # [::] means IPv6 only, as with socket.create_server
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(bind)
        sock.listen()
    except BaseException:
        sock.close()
        raise
    return sock


class _Probe:
    """`GET /healthz` (the process answers) or `GET /readyz` (MCP requests are served; the run's state):
    JSON, 503 when not ready. Beyond loopback, with the same bearer token as `/mcp`."""

    def __init__(self, answer, token: str | None) -> None:
        self.answer, self.token = answer, token

    async def __call__(self, scope, receive, send) -> None:
        from starlette.responses import JSONResponse

        if self.token is not None:
            given = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                refused = JSONResponse(
                    {"error": "this server requires its bearer token: send Authorization: Bearer <token>"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                return await refused(scope, receive, send)
        body = self.answer()
        await JSONResponse(body, status_code=200 if body.get("ready", True) else 503)(scope, receive, send)


async def _serve_http(host: _Host, server: Server, bind: tuple[str, int], token: str | None) -> None:
    import uvicorn
    from starlette.routing import Route

    hostname, port = bind
    sock = _listen(bind)
    port = sock.getsockname()[1]
    url = f"http://{f'[{hostname}]' if ':' in hostname else hostname}:{port}"
    auth = {}
    if token is not None:
        auth = {
            # validated from the string as the SDK's settings do (AnyHttpUrl(url) would add a "/")
            "auth": AuthSettings.model_validate({"issuer_url": url, "resource_server_url": None}),
            "token_verifier": _Bearer(token),
        }
    probes = [
        Route(path, endpoint=_Probe(answer, token), methods=["GET"])
        for path, answer in (("/healthz", lambda: {"ok": True}), ("/readyz", host.readiness))
    ]
    app = server.streamable_http_app(host=hostname, custom_starlette_routes=probes, **auth)

    class Uvicorn(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):  # the signals are ours (below): uvicorn's would re-raise SIGTERM after
            yield

    web = Uvicorn(
        uvicorn.Config(app, log_config=None, log_level="warning", lifespan="on", timeout_graceful_shutdown=3)
    )
    loop = asyncio.get_running_loop()
    for sig in SIGNALS:
        loop.add_signal_handler(sig, setattr, web, "should_exit", True)
    print(
        f"tether serve: MCP over Streamable HTTP at {url}/mcp"
        + (" (bearer token required)" if token else ""),
        file=sys.stderr,
        flush=True,
    )
    try:
        await web.serve(sockets=[sock])
    finally:
        await host.close()


def serve(*, http: tuple[str, int] | None = None, token: str | None = None, **run_kwargs: Any) -> int:
    host = _Host(run_kwargs)
    server = _server(host)
    asyncio.run(_serve_stdio(host, server) if http is None else _serve_http(host, server, http, token))
    return 0
