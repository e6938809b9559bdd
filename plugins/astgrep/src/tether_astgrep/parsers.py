"""The run's resource: grammars, compiled patterns, a result cache, worker processes (staged edits are the core's: `tether.staging`).

Creating it is cheap (nothing is loaded, no process starts, and the pattern and grammar modules are
imported at the first search). The first search that needs more than
a few files starts the worker pool (one process per core, forked so the grammars need not load
again); the run's close shuts it down, and the run kills whatever is left of it.
"""

from __future__ import annotations

import collections
import functools
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from tether_astgrep.options import AstgrepOptions

if TYPE_CHECKING:  # imported where first used: the run's start (tool registration) needs none of them
    from concurrent.futures import ProcessPoolExecutor

    import psutil
    from tether.run import Run

    from tether_astgrep import engine
    from tether_astgrep.files import FileEntry
    from tether_astgrep.grammars import Grammar, Registry
    from tether_astgrep.pattern import Pattern
    from tether_astgrep.rules import Rule

log = logging.getLogger("tether.astgrep")

SMALL_JOB_BYTES = 1_500_000  # below this, the run's own process beats forking workers (the bench's rxjs row)
CACHE_MATCHES = 200_000  # result cache bound: matches kept (+1 per file) across patterns
CACHE_PATTERNS = 64
SHUTDOWN_TIMEOUT = 5.0

Progress = Callable[[float, float, str], Awaitable[None]]


def loader_key(grammar: Grammar) -> str:
    """A stable name for a grammar's loader: the engine caches languages by it, in every process."""
    fn = grammar.language
    args = ""
    if isinstance(fn, functools.partial):
        args = repr(fn.args) + repr(fn.keywords)
        fn = fn.func
    return f"{grammar.id}@{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}{args}"


class ResultCache:
    """Per (pattern, file) results, valid while the file's stamp (size, mtime, ctime, inode) stays the same.

    The ctime is in it because the mtime can be set back (`touch -r`, `cp -p`, `rsync -t`, a checkout of a
    same-size blob): a same-size rewrite that restores it moves the ctime. A result is kept only if the
    file's stamp was older than one tick of its clock when the read began (the walk's racy-window rule,
    `tether.walk.settled`): a file changed again within that tick, after it was read, may keep its stamp.
    """

    def __init__(self, max_matches: int = CACHE_MATCHES, max_patterns: int = CACHE_PATTERNS) -> None:
        self.max_matches = max_matches
        self.max_patterns = max_patterns
        self._data: collections.OrderedDict[Any, dict[str, tuple[tuple, engine.FileResult]]] = (
            collections.OrderedDict()
        )
        self._weight: dict[Any, int] = {}

    def get(self, key: Any, f: FileEntry) -> engine.FileResult | None:
        files = self._data.get(key)
        if files is None:
            return None
        hit = files.get(f.path)
        if hit is None or hit[0] != f.stamp:
            return None
        return hit[1]

    def drop(self, key: Any, path: str) -> None:
        """Forget the result for ``path``: its file was found to hold other bytes than were searched (the
        read-back of its matches, `grep._materialize`), a change its stamp did not show."""
        files = self._data.get(key)
        old = files.pop(path, None) if files is not None else None
        if old is not None:
            self._weight[key] -= 1 + len(old[1].matches)

    def put(self, key: Any, results: Sequence[tuple[FileEntry, engine.FileResult]], began: int) -> None:
        """Keep the results read from the files (stamped as given) after ``began`` (`time.time_ns()`)."""
        from tether.walk import settled

        files = self._data.setdefault(key, {})
        self._data.move_to_end(key)
        weight = self._weight.get(key, 0)
        for f, r in results:
            old = files.pop(f.path, None)
            if old is not None:
                weight -= 1 + len(old[1].matches)
            if settled((f.mtime_ns, f.ctime_ns), began):
                files[f.path] = (f.stamp, r)
                weight += 1 + len(r.matches)
        self._weight[key] = weight
        while self._data and (
            len(self._data) > self.max_patterns or sum(self._weight.values()) > self.max_matches
        ):
            old_key, _ = self._data.popitem(last=False)
            self._weight.pop(old_key, None)


class ParserPool:
    """The astgrep resource of one run."""

    def __init__(self, run: Run, workers: int | None = None) -> None:
        self.run = run
        self.options = run.options.of(AstgrepOptions)
        self.workers = workers or self.options.astgrep_workers or _cores()
        self.cache = ResultCache()
        self._registry: Registry | None = None
        self._extra: dict[str, Grammar | None] = {}
        self._patterns: dict[tuple[str, str], Pattern] = {}
        self._rules: dict[tuple[str, str], Rule] = {}  # apart: a pattern's text may look like a rule's
        self._pool: ProcessPoolExecutor | None = None
        # the pool's processes, tracked by the run: handles, not pids, for a dead worker's pid may be
        # reaped (by `multiprocessing.active_children`) and reused by an unrelated process
        self.worker_procs: list[psutil.Process] = []
        self._picklable: dict[str, bool] = {}

    # -- grammars and patterns -----------------------------------------------------------------

    def registry(self) -> Registry:
        if self._registry is None:
            from tether_astgrep.grammars import Grammar, Registry
            from tether_astgrep.hookspecs import tether_astgrep_grammars

            # the core's one rule (`Run.definitions`): a third party's grammar with a built-in id replaces it
            self._registry = Registry.build(self.run.definitions(tether_astgrep_grammars, Grammar).values())
        return self._registry

    def extra_grammar(self, name: str) -> Grammar | None:
        """A language-pack grammar without a ladder, asked for by id (cached for the run)."""
        if name not in self._extra:
            from tether_astgrep.grammars import pack_grammar

            self._extra[name] = pack_grammar(name) if name else None
        return self._extra[name]

    def pattern(self, source: str, grammar: Grammar) -> Pattern:
        """Compile (and remember) a pattern; raises `PatternError`."""
        key = loader_key(grammar)
        cached = self._patterns.get((key, source))
        if cached is None:
            from tether_astgrep import engine
            from tether_astgrep.pattern import compile_pattern

            lang = engine.language(key, grammar.language)
            cached = compile_pattern(source, grammar, lang, engine.parser(key, grammar.language), key)
            if len(self._patterns) > 256:
                self._patterns.clear()
            self._patterns[(key, source)] = cached
        return cached

    def rule(self, value: Any, grammar: Grammar) -> Rule:
        """Compile an ast-grep rule object (`tether_astgrep.rules`); raises `PatternError`."""
        import json

        from tether_astgrep import engine
        from tether_astgrep.rules import compile_rule

        key = loader_key(grammar)
        lang = engine.language(key, grammar.language)
        try:
            text = json.dumps(value, sort_keys=True)
        except (TypeError, ValueError):
            text = None
        cached = self._rules.get((key, text)) if text else None
        if cached is None:
            cached = compile_rule(value, grammar.id, key, lang, lambda source: self.pattern(source, grammar))
            if text:
                if len(self._rules) > 256:
                    self._rules.clear()
                self._rules[(key, text)] = cached
        return cached

    # -- searching -------------------------------------------------------------------------------

    async def search(
        self,
        pattern: Pattern | Rule,
        grammar: Grammar,
        files: Sequence[FileEntry],
        progress: Progress | None = None,
    ) -> list[engine.FileResult]:
        """Results for every file, in the order given; cached results are reused."""
        key = pattern.key
        results: dict[str, engine.FileResult] = {}
        todo: list[FileEntry] = []
        for f in files:
            hit = self.cache.get(key, f)
            if hit is not None:
                results[f.path] = hit
            else:
                todo.append(f)
        if todo:
            began = time.time_ns()  # before any file is read
            fresh = await self._search_files(pattern, grammar, todo, progress)
            by_path = {f.path: f for f in todo}
            self.cache.put(key, [(by_path[r.path], r) for r in fresh], began)
            for r in fresh:
                results[r.path] = r
        return [results[f.path] for f in files if f.path in results]

    def _can_fork_out(self, grammar: Grammar) -> bool:
        key = loader_key(grammar)
        if key not in self._picklable:
            import pickle

            try:
                pickle.dumps(grammar.language)
                self._picklable[key] = True
            except Exception:  # noqa: BLE001 - a lambda or a bound method: search in this process
                self._picklable[key] = False
        return self._picklable[key]

    async def _search_files(
        self, pattern: Pattern | Rule, grammar: Grammar, todo: list[FileEntry], progress: Progress | None
    ) -> list[engine.FileResult]:
        import asyncio

        from tether_astgrep import engine

        loader = grammar.language
        total = sum(f.size for f in todo)
        if self.workers <= 1 or total < SMALL_JOB_BYTES or not self._can_fork_out(grammar):
            paths = [f.path for f in todo]
            return await asyncio.to_thread(engine.search_chunk, paths, pattern, loader)
        from concurrent.futures.process import BrokenProcessPool

        from tether.tools import ToolError

        loop = asyncio.get_running_loop()
        chunks = _chunks(todo, total, self.workers)
        try:
            submitted = self._submit(chunks, pattern, loader)
        except BrokenProcessPool:  # a worker died since the last search (killed, out of memory): fresh ones
            await self._drop_pool()
            submitted = self._submit(chunks, pattern, loader)
        futures = [asyncio.wrap_future(f, loop=loop) for f in submitted]
        out: list[engine.FileResult] = []
        timeout = self.options.astgrep_timeout

        async def collect() -> None:
            import asyncio

            done = 0
            for fut in asyncio.as_completed(futures):
                part = await fut
                out.extend(part)
                done += len(part)
                if progress is not None:
                    await progress(done, len(todo), "files searched")

        try:
            await asyncio.wait_for(collect(), timeout)
        except (TimeoutError, BrokenProcessPool) as exc:
            await self._drop_pool()  # a hung or dead worker: the next search starts fresh ones
            why = (
                f"took longer than {timeout:g} s"
                if isinstance(exc, asyncio.TimeoutError)
                else "lost a worker process"
            )
            raise ToolError(
                f"the search {why} over {len(todo):,} files; nothing is cached from it. Search a narrower path "
                "(or raise the run option astgrep_timeout)",
                code="search_failed",
            ) from None
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        return out

    async def _drop_pool(self) -> None:
        import asyncio

        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs, self.worker_procs = self.worker_procs, []
        for proc in procs:  # tracked at their start (`_submit`): the run stops each with its tree
            if proc.is_running():  # the same process still: a dead worker's pid may be another's by now
                await self.run.stop_process(proc, 1.0)
        _note_ended(pool)
        try:
            await asyncio.wait_for(
                asyncio.to_thread(pool.shutdown, True, cancel_futures=True), SHUTDOWN_TIMEOUT
            )
        except Exception:
            log.debug("shutting down a dropped worker pool failed", exc_info=True)

    def _submit(self, chunks: list[list[str]], pattern: Pattern | Rule, loader: Callable[[], Any]) -> list:
        """Hand the chunks to the worker pool, starting it on first use.

        The pool's processes start inside ``submit`` (all at once when forked); whatever
        `multiprocessing.active_children` lists after the submits that it did not list before is the
        pool's (nothing else here starts processes through multiprocessing), and the run tracks it, so
        the workers are stopped at close, or when this process dies, whatever the pool's shutdown does.
        """
        import multiprocessing

        from tether.procs import process

        from tether_astgrep import engine

        before = {p.pid for p in multiprocessing.active_children()}
        if self._pool is None:
            from concurrent.futures import ProcessPoolExecutor

            # fork: the workers start in milliseconds with the grammars already loaded; they only
            # run engine code (no threads, no event loop), which is what makes forking safe here
            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context(method)
            )
        futures = [self._pool.submit(engine.search_chunk, c, pattern, loader) for c in chunks]
        known = {p.pid for p in self.worker_procs if p.is_running()}  # is_running: same pid, same process
        for child in multiprocessing.active_children():
            if child.pid is None or child.pid in before or child.pid in known:
                continue
            handle = process(child.pid)  # an unreaped child of ours: the pid is still its own
            if handle is not None:
                self.worker_procs.append(handle)
                self.run.track_process(child.pid)
        return futures

    # -- closing -----------------------------------------------------------------------------------

    def idle(self) -> bool:
        """Nothing to close: no worker started (see `tether.run.list_tools`)."""
        return self._pool is None

    async def aclose(self) -> None:
        import asyncio

        pool = self._pool
        if pool is not None:
            _note_ended(pool)
            try:
                await asyncio.wait_for(
                    asyncio.to_thread(pool.shutdown, True, cancel_futures=True), SHUTDOWN_TIMEOUT
                )
                self._pool = None
            except Exception:  # stuck: stop the workers, so that the shutdown under way can end
                log.debug("worker pool shutdown failed", exc_info=True)
                await self._drop_pool()


def _note_ended(pool: ProcessPoolExecutor) -> None:
    """Tell the pool's multiprocessing handles which workers have ended (before its shutdown).

    A worker that other code of this process reaped (a waitpid of its own, a SIGCHLD handler, a test)
    stays alive for multiprocessing forever: its waitpid finds no such child and reads that as "not
    started yet". The executor's manager thread then loops at 100% CPU trying to queue a stop sentinel
    for it whenever the call queue is full (a search's chunks were waiting), and the interpreter's exit,
    or the event loop's close, waits for that thread forever (CPython 3.11's
    concurrent.futures.process shutdown_workers). multiprocessing offers no public way to say a child is
    gone, hence its private handles here.
    """
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        popen = getattr(proc, "_popen", None)
        if popen is None or popen.returncode is not None:
            continue
        try:
            pid, status = os.waitpid(proc.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: its exit status is lost
            popen.returncode = -signal.SIGKILL
            continue
        if pid == proc.pid:
            popen.returncode = os.waitstatus_to_exitcode(status)


def _cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)  # Linux: the cores this process may use
    return len(affinity(0)) if affinity else (os.cpu_count() or 1)


def _chunks(todo: list[FileEntry], total: int, workers: int) -> list[list[str]]:
    """Largest files first, in chunks small enough to keep every worker busy to the end."""
    target = max(64_000, total // (workers * 8))
    chunks: list[list[str]] = []
    current: list[str] = []
    size = 0
    for f in sorted(todo, key=lambda f: -f.size):
        current.append(f.path)
        size += f.size
        if size >= target:
            chunks.append(current)
            current, size = [], 0
    if current:
        chunks.append(current)
    return chunks
