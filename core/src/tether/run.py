"""The run: one harness run's root, surface, resources, tools and dispatch.

Open one with ``async with open_run(root) as run`` (asyncio, the home of pygls and jupyter_client) or
``with open_run_sync(root) as run`` from plain synchronous code. Closing a run stops everything its
resources started: families' own shutdown first, then every tracked process tree is killed.
"""

from __future__ import annotations

import contextvars
import errno
import inspect
import itertools
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from tether.args import ArgumentsError, structure_arguments
from tether.diagnostics import DiagnosticRegistry, after_write, before_write
from tether.hookspecs import NO_RESOURCE
from tether.options import CoreOptions, Options, OptionsError
from tether.output import cap_text
from tether.plugins import Registrar, Unavailable, plugin_manager
from tether.sandbox import status as sandbox_status
from tether.staging import Staging
from tether.surfaces import BUILTIN_SURFACES, Surface
from tether.tools import Text, Tier, Tool, ToolError, ToolResult

if TYPE_CHECKING:  # imported where it runs: a listing of the tools needs no event loop
    import asyncio

log = logging.getLogger("tether")

T = TypeVar("T")

ProgressSink = Callable[[float, "float | None", "str | None"], Any]

# the tools whose calls enclose the current one (a cell's tool() call runs inside eval's call)
_enclosing: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "tether_enclosing", default=frozenset()
)
# the file-writing call being run: its tool, arguments, and the paths its approval covered
DRY_RUN: Any = object()  # the call being a dry run: `write_files` refuses
_writing: contextvars.ContextVar[Any] = contextvars.ContextVar("tether_writing", default=None)

CLOSE_TIMEOUT = 10.0  # how long one family's shutdown may take before we move on
KILL_GRACE = 2.0  # SIGTERM -> SIGKILL grace for leftover process trees


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
        except Exception:  # progress is best effort, never fails the call
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
        options: Mapping[str, Any] | None = None,
        plugins: Iterable[Any] = (),
        block: Iterable[str] = (),
        load_entry_points: bool = True,
    ) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ValueError(f"root {str(root)!r} is not a directory")
        self.conversation_id = conversation_id
        self.modes = frozenset(modes)
        self.diagnostics = DiagnosticRegistry()
        self.staging = Staging()  # changes staged for resolve (tether.staging)
        loaded = plugin_manager(plugins, block, load_entry_points)
        self.pm, self.plugin_errors, self.option_registry = loaded.pm, loaded.errors, loaded.options
        self.hook = self.pm.hook
        self.options: Options = self.option_registry.structure(options, self.root, loaded.not_loaded)
        self._core = self.options.of(CoreOptions)
        self.surfaces = dict(BUILTIN_SURFACES)
        for hook in (
            self.hook.tether_register_surfaces,
            self.hook.tether_add_surfaces,
        ):  # the old name, deprecated
            for extra in hook(run=self):
                for s in extra or ():
                    self.surfaces[s.name] = s
        if surface not in self.surfaces:
            raise OptionsError([f"unknown surface {surface!r}; known: {', '.join(self.surfaces)}"])
        self.surface: Surface = self.surfaces[surface]
        self._resources: dict[str, Any] = {}
        self._closers: list[Callable[[], Any]] = []
        self.id = os.urandom(6).hex()  # names the run in its children's environment (tether.procs.TAG)
        self._keeper: Any = None  # tether.procs.Keeper, started with the first process or private directory
        # when the run began, on the clock its processes are dated by (tether.procs.process_clock)
        self._began = time.clock_gettime(time.CLOCK_BOOTTIME) if hasattr(time, "CLOCK_BOOTTIME") else None
        self._serial = itertools.count(1)  # numbers the run's children and calls
        self._private: Path | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._closed = False
        self.all_tools: dict[str, Tool] = {}
        self.unavailable: list[Unavailable] = []
        self._visible: dict[str, Tool] = {}

    @property
    def trusted(self) -> bool:
        """Whether the run may execute its root's code: the project's own binaries, checkers that run it.

        The run option ``trust`` decides; unset, a surface that offers exec tools trusts its root and a
        read-only one (plan, readonly) does not, so exploring a checkout never runs it.
        """
        if self._core.trust is not None:
            return self._core.trust
        return self.surface.allows(Tier.EXEC)

    # -- opening ------------------------------------------------------------------------------

    async def _open(self) -> None:
        self._register()
        await self._recover_writes()
        for out in self.hook.tether_run_opened(run=self):
            await _settle(out)

    def _register(self) -> None:
        """Every family's tools registered, their tiers and the surface's view decided (no event loop)."""
        registrar = Registrar()
        # each plugin on its own: one family failing to register must not take the others down
        kwargs = {"run": self, "register": registrar}
        for impl in reversed(self.hook.tether_register_tools.get_hookimpls()):
            registrar.family = self.pm.get_name(impl.plugin) or impl.plugin_name
            try:
                impl.function(*(kwargs[a] for a in impl.argnames))
            except Exception as exc:
                log.warning("plugin %s failed to register its tools", registrar.family, exc_info=True)
                registrar.unavailable(f"failed to register its tools: {type(exc).__name__}: {exc}")
        for tool in registrar.tools.values():
            tier = self.hook.tether_tool_tier(run=self, tool=tool)
            self.all_tools[tool.name] = attrs.evolve(tool, tier=tier) if tier is not None else tool
        self.unavailable = [*self.plugin_errors, *registrar.missing]
        self._visible = {n: t for n, t in self.all_tools.items() if self.surface.allows(t.tier)}

    async def _recover_writes(self) -> None:
        import asyncio

        from tether.atomic import recover, state_dir

        if not state_dir(self.root, create=False).is_dir():
            return  # the common case, said by one stat on the loop: no write of this root was cut short
        try:
            for line in await asyncio.to_thread(recover, self.root):
                log.warning("%s under %s", line, self.root)
        except Exception:  # a stuck journal must not keep the run from opening
            log.warning("could not recover interrupted writes under %s", self.root, exc_info=True)

    # -- resources, processes, paths ----------------------------------------------------------

    def resource(self, hook: Callable[..., T | None]) -> T | None:
        """The run's handle from a family's resource hook, created on first use and cached (None too).

        Pass the hook specification itself (``run.resource(hookspecs.tether_lsp_supervisor)``): the
        handle is then typed by the spec's return annotation.
        """
        hook_name = _hook_name(hook)
        if hook_name not in self._resources:
            caller = getattr(self.hook, hook_name, None)
            if caller is None:
                raise LookupError(f"no resource hook named {hook_name!r}")
            handle = caller(run=self)
            if handle is NO_RESOURCE:  # a harness switched the family off
                handle = None
            self._resources[hook_name] = handle
            if handle is not None:
                closer = getattr(handle, "aclose", None) or getattr(handle, "close", None)
                if closer is not None:
                    self._closers.append(closer)
        return self._resources[hook_name]

    def definitions(self, hook: Callable[..., Any], kind: type[T]) -> dict[str, T]:
        """Definitions that plugins add or replace by id (language servers, grammars, debug adapters).

        The one rule: a family's built-ins come from its own ``trylast`` implementation of ``hook``,
        and for each id the definition of the implementation pluggy calls first wins, so a third
        party's replaces a built-in and a ``tryfirst`` one replaces both. Order: the built-ins in their
        own order, then new ids in the order their plugins were registered (a replaced id keeps the
        built-in's place). Anything that is not a ``kind`` is left out, logged.
        """
        caller = getattr(self.hook, _hook_name(hook))
        table: dict[str, T] = {}
        for answer in reversed(caller(run=self)):  # the built-ins (trylast) first, then up to tryfirst
            for definition in answer or ():
                if not isinstance(definition, kind):
                    log.warning("%s answered %r, not a %s; left out", caller.name, definition, kind.__name__)
                    continue
                table[definition.id] = definition  # type: ignore[attr-defined]  # a replaced id keeps its place
        return table

    def on_close(self, fn: Callable[[], Any]) -> None:
        """Call ``fn`` (sync or async) when the run closes, before leftover processes are killed."""
        self._closers.append(fn)

    def _keep(self) -> Any:
        if self._keeper is None:
            from tether.procs import Keeper

            self._keeper = Keeper(self.id, KILL_GRACE, self._began)
        return self._keeper

    def child_env(self, env: dict[str, str] | None = None) -> dict[str, str]:
        """The environment for a process the run starts (``os.environ`` unless given), tagged for stopping.

        The tag is inherited by everything the process starts, so `stop_process` and the close find
        what left its session or lost its parent.
        """
        from tether.procs import TAG

        return {**(os.environ if env is None else env), TAG: f"{self.id}.{next(self._serial)}"}

    def track_process(self, proc: Any) -> None:
        """Stop this process when the run closes, or when the process that runs tether dies.

        Its tree goes with it, and so do the process group of a session leader and whatever carries
        the tag of `child_env`, whatever its family's shutdown did. The tag is read from the process's
        environment: of one already gone when tracked, what it left carries a tag no one knows, and is
        stopped at the run's close (by the run's own tag), not by `stop_process`.
        """
        self._keep().track(proc if isinstance(proc, int) else proc.pid)

    async def stop_process(self, proc: Any, grace: float = KILL_GRACE) -> None:
        """Stop a tracked process now, with everything `track_process` would stop at close."""
        import asyncio

        pid = proc if isinstance(proc, int) else proc.pid
        await asyncio.to_thread(self._keep().stop_one, pid, grace)

    def private_dir(self) -> Path:
        """The run's private temporary directory, removed at close (by the next run, if we were killed)."""
        if self._private is None:
            import tempfile

            self._private = self.scratch_dir(Path(tempfile.gettempdir()), "tether-run-")
        return self._private

    def scratch_dir(self, parent: Path, prefix: str) -> Path:
        """A new directory named ``prefix*`` in ``parent``, removed when the run closes, also when the
        process that runs tether is killed; if its keeper was killed with it, by the next run that makes
        a scratch directory with the same prefix in the same parent (the directory names its owner).

        For what cannot live in `private_dir` (a program built where the temporary directory is on a
        noexec mount). A caller may remove it sooner. An OSError when it cannot be made.
        """
        from tether.procs import private_dir

        path = Path(private_dir(prefix, str(parent)))
        self._keep().remove_at_close(str(path))
        return path

    def remove_scratch_dir(self, path: Path) -> None:
        """Remove a `scratch_dir` before the run closes (blocking: call it in a thread), and let go of
        it: its lock and its place in what the run and its keeper remove at close."""
        self._keep().remove_now(str(path))

    def resolve_path(self, path: str, *, must_exist: bool = False) -> Path:
        """A path the model gave, made absolute and confined to the root (symlinks followed)."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path is empty; give a file path relative to the root, e.g. 'src/main.py'")
        _check_path_text(path)
        raw = Path(path)
        candidate = raw if raw.is_absolute() else self.root / raw
        try:
            resolved = candidate.resolve()
        except (RuntimeError, OSError):  # RuntimeError: Python 3.11's word for a symlink loop
            raise ToolError(
                f"path '{path}' goes through a symlink loop (a link that leads back to itself); give the real path",
                code="symlink_loop",
            ) from None
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

    async def write_files(self, changes: dict[Path, bytes | None], *, expect: Iterable[Any] = ()) -> None:
        """Write every file (None deletes it) or none, under the root's write lock, in a thread.

        ``expect`` are `tether.atomic.Snapshot`s of what the caller read: if one no longer holds,
        `tether.atomic.ChangedSince` is raised and nothing is written. Paths the call's approval did
        not cover (a rename's edits, known only now) are put to `tether_approve` first.
        """
        import asyncio

        from tether.atomic import write_all

        writing = _writing.get()
        if (
            writing is DRY_RUN
        ):  # a dry run's tool must preview, never write: refuse rather than write unapproved
            raise ToolError(
                "a dry run writes nothing; this tool tried to write during one (a fault of the tool)"
            )
        if writing is not None:
            tool, arguments, approved = writing
            paths = sorted({self.relpath(p) for p in changes})
            if not set(paths) <= approved:
                refusal = await self._approval(tool, arguments, paths)
                if refusal is not None:
                    raise ToolError(refusal.plain + " Nothing was written.", code="refused")
        await asyncio.to_thread(write_all, changes, root=self.root, expect=expect)

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
        """The tools this run's surface sees, by name: every tool that can be called (by the model, or
        from a cell), listed to the model or not."""
        return [self._visible[n] for n in sorted(self._visible)]

    def listed_tools(self) -> list[Tool]:
        """The tools listed to the model, by name: the surface's tools, less those its ``listed`` leaves
        out (`Surface.listed`)."""
        return [t for t in self.tools() if self.surface.lists(t.name)]

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
                for t in self.listed_tools()
            ],
            "unavailable": [{"family": u.family, "reason": u.reason} for u in self.unavailable],
            "options": self.option_registry.listing(),
            "sandbox": sandbox_status(self),
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
        import asyncio

        if self._closed:
            return ToolResult.error("the run is closed")
        tool = self._visible.get(name)
        if tool is None:
            return self._unknown_tool(name)
        dry = False
        try:
            problems = _argument_problems(arguments or {})
            if problems:
                raise ArgumentsError(problems)
            args = structure_arguments(tool.args, arguments)
            paths = await asyncio.to_thread(self._touched, tool, args) if tool.touches is not None else []
            if tool.touches is not None and getattr(args, "dry_run", False) is True:
                paths = []  # a dry run writes nothing: no approval, no write to wrap (`tether.staging`)
                dry = True
        except ArgumentsError as exc:
            lines = "; ".join(exc.problems)
            return self._bound(
                ToolResult.error(
                    f"invalid arguments for {name}: {lines}",
                    {"error": "invalid_arguments", "problems": exc.problems},
                )
            )
        except ToolError as exc:
            return self._bound(ToolResult.error(exc.message, exc.data))
        refusal = None if dry else await self._approval(tool, arguments or {}, paths)
        if refusal is not None:
            return refusal
        enclosing = _enclosing.get()
        token = _enclosing.set(enclosing | {name})
        try:
            if tool.parallel_safe:
                return await self._run(tool, args, progress, paths, arguments or {}, dry)
            if name in enclosing:  # it would wait for its own lock for ever
                return ToolResult.error(
                    f"{name} cannot be called from inside a call of {name} (it runs one call at a time); "
                    "make the call directly instead",
                    {"error": "reentrant"},
                )
            lock = self._locks.setdefault(name, asyncio.Lock())
            async with lock:
                return await self._run(tool, args, progress, paths, arguments or {}, dry)
        finally:
            _enclosing.reset(token)
            if self._keeper is not None and not enclosing:
                # what a call orphaned is told at once, not at the keeper's next poll; a call made from
                # inside another (a cell's tool()) leaves it to the outer call's end: each look lists
                # every process of the machine, milliseconds on a busy one, too slow for every bridged call
                self._keeper.note_adopted()

    def _touched(self, tool: Tool, args: Any) -> list[str]:
        """The files a file-writing call will write, relative to the root (its approval sees them)."""
        if tool.touches is None:
            return []
        return [self.relpath(self.resolve_path(p)) for p in tool.touches(args)]

    async def _approval(
        self, tool: Tool, arguments: dict[str, Any], paths: Sequence[str]
    ) -> ToolResult | None:
        """None when the call may go on; else the refusal to answer."""
        try:
            verdict = await _settle(
                self.hook.tether_approve(run=self, tool=tool, arguments=arguments, paths=list(paths))
            )
        except Exception as exc:  # a failing approver refuses (fail closed)
            log.exception("approval hook failed for %s", tool.name)
            verdict = f"the approval check failed ({type(exc).__name__}: {exc})"
        if verdict is False or isinstance(verdict, str):
            reason = verdict if isinstance(verdict, str) else "refused by the harness's approval policy"
            return self._bound(
                ToolResult.error(
                    f"call to {tool.name} was not approved: {reason}. Do not retry it unchanged.",
                    {"error": "refused"},
                )
            )
        return None

    async def _run(
        self,
        tool: Tool,
        args: Any,
        progress: ProgressSink | None,
        paths: list[str],
        arguments: dict[str, Any],
        dry: bool = False,
    ) -> ToolResult:
        import asyncio

        ctx = CallContext(self, tool, f"{self.id}.{next(self._serial)}", progress)
        wraps = tool.touches is not None and not dry
        token = _writing.set(
            DRY_RUN if dry else (tool, arguments, frozenset(paths)) if tool.touches is not None else None
        )
        try:
            if wraps:
                await before_write(self, paths, ctx.call_id)
            result = await _settle(tool.handler(ctx, args))
            if isinstance(result, str):
                result = ToolResult.text(result)
        except ToolError as exc:
            result = ToolResult.error(exc.message, exc.data)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - contained: the model gets a paragraph, the log the traceback
            result = self._fault(tool, exc)
        finally:
            _writing.reset(token)
        if wraps and not result.is_error:
            result = await after_write(self, tool, paths, result, ctx.call_id)
        return self._bound(result)

    def _fault(self, tool: Tool, exc: Exception) -> ToolResult:
        """What an exception out of a handler becomes: one line for an OSError that is the world's, not
        the tool's (a full disk, a read-only folder); else a fault of the tool, its traceback logged."""
        hint = _OS_ERRORS.get(exc.errno or 0) if isinstance(exc, OSError) else None
        if not isinstance(exc, OSError) or hint is None:
            log.exception("tool %s failed", tool.name)
            return ToolResult.error(
                f"{tool.name} failed inside the tool: {type(exc).__name__}: {exc}. This is a fault of the tool, "
                "not of your arguments; the details are in the log. Try another approach or report it.",
                {"error": "internal"},
            )
        where = f" on '{self.relpath(os.fsdecode(exc.filename))}'" if exc.filename else ""
        return ToolResult.error(
            f"{tool.name}: {exc.strerror or os.strerror(exc.errno or 0)}{where}: {hint}",
            {"error": "os_error", "errno": errno.errorcode.get(exc.errno or 0, str(exc.errno))},
        )

    def _bound(self, result: ToolResult) -> ToolResult:
        """Text and structured data capped at the run's output limit, the cut said."""
        limit = self._core.max_output_chars
        data = _bound_data(result.data, limit)
        if data is result.data and all(len(b.text) <= limit for b in result.content if isinstance(b, Text)):
            return result
        how = "Narrow the request (a smaller path, range, or a more specific query) to see the rest."
        content = tuple(
            Text(cap_text(b.text, limit, how)) if isinstance(b, Text) else b for b in result.content
        )
        return ToolResult(content, result.is_error, data)

    # -- closing --------------------------------------------------------------------------------

    async def aclose(self) -> None:
        import asyncio

        if self._closed:
            return
        self._closed = True
        for out in self.hook.tether_run_closing(run=self):
            await self._bounded_close(lambda out=out: out, "run_closing hook")
        for closer in reversed(self._closers):
            await self._bounded_close(closer, getattr(closer, "__qualname__", repr(closer)))
        if self._keeper is not None:
            await asyncio.to_thread(self._keeper.close)

    async def _bounded_close(self, fn: Callable[[], Any], what: str) -> None:
        import asyncio

        try:
            await asyncio.wait_for(_settle(fn()), CLOSE_TIMEOUT)
        except Exception:  # one family's failed shutdown must not keep the others running
            log.warning("closing %s failed; its processes are killed anyway", what, exc_info=True)


# errno values that are the user's or the machine's, not a fault of the tool: what to do about each
_OS_ERRORS = {
    errno.ENOSPC: "the disk is full; free some space and try again",
    errno.EDQUOT: "the disk quota is used up; free some space and try again",
    errno.EACCES: "permission denied; this process may not use that file or folder (pick another or fix its permissions)",
    errno.EPERM: "operation not permitted on that file or folder (pick another or fix its permissions)",
    errno.EROFS: "the file system is read-only; nothing can be written there",
    errno.ENAMETOOLONG: "a file name is too long (at most 255 bytes per name); use a shorter name",
    errno.ELOOP: "a symlink loop (a link that leads back to itself); give the real path",
    errno.ENOENT: "no such file or folder (it may have been removed meanwhile); check the path",
    errno.ENOTDIR: "a part of the path is a file, not a folder; check the path",
    errno.EISDIR: "that is a folder, not a file; give a file path",
    errno.ENOTEMPTY: "the folder is not empty",
    errno.EEXIST: "it already exists",
    errno.EFBIG: "the file would be too large for this file system",
    errno.EMLINK: "too many links",
    errno.ETXTBSY: "the file is a program that is running; it cannot be written now",
    errno.EBUSY: "the file or folder is busy; try again later",
}

DATA_CUT = "[cut: {n} characters; the text of the result says more, or narrow the request]"


def _bound_data(data: Any, limit: int) -> Any:
    """``data`` with every string longer than ``limit`` cut, and, if it is still larger than ``4 * limit``
    characters as JSON, only its short top-level facts and a prefix of each top-level list; the same
    object when nothing needed cutting."""
    if data is None or len(json.dumps(data, default=str)) <= limit:
        return data

    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > limit:
            return value[:limit] + DATA_CUT.format(n=len(value))
        if isinstance(value, dict):
            return {k: cut(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [cut(v) for v in value]
        return value

    smaller = cut(data)
    size = len(json.dumps(smaller, default=str))
    if size <= 4 * limit:  # data may be as long as a few texts: lists of matches, files
        return smaller
    if not isinstance(smaller, dict):
        return {"data_cut": f"the structured data was {size} characters, past the limit; narrow the request"}
    sizes = {k: len(json.dumps(v, default=str)) for k, v in smaller.items()}
    kept = {k: v for k, v in smaller.items() if sizes[k] <= 200}
    # a top-level list (matches, files) keeps the items that fit, from the start: a prefix of the answer
    room = 4 * limit - len(json.dumps(kept, default=str)) - 500
    prefixes = []
    for key, value in smaller.items():
        if key in kept or not isinstance(value, list):
            continue
        items: list[Any] = []
        for item in value:
            room -= len(json.dumps(item, default=str)) + 2
            if room < 0:
                break
            items.append(item)
        kept[key] = items
        prefixes.append(f"{key}: the first {len(items)} of {len(value)}")
    shown = f" ({'; '.join(prefixes)} kept)" if prefixes else ""
    kept["data_cut"] = f"the structured data was {size} characters, past the limit{shown}; narrow the request"
    return kept


def _check_path_text(path: str) -> None:
    """Refuse a path no file can have: a NUL, an unpaired surrogate, a name past the system's limits."""
    if "\0" in path:
        raise ToolError(
            "path contains a NUL character, which no file name can hold; give the path as plain text",
            code="bad_path",
        )
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"path contains an unpaired surrogate (U+{ord(path[exc.start]):04X}) at character {exc.start}; "
            "give the path as valid UTF-8 text",
            code="bad_path",
        ) from None
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if longest > 255 or len(encoded) > 4095:
        raise ToolError(
            f"path is too long ({len(encoded)} bytes, longest name {longest}); a name holds at most 255 bytes "
            "and a path 4095: use a shorter path",
            code="bad_path",
        )


MAX_ARGUMENT_DEPTH = 64  # levels of nested lists and objects in one call's arguments
MAX_ARGUMENT_ITEMS = 100_000  # values (strings, numbers, lists, objects) in one call's arguments
MAX_ARGUMENT_CHARS = 64 * 1024 * 1024  # characters of all strings (keys too) in one call's arguments


def _argument_problems(arguments: Any) -> list[str]:
    """What makes arguments unusable before anything walks them: nesting past MAX_ARGUMENT_DEPTH, more
    than MAX_ARGUMENT_ITEMS values or MAX_ARGUMENT_CHARS characters (one line, at the first place), and
    a lone surrogate in a string (valid JSON, not valid text; one line each).

    A loop, not a recursion: the arguments may be nested deeper than Python's recursion limit.
    """
    problems: list[str] = []
    items = chars = 0
    stack: list[tuple[Any, str, int]] = [(arguments, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        items += 1
        if depth > MAX_ARGUMENT_DEPTH:
            return [
                f"{where or 'the arguments'}: nested deeper than {MAX_ARGUMENT_DEPTH} levels of lists and "
                "objects; no argument of any tool needs that: send a flatter value"
            ]
        if items > MAX_ARGUMENT_ITEMS or chars > MAX_ARGUMENT_CHARS:
            return [_TOO_LARGE]
        if isinstance(value, str):
            chars += len(value)
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                problems.append(
                    f"{where or 'an argument'}: unpaired surrogate U+{ord(value[exc.start]):04X} at character "
                    f"{exc.start}; send valid UTF-8 text"
                )
        elif isinstance(value, dict):
            for k, v in reversed(value.items()):
                chars += len(k) if isinstance(k, str) else 0
                stack.append((v, f"{where}.{k}" if where else str(k), depth + 1))
        elif isinstance(value, (list, tuple)):
            stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in reversed(list(enumerate(value))))
    return [_TOO_LARGE] if chars > MAX_ARGUMENT_CHARS else problems


_TOO_LARGE = (
    f"the arguments are too large (more than {MAX_ARGUMENT_ITEMS:,} values or "
    f"{MAX_ARGUMENT_CHARS // (1024 * 1024)} Mi characters); send less in one call"
)


@asynccontextmanager
async def open_run(
    root: str | os.PathLike[str] = ".",
    *,
    surface: str = "full",
    conversation_id: str | None = None,
    modes: Iterable[str] = (),
    options: Mapping[str, Any] | None = None,
    plugins: Iterable[Any] = (),
    block: Iterable[str] = (),
    load_entry_points: bool = True,
) -> AsyncIterator[Run]:
    """Open a run (plugins discovered now, options structured, tools registered) and close it on exit.

    ``surface`` names who the tools are for (`full`, `plan`, `readonly` or one a plugin defines);
    ``options`` are the run options (`tether.options`; raises OptionsError on an unknown key or a bad
    value); ``plugins`` are plugin objects or modules registered besides the entry points, ``block``
    entry-point names never imported, ``load_entry_points=False`` loads none.
    """
    run = Run(
        root,
        surface=surface,
        conversation_id=conversation_id,
        modes=modes,
        options=options,
        plugins=plugins,
        block=block,
        load_entry_points=load_entry_points,
    )
    try:
        await run._open()
        yield run
    finally:
        await run.aclose()


def list_tools(
    root: str | os.PathLike[str] = ".",
    *,
    surface: str = "full",
    conversation_id: str | None = None,
    modes: Iterable[str] = (),
    options: Mapping[str, Any] | None = None,
    plugins: Iterable[Any] = (),
    block: Iterable[str] = (),
    load_entry_points: bool = True,
) -> dict[str, Any]:
    """`Run.tool_listing` of a run of these arguments, made without an event loop (what `tether tools` prints).

    The tools are registered as `open_run` registers them, but the run is not opened for work:
    `tether_run_opened` is not called and no interrupted write is recovered. What the registering left
    to close (a resource that is not `idle()`, a tracked process, or a plugin's `tether_run_closing`) is
    closed as `open_run` closes it, on an event loop made for that; a resource whose handle has an
    ``idle()`` that answers True has nothing to close, and is not. Raises OptionsError as `open_run` does.
    """
    run = Run(
        root,
        surface=surface,
        conversation_id=conversation_id,
        modes=modes,
        options=options,
        plugins=plugins,
        block=block,
        load_entry_points=load_entry_points,
    )
    try:
        run._register()
        return run.tool_listing()
    finally:
        busy = [c for c in run._closers if not _idle(c)]
        if busy or run._keeper is not None or run.hook.tether_run_closing.get_hookimpls():
            import asyncio

            asyncio.run(run.aclose())
        run._closed = True


def _idle(closer: Callable[[], Any]) -> bool:
    """Whether the resource a closer closes says it holds nothing (its optional ``idle()``)."""
    idle = getattr(getattr(closer, "__self__", None), "idle", None)
    try:
        return callable(idle) and idle() is True
    except Exception:  # noqa: BLE001 - a resource that cannot say is closed
        return False


class SyncRun:
    """A run driven from synchronous code: its event loop lives in a thread of its own."""

    def __init__(self, run: Run, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        self.run = run
        self._loop = loop
        self._thread = thread

    def __getattr__(self, name: str) -> Any:
        return getattr(self.run, name)

    def _wait(self, coro: Awaitable[Any]) -> Any:
        import asyncio

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
def open_run_sync(
    root: str | os.PathLike[str] = ".",
    *,
    surface: str = "full",
    conversation_id: str | None = None,
    modes: Iterable[str] = (),
    options: Mapping[str, Any] | None = None,
    plugins: Iterable[Any] = (),
    block: Iterable[str] = (),
    load_entry_points: bool = True,
) -> Iterator[SyncRun]:
    """`open_run` for synchronous code: the run's event loop lives in a thread of its own."""
    import asyncio

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="tether-run", daemon=True)
    thread.start()

    async def make() -> Run:
        run = Run(
            root,
            surface=surface,
            conversation_id=conversation_id,
            modes=modes,
            options=options,
            plugins=plugins,
            block=block,
            load_entry_points=load_entry_points,
        )
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


def _hook_name(hook: Callable[..., Any]) -> str:
    """The name of a hook specification passed to `Run.resource` / `Run.definitions`; a name as a string is
    refused in one line, so one way to ask stays (the spec, which types the answer)."""
    if isinstance(hook, str):
        raise TypeError(
            f"pass the hook specification itself, not its name: run.resource(hookspecs.{hook}) "
            f"(import it from the family's hookspecs module)"
        )
    return hook.__name__
