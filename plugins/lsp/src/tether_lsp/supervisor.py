"""The run's language-server supervisor: which server serves a file, lazy start, restart, shutdown."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tether.tools import ToolError, ToolResult

from tether_lsp import readiness
from tether_lsp.options import LspOptions

# created when the run lists its tools: the servers' machinery loads at the first query
if TYPE_CHECKING:
    import asyncio

    from tether.run import Run

    from tether_lsp.connection import Connection, Doc
    from tether_lsp.preview import Kept
    from tether_lsp.servers import Availability, ServerDef
    from tether_lsp.write_diagnostics import Baseline

log = logging.getLogger("tether.lsp")

T = TypeVar("T")


class NotAnswered(Exception):
    """A server has no answer to this question (it does not offer it, or found nothing): the next
    server of the file is asked. ``answer`` is what is said when no server answers."""

    def __init__(self, answer: ToolResult | ToolError) -> None:
        super().__init__(str(answer))
        self.answer = answer

    def stand(self) -> Any:
        if isinstance(self.answer, ToolError):
            raise self.answer
        return self.answer


_sharing: contextvars.ContextVar[bool] = contextvars.ContextVar("tether_lsp_gate_shared", default=False)


class Gate:
    """The run's servers are either shared (queries, a write's diagnostics: any number at once) or held by
    one preview, whose unsaved contents no other answer must see (`tether_lsp.preview`). A preview waiting
    goes before queries asked after it; a query asked while its own caller shares the gate (a tool's query
    inside another's) is not held up again."""

    def __init__(self, on_wait: Callable[[], None] = lambda: None) -> None:
        self._condition: asyncio.Condition | None = None  # made on first use: a listing needs no asyncio
        self._shared = 0
        self._held = False
        self._waiting = 0
        self._queued = 0  # queries and writes waiting
        # called by every use of the servers before it waits: a kept preview is put back (tether_lsp.preview)
        self._on_wait = on_wait

    @contextlib.asynccontextmanager
    async def shared(self) -> AsyncIterator[None]:
        if _sharing.get():
            yield
            return
        self._on_wait()
        async with self._cond:
            self._queued += 1
            try:
                await self._cond.wait_for(lambda: not self._held and not self._waiting)
            finally:
                self._queued -= 1
            self._shared += 1
        token = _sharing.set(True)
        try:
            yield
        finally:
            _sharing.reset(token)
            async with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    async def hold(self) -> None:
        """Wait until nothing shares the gate and no other preview holds it, and hold it (`release` ends it)."""
        if _sharing.get():  # it would wait for itself
            raise RuntimeError("a preview cannot be taken inside a query or a write's diagnostics")
        self._on_wait()
        async with self._cond:
            self._waiting += 1
            try:
                await self._cond.wait_for(lambda: not self._held and not self._shared)
            finally:
                self._waiting -= 1
                self._cond.notify_all()
            self._held = True

    async def release(self) -> None:
        async with self._cond:
            self._held = False
            self._cond.notify_all()

    @property
    def _cond(self) -> asyncio.Condition:
        if self._condition is None:
            import asyncio

            self._condition = asyncio.Condition()
        return self._condition

    @property
    def held(self) -> bool:
        return self._held

    @property
    def contended(self) -> bool:
        """Someone waits for the servers: a preview ending now puts its overlays back at once."""
        return bool(self._waiting or self._queued)


class Supervisor:
    """One per run. Cheap to create: nothing starts before the first query."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.connections: dict[tuple[str, Path], Connection] = {}
        self._locks: dict[tuple[str, Path], asyncio.Lock] = {}
        self._versions: dict[str, str | None] = {}
        self._definitions: list[ServerDef] | None = None
        # per write (call id): known diagnostics before it
        self.baselines: dict[str, Baseline] = {}
        self.failed: dict[tuple[str, Path], str] = {}  # servers whose start failed, and why
        # the last code_actions list of each place, for lsp_fix (tether_lsp.fix.remember)
        self.offers: OrderedDict[tuple[str, int, str, int | None], list[Any]] = OrderedDict()
        # by (server id, root): the connection started there, whether the run trusted its root, and the
        # binary and note its availability found (`availability` reuses them while that connection runs)
        self._found: dict[tuple[str, Path], tuple[Connection, bool, str | None, str | None]] = {}
        self.gate = Gate(self._discard_kept)
        # the wait for the servers' round after a preview's contents were put back (it holds the gate)
        self.putting_back: asyncio.Task[Any] | None = None
        # a complete preview left in place for the write that may make it true (tether_lsp.preview.Kept)
        self.kept: Kept | None = None
        self._closed = False

    def _discard_kept(self) -> None:
        if self.kept is not None:
            from tether_lsp.preview import discard_kept

            discard_kept(self)

    # -- definitions ---------------------------------------------------------------------------

    def definitions(self) -> list[ServerDef]:
        if self._definitions is None:
            from tether_lsp.hookspecs import tether_lsp_servers
            from tether_lsp.servers import ServerDef

            self._definitions = list(self.run.definitions(tether_lsp_servers, ServerDef).values())
        return self._definitions

    def enabled(self, server: ServerDef) -> bool:
        """Named in the run option lsp_servers; without it, a default definition no other default one replaces."""
        chosen = self.run.options.of(LspOptions).lsp_servers
        if chosen is not None:
            return server.id in chosen
        return server.default and self.replaced_by(server) is None

    def replaced_by(self, server: ServerDef) -> str | None:
        """The id of a default definition that switches ``server`` off (its `replaces` names it)."""
        chosen = self.run.options.of(LspOptions).lsp_servers
        if chosen is not None:
            return None
        by = [d.id for d in self.definitions() if d.default and d.id != server.id and server.id in d.replaces]
        return by[0] if by else None

    def in_order(self, servers: list[ServerDef]) -> list[ServerDef]:
        """The order servers are asked in: that of lsp_servers when given, else of the definitions."""
        chosen = self.run.options.of(LspOptions).lsp_servers
        return sorted(servers, key=lambda d: chosen.index(d.id)) if chosen else servers

    # -- availability --------------------------------------------------------------------------

    async def availability(self, server: ServerDef, start: Path) -> Availability:
        from tether_lsp.servers import Availability, answers_version, find_root

        root = find_root(server, start, self.run.root)
        trusted = self.run.trusted
        running = self._running_binary(server, root, trusted)
        binary, note = running if running is not None else self._find_binary(server, root, trusted)
        problems = []
        if root is None:
            problems.append(f"no root marker (looked for {', '.join(server.root_markers)})")
        if binary is None:
            install = f" ({server.install})" if server.install else ""
            problems.append(note or f"binary missing: {server.command[0]}{install}")
            note = None
        elif server.version_args is not None:
            if binary not in self._versions:
                self._versions[binary] = await answers_version(self.run, binary, server.version_args)
            if self._versions[binary]:
                problems.append(f"binary does not work: {self._versions[binary]}")
        return Availability(server, root, binary, "; ".join(problems) or None, note)

    def _running_binary(
        self, server: ServerDef, root: Path | None, trusted: bool
    ) -> tuple[str | None, str | None] | None:
        """The binary and note found when the server running at ``root`` started, while it runs: not looked
        for on PATH at every call (its process runs whatever became of the file since). None once it ended,
        or when the run's trust changed since."""
        if root is None:
            return None
        key = (server.id, root)
        found = self._found.get(key)
        if found is None or found[1] != trusted:
            return None
        conn, _, binary, note = found
        return (binary, note) if conn is self.connections.get(key) and conn.alive else None

    def _find_binary(
        self, server: ServerDef, root: Path | None, trusted: bool
    ) -> tuple[str | None, str | None]:
        """The server's binary for ``root``, and what is said of the project's own one a run that does not
        trust its root passes over."""
        from tether_lsp.servers import find_binary

        dirs = [d for d in (root, self.run.root) if d is not None]
        binary = find_binary(server.command[0], dirs, trusted=trusted)
        own = None if trusted else find_binary(server.command[0], dirs)  # what a trusted run would use
        if own is None or own == binary:
            return binary, None
        return binary, (
            f"the project's own {self.run.relpath(own)} is not run: this run does not trust its root "
            "(run option trust; tether --trust)"
        )

    async def serving(self, path: Path) -> list[Availability]:
        """Every enabled server that can serve the file, in the order they are asked; or a ToolError
        saying which half (marker, binary) is missing. A server that cannot serve it while another one
        can is left out (`status` says why)."""
        candidates = [d for d in self.definitions() if d.handles(path)]
        if not candidates:
            known = sorted({e for d in self.definitions() for e in d.extensions})
            raise ToolError(
                f"no language server handles '{path.suffix or path.name}' files; servers are defined for {', '.join(known)}",
                code="no_server",
            )
        enabled = self.in_order([d for d in candidates if self.enabled(d)])
        if not enabled:
            ids = ", ".join(d.id for d in candidates)
            raise ToolError(
                f"the servers for '{path.suffix}' files ({ids}) are not enabled in this run (run option lsp_servers)",
                code="no_server",
            )
        usable, reasons = [], []
        for server in enabled:
            avail = await self.availability(server, path.parent)
            if avail.ok:
                usable.append(avail)
            else:
                reasons.append(f"{server.id}: {avail.reason}")
        if usable:
            return usable
        raise ToolError(
            f"no language server can serve '{self.run.relpath(path)}': {'; '.join(reasons)}. "
            "Add the missing root marker or install the server; `lsp` with action status shows every server.",
            code="server_unavailable",
            reasons=reasons,
        )

    # -- connections ---------------------------------------------------------------------------

    async def connection(self, avail: Availability, *, retry_failed: bool = True) -> Connection:
        """The running server for ``avail`` (started, or restarted with its documents, when needed).

        ``retry_failed=False`` (diagnostics on write) does not try again a server whose start failed
        in this run: every write would wait for it. A query or reload tries again.
        """
        import asyncio

        from tether_lsp.connection import Connection, StartFailed

        assert avail.root is not None and avail.binary is not None
        key = (avail.server.id, avail.root)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if self._closed:
                raise ToolError("the run is closing; no language server is started any more")
            conn = self.connections.get(key)
            if conn is not None and conn.alive:
                return conn
            if not retry_failed and key in self.failed:
                raise ToolError(self.failed[key], code="start_failed")
            if conn is not None:
                # a restart: the binary is looked for again. ``avail`` may have been asked while the dead
                # server still looked alive, and so name the binary it started from, gone since
                avail = await self.availability(avail.server, key[1])
                if not avail.ok or avail.root != key[1]:
                    why = avail.reason or f"its root marker is no longer in {self.run.relpath(key[1])}"
                    raise ToolError(
                        f"{key[0]} died and cannot be started again: {why}. "
                        "`lsp` with action status shows every server.",
                        code="server_unavailable",
                        server=key[0],
                    )
                assert avail.binary is not None
            reopen = [d.path for d in conn.docs.values()] if conn is not None else []
            restarts = conn.restarts + 1 if conn is not None else 0
            if conn is not None:
                self.connections.pop(key, None)
                await conn.close(0.2)
            new = Connection(avail.server, avail.binary, key[1], self.run)
            new.restarts = restarts
            try:
                await new.start(self.run.options.of(LspOptions).lsp_start_timeout)
            except StartFailed as exc:
                await new.close(0.2)
                self.failed[key] = (
                    f"{exc}. Check that the server works (`lsp` action status), then retry or reload."
                )
                raise ToolError(self.failed[key], code="start_failed", server=avail.server.id) from None
            except (
                BaseException
            ):  # cancelled mid-start (a bounded caller gave up): leave nothing half-started
                await asyncio.shield(new.close(0.2))
                raise
            self.failed.pop(key, None)
            self.connections[key] = new
            self._found[key] = (new, self.run.trusted, avail.binary, avail.note)
            for path in reopen:
                new.open(path)
            return new

    async def with_file(self, path: Path, fn: Callable[[Connection, Doc], Awaitable[T]]) -> T:
        """``fn``'s answer from the first of the file's servers that answers.

        A server whose ``fn`` raises `NotAnswered` (it does not offer this, or found nothing) passes the
        question to the next one; when none answers, the first one's `NotAnswered` stands.
        """
        first: NotAnswered | None = None
        for avail in await self.serving(path):
            try:
                return await self._on(avail, path, fn)
            except NotAnswered as exc:
                first = first or exc
        assert first is not None
        return first.stand()

    async def with_server(
        self, path: Path, server_id: str, fn: Callable[[Connection, Doc], Awaitable[T]]
    ) -> T:
        """``fn``'s answer from one named server of the file (the one that offered what is applied)."""
        for avail in await self.serving(path):
            if avail.server.id == server_id:
                try:
                    return await self._on(avail, path, fn)
                except NotAnswered as exc:
                    return exc.stand()
        raise ToolError(
            f"{server_id} no longer serves '{self.run.relpath(path)}' in this run; ask code_actions again",
            code="server_unavailable",
        )

    async def with_every(
        self, path: Path, fn: Callable[[Connection, Doc], Awaitable[T]]
    ) -> list[tuple[ServerDef, T | ToolError]]:
        """``fn``'s answer from every server of the file, asked at the same time; a server's failure is its answer.
        Any other exception is raised once every server is done (none is left running)."""
        import asyncio

        async def one(avail: Availability) -> tuple[ServerDef, T | ToolError]:
            try:
                return avail.server, await self._on(avail, path, fn)
            except ToolError as exc:
                return avail.server, exc

        done = await asyncio.gather(*(one(a) for a in await self.serving(path)), return_exceptions=True)
        for answer in done:
            if isinstance(answer, BaseException):
                raise answer
        return [answer for answer in done if not isinstance(answer, BaseException)]

    async def _on(self, avail: Availability, path: Path, fn: Callable[[Connection, Doc], Awaitable[T]]) -> T:
        """Run ``fn`` against one server with the file open and everything re-synced.

        A server that died is restarted with its documents re-opened and ``fn`` retried once. Never while a
        preview holds the servers (`Gate`).
        """
        async with self.gate.shared():
            return await self._on_shared(avail, path, fn)

    async def _on_shared(
        self, avail: Availability, path: Path, fn: Callable[[Connection, Doc], Awaitable[T]]
    ) -> T:
        from tether_lsp.connection import RequestTimeout, ServerDied, ServerError

        for attempt in (1, 2):
            conn = await self.connection(avail)
            try:
                await conn.watcher.refresh()
                doc = conn.open(path)
                if doc is None:
                    raise ToolError(
                        f"'{self.run.relpath(path)}' is not a readable UTF-8 text file",
                        code="unreadable",
                    )
                # answers from a half-analysed project are partial: the first analysis is waited for, bounded
                await conn.first_round(self.run.options.of(LspOptions).lsp_ready_wait)
                readiness.record(conn)  # the answer says whether the server was ready when asked
                return await fn(conn, doc)
            except ServerDied:
                if attempt == 2:
                    tail = " | ".join(list(conn.stderr_tail)[-3:])
                    raise ToolError(
                        f"{avail.server.id} died again after a restart{': ' + tail if tail else ''}. "
                        "Try `lsp` action reload, or check the server with action status.",
                        code="server_died",
                    ) from None
                log.warning("%s died; restarting it", avail.server.id)
            except RequestTimeout as exc:
                raise ToolError(
                    f"{avail.server.id} timed out: {exc}. The server may be busy indexing a large project; "
                    "retry shortly, or raise the run option lsp_request_timeout.",
                    code="timeout",
                    method=exc.method,
                    timeout=exc.timeout,
                ) from None
            except ServerError as exc:
                raise ToolError(
                    f"{avail.server.id} answered with an error: {exc}", code="server_error"
                ) from None
        raise AssertionError("unreachable")

    async def request(self, conn: Connection, method: str, params: Any) -> Any:
        """A query of a tool (never the handshake): its own progress is reported on a token of ours."""
        if hasattr(params, "work_done_token") and params.work_done_token is None:
            params.work_done_token = conn.own_token()
        return await conn.request(method, params, self.run.options.of(LspOptions).lsp_request_timeout)

    async def reload(self, root: Path | None = None) -> list[str]:
        """Restart the running servers (for servers rooted under ``root``); return what was restarted."""
        self.failed.clear()
        done = []
        for key, conn in list(self.connections.items()):
            if root is not None and not key[1].is_relative_to(root):
                continue
            paths = [d.path for d in conn.docs.values()]
            self.connections.pop(key, None)
            await conn.close(self.run.options.of(LspOptions).lsp_shutdown_grace)
            avail = await self.availability(conn.server, key[1])
            if avail.ok and avail.root == key[1]:
                new = await self.connection(avail)
                new.restarts = conn.restarts + 1
                for p in paths:
                    new.open(p)
            done.append(f"{conn.server.id} for {self.run.relpath(key[1])}")
        return done

    def idle(self) -> bool:
        """Nothing to close: no server started (`tether.run.list_tools` then leaves the close out)."""
        return not self.connections and self.putting_back is None

    async def aclose(self) -> None:
        import asyncio

        self._closed = True
        if self.putting_back is not None:
            self.putting_back.cancel()
            await asyncio.gather(self.putting_back, return_exceptions=True)
        grace = self.run.options.of(LspOptions).lsp_shutdown_grace
        conns = list(self.connections.values())
        self.connections.clear()
        await asyncio.gather(*(c.close(grace) for c in conns), return_exceptions=True)

    def uptime(self, conn: Connection) -> float:
        return time.monotonic() - conn.started_at
