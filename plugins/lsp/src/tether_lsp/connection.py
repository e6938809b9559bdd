"""One running language server for one (server, root): process, pygls client, documents, diagnostics.

pygls' LanguageClient does the JSON-RPC over the pipes of a process started here (`tether_lsp.client`);
this wraps its known traps: nobody reads the server's stderr (a chatty server stalls once the pipe
fills), a request has no timeout of its own, and a server that dies leaves its requests waiting (each
request here also waits for the process's exit). Every wait here has a bound. What the server sends on
its own (publishes, progress, settings asked for) is answered in `tether_lsp.messages`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether import tracing

from tether_lsp.messages import OWN_PROGRESS, client_capabilities, message_field, register_handlers
from tether_lsp.options import LspOptions
from tether_lsp.rounds import BUSY_SAMPLE, BUSY_SHARE, next_check, round_done
from tether_lsp.servers import ServerDef
from tether_lsp.watching import SCAN_CAP, Watcher, file_stat, read_text

if TYPE_CHECKING:
    from tether.run import Run

# tsserver's own answers for one open file's current text (the kinds tether shows: errors and warnings)
TSSERVER_PULLS = ("syntacticDiagnosticsSync", "semanticDiagnosticsSync")
ROUNDS_KEPT = 8  # round times kept per server, for the budget of a write (rounds.budget)


class ServerDied(Exception):
    """The server process exited (or was killed) while we needed it."""


class RequestTimeout(Exception):
    def __init__(self, method: str, timeout: float) -> None:
        super().__init__(f"{method} got no answer within {timeout:g} s")
        self.method = method
        self.timeout = timeout


class StartFailed(Exception):
    """The server could not be started or initialized."""


class ServerError(Exception):
    """The server answered a request with an error."""


@attrs.frozen
class Mark:
    """The server's state when we sent a change: what a later round must be newer than."""

    begins: int  # work-done progress begins seen so far
    seq: int  # publishes seen so far
    at: float
    uri: str | None = None  # the document opened or changed, if the mark is of one
    version: int = 0  # its version then


@attrs.define
class Doc:
    path: Path
    uri: str
    version: int
    text: str
    stat: tuple[int, int]
    language_id: str
    mark: Mark  # when the server was last told about this document (open or change)


@attrs.define
class Overlay:
    """A preview's unsaved content of one document (`Connection.overlay`): called, it puts the server back
    to the disk; `commit` keeps it when the disk now holds that content."""

    conn: Connection
    doc: Doc
    put_back: Callable[[], None]

    def __call__(self) -> None:
        self.put_back()

    def commit(self) -> bool:
        """The disk holds the overlaid text now (a write of the previewed change): the document stays as the
        server has it, known to match the disk (nothing is sent). False, and nothing done, otherwise."""
        conn, doc = self.conn, self.doc
        if conn.docs.get(doc.uri) is not doc or read_text(doc.path) != doc.text:
            return False
        conn.overlays.discard(doc.uri)
        doc.stat = file_stat(doc.path) or doc.stat
        return True


@attrs.define
class Published:
    version: int | None
    items: list[Any]
    at: float  # when it came (a pulled answer: when it was asked)
    seq: int


def tsserver_diagnostic(lsp: Any, d: Mapping[str, Any]) -> Any:
    """A tsserver diagnostic (1-based line and UTF-16 offset) as typescript-language-server publishes it."""

    def position(at: Mapping[str, Any]) -> Any:
        return lsp.Position(line=max(0, at["line"] - 1), character=max(0, at["offset"] - 1))

    severity = {"warning": lsp.DiagnosticSeverity.Warning, "suggestion": lsp.DiagnosticSeverity.Hint}
    return lsp.Diagnostic(
        range=lsp.Range(start=position(d["start"]), end=position(d["end"])),
        message=d.get("text", ""),
        severity=severity.get(d.get("category", ""), lsp.DiagnosticSeverity.Error),
        code=d.get("code"),
        source=d.get("source") or "typescript",
    )


class Connection:
    """A started server; create with `Connection.start`, end with `close`."""

    def __init__(self, server: ServerDef, binary: str, root: Path, run: Run) -> None:
        from lsprotocol import types as lsp

        self.lsp = lsp
        self.server = server
        self.binary = binary
        self.root = root
        self.run = run
        self.client: Any = None
        self.proc: Any = None
        self.encoding = "utf-16"
        self.capabilities: Any = None
        self.docs: dict[str, Doc] = {}  # by uri
        # documents a preview holds at unsaved contents (`overlay`): the disk is not synced into them meanwhile
        self.overlays: set[str] = set()
        self.published: dict[str, Published] = {}  # by uri
        self.stderr_tail: deque[str] = deque(maxlen=40)
        self.log_tail: deque[str] = deque(maxlen=20)
        self.progress_tokens: set[str] = set()
        self.progress_titles: dict[
            str, tuple[str, float]
        ] = {}  # token -> (title, when it began), in progress
        self.begins = 0  # work-done progress begins seen
        self.analysed = False  # the first analysis of the project has ended (see first_round)
        self.diagnosed = False  # a "document" server completed a round (its first diagnosis is over)
        self.last_event = 0.0  # monotonic time of the last publish or progress begin/end
        self.last_create = 0.0  # monotonic time of the server's last window/workDoneProgress/create
        self.last_busy = 0.0  # monotonic time the server's processes were last seen working (`busy`)
        # the definition's optional_args this binary was started with (`servers.supported_args`)
        self.optional_args: tuple[str, ...] = ()
        self._cpu: tuple[float, float] | None = None  # (monotonic, CPU seconds of the tree): the last sample
        self._tree: list[Any] = []  # the server's processes (psutil), found once
        self.last_mark: Mark | None = (
            None  # the latest change (or the start): "settled" is a round newer than it
        )
        self.start_mark = Mark(0, 0, 0.0)
        self.edits: Counter[str] = Counter()  # changes told to the server, by uri
        # dependents.importers: the importers found for a set of written files, and the edits of others then
        # (paths, cap) -> (dependents.Importers, edits)
        self.importers_found: dict[tuple[Any, ...], tuple[Any, int]] = {}
        self.quiescent = server.ready != "quiescent"
        # the round rule in use: the definition's, until a "progress" server publishes outside every round it
        # names (ServerDef.round_titles: gopls started without its verboseWorkDoneProgress); then "document"
        self.rounds = server.rounds
        self.round_seen = False  # a progress begin with one of the definition's round_titles came
        self.versioned = server.versioned_diagnostics
        self.started_at = 0.0
        self.round_times: deque[float] = deque(maxlen=ROUNDS_KEPT)  # s from a change to its round's end
        self.timed: Mark | None = None  # the change whose round was measured last
        self.first_end: float | None = None  # "progress" servers: when the first round ended
        self.first_open: float | None = None  # when the first document was opened
        self.restarts = 0
        self.uri_cache: dict[str, Any] = {}  # uri -> (path, path as shown): see render.Lines
        self.watcher = Watcher(self)
        # the server checks only open documents (ServerDef.open_files_settings), decided at start from the
        # size of its tree; a write then opens the written files' importers (`importers`, from `index`)
        self.open_files = False
        self.index: Any = None  # tether_lsp.imports.ImportIndex, built at the first write in open-files mode
        self.kept_open: dict[
            Path, None
        ] = {}  # importers opened for writes, oldest first (dependents.KEEP_OPEN)
        self._ids = itertools.count(1)
        self._seq = 0
        self._changed = asyncio.Event()
        # tsserver checks one file at a time: a file's diagnostics are asked one file after another, so each
        # request's bound counts from when it is sent, not from behind the others (`_ask_tsserver`)
        self._tsserver_turn = asyncio.Lock()
        self.tasks: list[asyncio.Task[Any]] = []
        self.closing = False
        self._exited: asyncio.Task[Any] | None = None  # the process's wait(), from start
        # while lsp_fix runs a command of this server: what answers its workspace/applyEdit (tether_lsp.fix)
        self.apply_edit: Callable[[Any], Awaitable[Any]] | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and not self.closing

    @property
    def publishes_program(self) -> bool:
        """The server publishes every file of its program (ServerDef.publishes_program), not only open ones."""
        return self.server.publishes_program and not self.open_files

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def busy(self) -> float:
        """When the server was last seen working: its last publish or progress event or, for a server whose
        CPU use counts as work (ServerDef.cpu_is_work), the last sample that found its processes using at least
        BUSY_SHARE of a core since the one before (sampled here, at most every BUSY_SAMPLE s: a wait that
        relies on this wakes that often, see `rounds.next_check`)."""
        if not self.server.cpu_is_work or self.pid is None:
            return self.last_event
        now = time.monotonic()
        if self._cpu is None or now - self._cpu[0] >= BUSY_SAMPLE:
            used = self._cpu_seconds()
            if used is not None:
                if self._cpu is not None and used - self._cpu[1] >= BUSY_SHARE * (now - self._cpu[0]):
                    self.last_busy = now
                self._cpu = (now, used)
        return max(self.last_event, self.last_busy)

    def _cpu_seconds(self) -> float | None:
        """The user and system CPU seconds of the server's process and its children (a wrapper starts
        basedpyright's Node); None when they cannot be read."""
        import psutil

        for _ in range(2):
            try:
                if not self._tree:
                    top = psutil.Process(self.pid)
                    self._tree = [top, *top.children(recursive=True)]
                return sum(sum(p.cpu_times()[:2]) for p in self._tree)
            except psutil.Error:
                self._tree = []  # a process of the tree is gone (a restart): found again once
        return None

    @property
    def indexing(self) -> bool:
        """The server is still analysing the project: work in progress, or its first round not yet done."""
        if self.progress_tokens or not self.quiescent:
            return True
        if self.server.ready_after_publish and self.docs and not self.published:
            return True  # its indexing has not begun yet (clangd: once the first document's command is read)
        grace = self.server.load_begins_within
        opened = self.first_open
        if grace is not None and opened is not None and self.first_end is None:
            # the project's load (tsserver: from the first open document) has not ended
            return bool(self.begins) or time.monotonic() - opened < grace
        return self.rounds == "progress" and self.begins == 0 and not round_done(self, self.start_mark)

    async def first_round(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) for the end of the server's first analysis of the project; False
        when it has not ended. Later rounds are not waited for: their answers say they may be incomplete."""
        deadline = time.monotonic() + timeout
        while not self.analysed:
            if not self.indexing:
                self.analysed = True
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            # the first round may end by quiet alone (a small project is checked with no progress at
            # all): wake when it could, not only at the next event (else the whole wait, 30 s)
            await self.next_event(min(remaining, next_check(self, self.start_mark)))
        return True

    async def start(self, timeout: float) -> None:
        from tether_lsp.client import Client

        lsp = self.lsp
        self.client = Client(self.log_tail.append)
        register_handlers(self)
        env = dict(os.environ)
        if not self.run.trusted:
            env.update(self.server.untrusted_env)
        self.started_at = time.monotonic()
        self.start_mark = self.last_mark = self.mark()
        pipe = asyncio.subprocess.PIPE
        from tether_lsp.servers import supported_args

        optional = self.optional_args = await supported_args(self.run, self.server, self.binary)
        try:  # its own session: its whole tree is killed at close
            self.proc = await asyncio.create_subprocess_exec(
                self.binary,
                *self.server.command[1:],
                *optional,
                cwd=str(self.root),
                env=env,
                stdin=pipe,
                stdout=pipe,
                stderr=pipe,
                start_new_session=True,
            )
        except OSError as exc:
            raise StartFailed(f"cannot start {self.binary}: {exc.strerror or exc}") from None
        self.run.track_process(self.proc.pid)
        self.client.connect(self.proc)
        self._exited = asyncio.create_task(self.proc.wait())
        self.tasks += [self._exited, asyncio.create_task(self._drain_stderr())]
        self.watcher.files = await asyncio.to_thread(self.watcher.scan)  # a big tree must not stall the loop
        above = self.run.options.of(LspOptions).lsp_open_files_above
        self.open_files = self.server.open_files_settings is not None and (
            len(self.watcher.files) > above or (self.watcher.truncated and above < SCAN_CAP)
        )
        caps = client_capabilities(lsp)
        folder = lsp.WorkspaceFolder(uri=self.root.as_uri(), name=self.root.name or "root")
        params = lsp.InitializeParams(
            process_id=os.getpid(),
            root_uri=self.root.as_uri(),
            root_path=str(self.root),
            capabilities=caps,
            workspace_folders=[folder],
            initialization_options=dict(self.server.initialization_options)
            if self.server.initialization_options
            else None,
            client_info=lsp.ClientInfo(name="tether", version="0.1.0"),
        )
        try:
            result = await self.request("initialize", params, timeout)
        except RequestTimeout:
            why = "; ".join(list(self.log_tail)[-2:] + list(self.stderr_tail)[-3:])
            raise StartFailed(
                f"{self.server.id} did not answer initialize within {timeout:g} s"
                + (f" ({why})" if why else "")
            ) from None
        except ServerDied:
            # the drain ends at EOF: let it catch the last words before they are quoted
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self.tasks[0]), 1.0)
            why = " | ".join(list(self.stderr_tail)[-5:]) or "no output on stderr"
            raise StartFailed(
                f"{self.server.id} exited during startup (exit code {self.proc.returncode}): {why}"
            ) from None
        self.capabilities = result.capabilities
        enc = getattr(self.capabilities, "position_encoding", None)
        self.encoding = str(getattr(enc, "value", enc) or "utf-16")
        self.client.protocol.notify("initialized", lsp.InitializedParams())
        # no workspace/didChangeConfiguration: settings are answered when the server asks
        # (workspace/configuration), and pyright-based servers re-analyse everything on that notification

    async def _drain_stderr(self) -> None:
        # read chunks, not lines: readline() gives up on a line longer than 64 KB, and a drain that
        # stops lets the pipe fill until the server blocks writing to it
        stream = self.proc.stderr
        partial = b""
        try:
            while True:
                chunk = await stream.read(65536)
                if not chunk:
                    if partial.strip():
                        self.stderr_tail.append(partial.decode(errors="replace").rstrip()[:300])
                    return
                *lines, partial = (partial + chunk).split(b"\n")
                partial = partial[-300:]
                for line in lines[-40:]:
                    self.stderr_tail.append(line.decode(errors="replace").rstrip()[:300])
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - a closed pipe ends the drain
            return

    def wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def close(self, grace: float) -> None:
        """shutdown + exit, then kill the tree after ``grace``; never raises, never hangs."""
        if self.proc is None:
            return
        if self.proc.returncode is None:
            with contextlib.suppress(Exception):  # a server that will not shut down is killed below
                await self.request("shutdown", None, grace)
                self.client.protocol.notify("exit", None)
        self.closing = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.proc.wait(), grace)
        await self.run.stop_process(self.proc, 0.5)
        if self.client is not None:
            await self.client.disconnect(grace)
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    # -- requests -------------------------------------------------------------------------------

    async def request(self, method: str, params: Any, timeout: float) -> Any:
        # a child span of the traced tool call that asks it (see tether.tracing)
        with tracing.span(
            f"lsp {method}", {"rpc.system": "jsonrpc", "rpc.method": method, "tether.server": self.server.id}
        ):
            return await self._request(method, params, timeout)

    async def _request(self, method: str, params: Any, timeout: float) -> Any:
        if self.proc is None or self.proc.returncode is not None:
            raise ServerDied(f"{self.server.id} is not running")
        protocol = self.client.protocol
        msg_id = f"tether-{next(self._ids)}"  # string ids: pygls may structure an int id back as a str and lose the answer
        exited = self._exited
        if exited is None:
            raise ServerDied(f"{self.server.id} is not running")
        future = protocol.send_request_async(method, params, msg_id=msg_id)
        # an answer that comes after the timeout completes the future unawaited: take its error, if any
        future.add_done_callback(lambda f: f.cancelled() or f.exception())
        # never cancelled: pygls would fail to complete it when the answer comes
        done, _ = await asyncio.wait((future, exited), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if future in done:
            try:
                return future.result()
            except Exception as exc:  # noqa: BLE001 - an error answer (JsonRpcException and kin)
                raise ServerError(str(exc) or type(exc).__name__) from None
        if exited in done:
            raise ServerDied(f"{self.server.id} exited (code {self.proc.returncode})")
        if self.server.cancel_requests:
            protocol.notify("$/cancelRequest", self.lsp.CancelParams(id=msg_id))
        raise RequestTimeout(method, timeout)

    def own_token(self) -> str:
        """A work-done token for one request: a server reports that request's progress on it (basedpyright's
        references search: a begin and an end per call), where it would otherwise create a token that reads
        as a round of analysis."""
        return f"{OWN_PROGRESS}{next(self._ids)}"

    def notify(self, method: str, params: Any) -> None:
        if self.alive:
            self.client.protocol.notify(method, params)

    # -- documents ------------------------------------------------------------------------------

    def open(self, path: Path) -> Doc | None:
        """Open ``path`` (once) and return its document; None when it is not a readable text file."""
        uri = path.as_uri()
        doc = self.docs.get(uri)
        if doc is not None:
            self.sync_doc(doc)
            return self.docs.get(uri)
        stat = file_stat(path)
        if stat is None:
            return None
        text = read_text(path)
        if text is None:
            return None
        doc = Doc(path, uri, 1, text, stat, self.server.language_id(path), self.mark(uri, 1))
        if self.first_open is None:
            self.first_open = time.monotonic()
        self.last_mark = doc.mark
        self.docs[uri] = doc
        self.watcher.files[path] = stat
        self.notify(
            "textDocument/didOpen",
            self.lsp.DidOpenTextDocumentParams(
                text_document=self.lsp.TextDocumentItem(
                    uri=uri, language_id=doc.language_id, version=1, text=text
                )
            ),
        )
        return doc

    def set_text(self, doc: Doc, text: str, save: bool | None = None) -> None:
        """Send the whole new content as the next version (and didSave where the definition asks for it)."""
        lsp = self.lsp
        doc.version += 1
        doc.text = text
        doc.mark = self.last_mark = self.mark(doc.uri, doc.version)
        self.edits[doc.uri] += 1
        doc.stat = file_stat(doc.path) or doc.stat
        self.watcher.files[doc.path] = doc.stat
        self.notify(
            "textDocument/didChange",
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=doc.uri, version=doc.version),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
            ),
        )
        if self.server.did_save if save is None else save:
            self.notify(
                "textDocument/didSave",
                lsp.DidSaveTextDocumentParams(
                    text_document=lsp.TextDocumentIdentifier(uri=doc.uri), text=text
                ),
            )

    def close_doc(self, doc: Doc) -> None:
        """didClose; a document whose file was on disk and is gone is said deleted first (`Watcher.gone`).
        A preview's document of a file never on disk (its stat (0, 0)) is only closed, as before."""
        if doc.stat != (0, 0) and file_stat(doc.path) is None:
            self.watcher.gone(doc.path)
        self.docs.pop(doc.uri, None)
        if self.open_files:
            self.published.pop(doc.uri, None)  # not checked any more
        self.notify(
            "textDocument/didClose",
            self.lsp.DidCloseTextDocumentParams(text_document=self.lsp.TextDocumentIdentifier(uri=doc.uri)),
        )

    def reopen(self, doc: Doc) -> Doc | None:
        """Close the document and open it again, so the server rebuilds it from scratch (clangd rebuilds
        an unchanged open file only when a header of its preamble changed)."""
        self.close_doc(doc)
        self.published.pop(doc.uri, None)  # of the old build
        return self.open(doc.path)

    def sync_doc(self, doc: Doc) -> bool:
        """Re-read an open document whose file changed on disk; True when the server was told. A document
        a preview holds (`overlay`) is left as it is: its restore syncs it."""
        if doc.uri in self.overlays:
            return False
        stat = file_stat(doc.path)
        if stat == doc.stat:
            return False
        if stat is None:
            self.close_doc(doc)
            return True
        text = read_text(doc.path)
        if text is None:
            return False
        doc.stat = stat
        if text == doc.text:
            return False
        self.set_text(doc, text)
        return True

    def overlay(self, path: Path, text: str) -> Overlay:
        """Give the server ``text`` as the unsaved content of ``path`` (didChange of the open document, or
        didOpen of a file not open, which need not exist on disk), held until the `Overlay` returned is
        called (it puts the server back to the disk: didChange to the file's text, or didClose of a document
        opened here; the next round waited for is the one after that) or committed (the disk now holds
        ``text``: nothing is sent, the server's state is the disk's)."""
        uri = path.as_uri()
        doc = self.docs.get(uri)
        if doc is not None:
            self.overlays.add(uri)
            if doc.text != text:
                self.set_text(doc, text, save=False)

            def put_back() -> None:
                self.overlays.discard(uri)
                if self.docs.get(uri) is not doc:
                    return
                disk = read_text(path)
                if disk is None:
                    self.close_doc(doc)
                    self.last_mark = self.mark()
                elif disk != doc.text:
                    self.set_text(doc, disk)
                else:
                    doc.stat = file_stat(path) or doc.stat

            return Overlay(self, doc, put_back)
        doc = Doc(
            path, uri, 1, text, file_stat(path) or (0, 0), self.server.language_id(path), self.mark(uri, 1)
        )
        kept = self.published.get(
            uri
        )  # of the disk's content, published before (a server of the whole program)
        if self.first_open is None:
            self.first_open = time.monotonic()
        self.last_mark = doc.mark
        self.docs[uri] = doc
        self.overlays.add(uri)
        self.edits[uri] += 1
        self.notify(
            "textDocument/didOpen",
            self.lsp.DidOpenTextDocumentParams(
                text_document=self.lsp.TextDocumentItem(
                    uri=uri, language_id=doc.language_id, version=1, text=text
                )
            ),
        )

        def close() -> None:
            self.overlays.discard(uri)
            if self.docs.get(uri) is doc:
                self.close_doc(doc)
                # the unsaved content's list is not the file's: the disk's (until the server publishes it anew)
                if kept is not None and not self.open_files:
                    self.published[uri] = kept
                else:
                    self.published.pop(uri, None)
                self.last_mark = self.mark()

        return Overlay(self, doc, close)

    # -- diagnostics ----------------------------------------------------------------------------

    @property
    def pulls(self) -> bool:
        """Diagnostics are asked for (per file, for its current text), not waited for."""
        return (
            self.server.rounds == "tsserver"
            or getattr(self.capabilities, "diagnostic_provider", None) is not None
        )

    def mark(self, uri: str | None = None, version: int = 0) -> Mark:
        return Mark(self.begins, self._seq, time.monotonic(), uri, version)

    async def next_event(self, wait: float) -> None:
        if not self.alive:
            raise ServerDied(f"{self.server.id} exited (code {self.proc.returncode})")
        event = self._changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), max(0.0, wait))

    async def pull(self, doc: Doc, timeout: float, deadline: float | None = None) -> list[Any] | None:
        """The document's diagnostics asked of the server; None when it did not answer within ``timeout``
        s of being asked (a "tsserver" server's turn is waited for until ``deadline``, see `_ask_tsserver`)."""
        lsp = self.lsp
        asked = time.monotonic()
        try:
            if self.server.rounds == "tsserver":
                items = await self._ask_tsserver(doc.path, timeout, deadline)
            else:
                params = lsp.DocumentDiagnosticParams(text_document=lsp.TextDocumentIdentifier(uri=doc.uri))
                report = await self.request("textDocument/diagnostic", params, timeout)
                items = getattr(report, "items", None)
        except RequestTimeout:
            return None
        if items is None:  # "unchanged": the last full report still holds
            prev = self.published.get(doc.uri)
            items = prev.items if prev else []
        self.keep(doc.uri, doc.version, items, asked)
        return items

    def keep(self, uri: str, version: int | None, items: list[Any], asked: float) -> None:
        """A pulled answer, kept as the file's publish with the time it was asked (one answered again from the
        kept one stays as it is)."""
        pub = self.published.get(uri)
        if pub is None or pub.items is not items:
            self._seq += 1
            self.published[uri] = Published(version, items, asked, self._seq)

    async def tsserver(self, command: str, args: Mapping[str, Any], timeout: float) -> Any:
        """The body of tsserver's answer to ``command``, asked through typescript-language-server."""
        params = self.lsp.ExecuteCommandParams(
            command="typescript.tsserverRequest", arguments=[command, dict(args)]
        )
        return message_field(await self.request("workspace/executeCommand", params, timeout), "body")

    async def _ask_tsserver(self, path: Path, timeout: float, deadline: float | None = None) -> list[Any]:
        """tsserver's errors and warnings of a file of its projects, as the server would publish them; asked
        again only after a change (a write's "before" is then the last write's "after").

        tsserver answers one request at a time, so files are asked one after another (a file's two requests
        together): asked all at once, the twentieth importer's bound ran out behind the others' on a loaded
        machine. The turn is waited for until ``deadline`` (default: ``timeout`` from now); each request
        then has ``timeout`` s, within the deadline. RequestTimeout when either runs out."""
        pub = self.published.get(path.as_uri())
        if pub is not None and self.last_mark is not None and pub.at > self.last_mark.at:
            return pub.items  # asked after the latest change
        if deadline is None:
            deadline = time.monotonic() + timeout
        try:
            async with asyncio.timeout_at(asyncio.get_running_loop().time() + deadline - time.monotonic()):
                await self._tsserver_turn.acquire()
        except TimeoutError:
            raise RequestTimeout(TSSERVER_PULLS[-1], timeout) from None
        try:
            pub = self.published.get(path.as_uri())
            if pub is not None and self.last_mark is not None and pub.at > self.last_mark.at:
                return pub.items  # asked meanwhile, after the latest change
            left = max(0.0, min(timeout, deadline - time.monotonic()))
            found = await asyncio.gather(
                *(self.tsserver(command, {"file": str(path)}, left) for command in TSSERVER_PULLS)
            )
        finally:
            self._tsserver_turn.release()
        return [tsserver_diagnostic(self.lsp, d) for kind in found for d in kind or []]

    async def pull_path(self, path: Path, timeout: float, deadline: float | None = None) -> list[Any] | None:
        """A "tsserver" server's diagnostics of a file that need not be open (kept with the published ones);
        None when not answered in time (see `_ask_tsserver`)."""
        asked = time.monotonic()
        try:
            items = await self._ask_tsserver(path, timeout, deadline)
        except (RequestTimeout, ServerError):
            return None
        self.keep(path.as_uri(), None, items, asked)
        return items
