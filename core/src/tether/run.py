"""The run: one harness run's root, surface, resources, tools and dispatch.

Open one with ``async with open_run(root) as run`` (asyncio, the home of pygls and jupyter_client) or
``with open_run_sync(root) as run`` from plain synchronous code. Closing a run stops everything its
resources started: families' own shutdown first, then every tracked process tree is killed.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import os
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import attrs

from tether.args import ArgumentsError, structure_arguments
from tether.hookspecs import NO_RESOURCE
from tether.diagnostics import Diagnostic, DiagnosticRegistry, WriteDiagnostics
from tether.output import DEFAULT_MAX_CHARS, cap_text
from tether.plugins import Registrar, Unavailable, plugin_manager
from tether.surfaces import BUILTIN_SURFACES, Surface
from tether.tools import Text, Tool, ToolError, ToolResult

log = logging.getLogger("tether")

ProgressSink = Callable[[float, "float | None", "str | None"], Any]

# the tools whose calls enclose the current one (a cell's tool() call runs inside eval's call)
_enclosing: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("tether_enclosing", default=frozenset())

CLOSE_TIMEOUT = 10.0  # how long one family's shutdown may take before we move on
KILL_GRACE = 2.0  # SIGTERM -> SIGKILL grace for leftover process trees
DIAGNOSTICS_TIMEOUT = 30.0  # default of the run option diagnostics_timeout: the bound on a write's diagnostics
DIAGNOSTICS_SLACK = 2.0  # beyond the run's diagnostics timeout, before the core stops waiting on a plugin


@attrs.define
class CallContext:
    """What a handler gets besides its arguments."""

    run: Run
    tool: Tool
    call_id: str
    _progress: ProgressSink | None = None

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress of long work (a terminal line for `call`, an MCP notification for `serve`)."""
        if self._progress is None:
            return
        try:
            out = self._progress(progress, total, message)
            if inspect.isawaitable(out):
                await out
        except Exception:  # noqa: BLE001 - progress is best effort, never fails the call
            log.debug("progress sink failed", exc_info=True)


async def _settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class Run:
    def __init__(
        self,
        root: str | os.PathLike[str] = ".",
        *,
        surface: str = "full",
        conversation_id: str | None = None,
        modes: Iterable[str] = (),
        options: dict[str, Any] | None = None,
        plugins: Iterable[Any] = (),
        block: Iterable[str] = (),
        load_entry_points: bool = True,
    ) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ValueError(f"root {str(root)!r} is not a directory")
        self.conversation_id = conversation_id
        self.modes = frozenset(modes)
        self.options: dict[str, Any] = dict(options or {})
        self.diagnostics = DiagnosticRegistry()
        self.pm, self.plugin_errors = plugin_manager(plugins, block, load_entry_points)
        self.hook = self.pm.hook
        self.surfaces = dict(BUILTIN_SURFACES)
        for extra in self.hook.tether_add_surfaces(run=self):
            for s in extra or ():
                self.surfaces[s.name] = s
        if surface not in self.surfaces:
            raise ValueError(f"unknown surface {surface!r}; known: {', '.join(self.surfaces)}")
        self.surface: Surface = self.surfaces[surface]
        self._resources: dict[str, Any] = {}
        self._closers: list[Callable[[], Any]] = []
        self._procs: list[Any] = []  # psutil handles: a reused pid is not ours
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False
        self.all_tools: dict[str, Tool] = {}
        self.unavailable: list[Unavailable] = []
        self._visible: dict[str, Tool] = {}

    # -- opening ------------------------------------------------------------------------------

    async def _open(self) -> None:
        registrar = Registrar()
        # each plugin on its own: one family failing to register must not take the others down
        kwargs = {"run": self, "register": registrar}
        for impl in reversed(self.hook.tether_register_tools.get_hookimpls()):
            try:
                impl.function(*(kwargs[a] for a in impl.argnames))
            except Exception as exc:  # noqa: BLE001
                name = self.pm.get_name(impl.plugin) or impl.plugin_name
                log.warning("plugin %s failed to register its tools", name, exc_info=True)
                registrar.unavailable(name, f"failed to register its tools: {type(exc).__name__}: {exc}")
        for tool in registrar.tools.values():
            tier = self.hook.tether_tool_tier(run=self, tool=tool)
            self.all_tools[tool.name] = attrs.evolve(tool, tier=tier) if tier is not None else tool
        self.unavailable = [*self.plugin_errors, *registrar.missing]
        self._visible = {n: t for n, t in self.all_tools.items() if self.surface.allows(t.tier)}
        for out in self.hook.tether_run_opened(run=self):
            await _settle(out)

    # -- resources, processes, paths ----------------------------------------------------------

    def resource(self, hook_name: str) -> Any:
        """The run's handle from a family's resource hook, created on first use and cached (None too)."""
        if hook_name not in self._resources:
            hook = getattr(self.hook, hook_name, None)
            if hook is None:
                raise LookupError(f"no resource hook named {hook_name!r}")
            handle = hook(run=self)
            if handle is NO_RESOURCE:  # a harness switched the family off
                handle = None
            self._resources[hook_name] = handle
            if handle is not None:
                closer = getattr(handle, "aclose", None) or getattr(handle, "close", None)
                if closer is not None:
                    self._closers.append(closer)
        return self._resources[hook_name]

    def on_close(self, fn: Callable[[], Any]) -> None:
        """Call ``fn`` (sync or async) when the run closes, before leftover processes are killed."""
        self._closers.append(fn)

    def track_process(self, proc: Any) -> None:
        """Kill this process's tree when the run closes, whatever its family's shutdown did."""
        from tether.procs import process

        handle = process(proc if isinstance(proc, int) else proc.pid)
        if handle is not None:
            self._procs.append(handle)

    def resolve_path(self, path: str, *, must_exist: bool = False) -> Path:
        """A path the model gave, made absolute and confined to the root (symlinks followed)."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path is empty; give a file path relative to the root, e.g. 'src/main.py'")
        raw = Path(path)
        candidate = raw if raw.is_absolute() else self.root / raw
        resolved = candidate.resolve()
        if not resolved.is_relative_to(self.root):
            lexical = Path(os.path.normpath(candidate))
            why = " through a symlink" if lexical.is_relative_to(self.root) else ""
            raise ToolError(
                f"path '{path}' resolves outside the root{why}; only files under the root "
                "can be used: give a path relative to the root (e.g. 'src/main.py') or an absolute path inside it"
            )
        if must_exist and not resolved.exists():
            raise ToolError(f"no such file: '{self.relpath(resolved)}' (paths are relative to the root)")
        return resolved

    def relpath(self, path: str | os.PathLike[str]) -> str:
        """A path as the model should see it: relative to the root, with forward slashes."""
        p = Path(path)
        if not p.is_absolute():
            return p.as_posix()
        if not p.is_relative_to(self.root):  # lexically outside: maybe inside once links are followed
            p = p.resolve()
            if not p.is_relative_to(self.root):
                return str(p)
        return p.relative_to(self.root).as_posix() or "."

    # -- tools ----------------------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        """The tools this run's surface sees, by name."""
        return [self._visible[n] for n in sorted(self._visible)]

    def tool_listing(self) -> dict[str, Any]:
        """What `tether tools --json` prints."""
        return {
            "tools": [
                {
                    "name": t.name,
                    "family": t.family,
                    "tier": t.tier.value,
                    "description": t.description,
                    "input_schema": t.input_schema,
                }
                for t in self.tools()
            ],
            "unavailable": [{"family": u.family, "reason": u.reason} for u in self.unavailable],
        }

    def _unknown_tool(self, name: str) -> ToolResult:
        on_offer = ", ".join(sorted(self._visible)) or "none"
        text = f"unknown tool '{name}'. Tools on surface '{self.surface.name}': {on_offer}."
        if self.unavailable:
            why = "; ".join(f"{u.family}: {u.reason}" for u in self.unavailable)
            text += f" Not available in this run: {why}."
        return ToolResult.error(text, {"error": "unknown_tool", "tools": sorted(self._visible)})

    async def call(
        self, name: str, arguments: dict[str, Any] | None = None, *, progress: ProgressSink | None = None
    ) -> ToolResult:
        """Dispatch one call; every failure comes back as an error result, never an exception."""
        if self._closed:
            return ToolResult.error("the run is closed")
        tool = self._visible.get(name)
        if tool is None:
            return self._unknown_tool(name)
        try:
            args = structure_arguments(tool.args, arguments)
        except ArgumentsError as exc:
            lines = "; ".join(exc.problems)
            return ToolResult.error(f"invalid arguments for {name}: {lines}", {"error": "invalid_arguments", "problems": exc.problems})
        try:
            verdict = await _settle(self.hook.tether_approve(run=self, tool=tool, arguments=arguments or {}))
        except Exception as exc:  # noqa: BLE001 - a failing approver refuses (fail closed)
            log.exception("approval hook failed for %s", name)
            verdict = f"the approval check failed ({type(exc).__name__}: {exc})"
        if verdict is False or isinstance(verdict, str):
            reason = verdict if isinstance(verdict, str) else "refused by the harness's approval policy"
            return ToolResult.error(f"call to {name} was not approved: {reason}. Do not retry it unchanged.", {"error": "refused"})
        enclosing = _enclosing.get()
        token = _enclosing.set(enclosing | {name})
        try:
            if tool.parallel_safe:
                return await self._run(tool, args, progress)
            if name in enclosing:  # it would wait for its own lock for ever
                return ToolResult.error(
                    f"{name} cannot be called from inside a call of {name} (it runs one call at a time); "
                    "make the call directly instead", {"error": "reentrant"})
            lock = self._locks.setdefault(name, asyncio.Lock())
            async with lock:
                return await self._run(tool, args, progress)
        finally:
            _enclosing.reset(token)

    async def _run(self, tool: Tool, args: Any, progress: ProgressSink | None) -> ToolResult:
        ctx = CallContext(self, tool, uuid.uuid4().hex[:12], progress)
        paths: list[str] = []
        try:
            if tool.touches is not None:
                paths = [self.relpath(self.resolve_path(p)) for p in tool.touches(args)]
                await self._baseline(paths, ctx.call_id)
            result = await _settle(tool.handler(ctx, args))
            if isinstance(result, str):
                result = ToolResult.text(result)
        except ToolError as exc:
            result = ToolResult.error(exc.message, exc.data)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - contained: the model gets a paragraph, the log the traceback
            log.exception("tool %s failed", tool.name)
            result = ToolResult.error(
                f"{tool.name} failed inside the tool: {type(exc).__name__}: {exc}. This is a fault of the tool, "
                "not of your arguments; the details are in the log. Try another approach or report it.",
                {"error": "internal"},
            )
        if tool.touches is not None and not result.is_error:
            result = await self._post_write(tool, paths, result, ctx.call_id)
        return self._bound(result)

    def _bound(self, result: ToolResult) -> ToolResult:
        limit = int(self.options.get("max_output_chars", DEFAULT_MAX_CHARS))
        if all(len(b.text) <= limit for b in result.content if isinstance(b, Text)):
            return result
        how = "Narrow the request (a smaller path, range, or a more specific query) to see the rest."
        content = tuple(Text(cap_text(b.text, limit, how)) if isinstance(b, Text) else b for b in result.content)
        return ToolResult(content, result.is_error, result.data)

    # -- diagnostics on write -------------------------------------------------------------------

    def _diagnostics_wait(self) -> float:
        return float(self.options.get("diagnostics_timeout", DIAGNOSTICS_TIMEOUT)) + DIAGNOSTICS_SLACK

    async def _gather_diagnostics(self, answers: list[Any]) -> tuple[dict[str, list[Diagnostic]], list[str]]:
        files: dict[str, list[Diagnostic]] = {}
        notes: list[str] = []
        for answer in answers:
            try:
                value = await asyncio.wait_for(_settle(answer), self._diagnostics_wait())
            except asyncio.TimeoutError:
                notes.append("diagnostics still pending: a checker did not answer in time")
                continue
            except Exception as exc:  # noqa: BLE001 - diagnostics are extra; never fail the write over them
                log.exception("diagnostics plugin failed")
                notes.append(f"diagnostics unavailable: a diagnostics plugin failed ({type(exc).__name__}: {exc}); "
                             "errors this write introduced may be missing. The details are in the log.")
                continue
            if isinstance(value, WriteDiagnostics):
                files.update(value.files)
                notes.extend(value.notes)
            elif value:
                files.update(value)
        return files, notes

    async def _baseline(self, paths: Sequence[str], call_id: str) -> None:
        answers = self.hook.tether_diagnostics_before_write(run=self, paths=list(paths), call_id=call_id)
        files, _ = await self._gather_diagnostics(answers)
        self.diagnostics.baseline(files)

    async def _post_write(self, tool: Tool, paths: Sequence[str], result: ToolResult, call_id: str) -> ToolResult:
        answers = self.hook.tether_diagnostics_after_write(run=self, paths=list(paths), call_id=call_id)
        files, notes = await self._gather_diagnostics(answers)
        introduced = self.diagnostics.update(files)
        try:
            out = self.hook.tether_post_write(
                run=self, tool=tool, paths=list(paths), result=result, introduced=introduced, notes=notes
            )
        except Exception:  # noqa: BLE001 - the write happened; report it even if post-processing broke
            log.exception("post-write hook failed")
            return result
        return out if out is not None else result

    # -- closing --------------------------------------------------------------------------------

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        for out in self.hook.tether_run_closing(run=self):
            await self._bounded_close(lambda out=out: out, "run_closing hook")
        for closer in reversed(self._closers):
            await self._bounded_close(closer, getattr(closer, "__qualname__", repr(closer)))
        if self._procs:
            from tether.procs import kill_tree

            await asyncio.to_thread(lambda: [kill_tree(p, KILL_GRACE) for p in self._procs])

    async def _bounded_close(self, fn: Callable[[], Any], what: str) -> None:
        try:
            await asyncio.wait_for(_settle(fn()), CLOSE_TIMEOUT)
        except Exception:  # noqa: BLE001 - one family's failed shutdown must not keep the others running
            log.warning("closing %s failed; its processes are killed anyway", what, exc_info=True)


@asynccontextmanager
async def open_run(root: str | os.PathLike[str] = ".", **kwargs: Any) -> AsyncIterator[Run]:
    """Open a run (plugins discovered now, tools registered) and close it on exit."""
    run = Run(root, **kwargs)
    try:
        await run._open()
        yield run
    finally:
        await run.aclose()


class SyncRun:
    """A run driven from synchronous code: its event loop lives in a thread of its own."""

    def __init__(self, run: Run, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        self.run = run
        self._loop = loop
        self._thread = thread

    def __getattr__(self, name: str) -> Any:
        return getattr(self.run, name)

    def _wait(self, coro: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()  # type: ignore[arg-type]

    def call(self, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> ToolResult:
        if not self._thread.is_alive():  # closed: no loop runs to answer, the wait would never end
            return ToolResult.error("the run is closed")
        return self._wait(self.run.call(name, arguments, **kw))

    def close(self) -> None:
        if self._thread.is_alive():
            self._wait(self.run.aclose())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)


@contextmanager
def open_run_sync(root: str | os.PathLike[str] = ".", **kwargs: Any) -> Iterator[SyncRun]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="tether-run", daemon=True)
    thread.start()

    async def make() -> Run:
        run = Run(root, **kwargs)
        await run._open()
        return run

    try:
        run = asyncio.run_coroutine_threadsafe(make(), loop).result()
    except BaseException:
        loop.call_soon_threadsafe(loop.stop)
        raise
    sync = SyncRun(run, loop, thread)
    try:
        yield sync
    finally:
        sync.close()
