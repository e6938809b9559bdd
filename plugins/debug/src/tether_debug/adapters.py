"""Debug adapter definitions, and whether one can start here: a root marker AND its binary.

The same intersection as the lsp family: a Python adapter is not offered in a Go project, and a
project marker is not enough without the binary. Third parties add or replace definitions through
the ``tether_debug_adapters`` hook (a definition with a built-in id replaces the built-in one).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
from tether import binaries
from tether.markers import ROOT_MARKERS

if TYPE_CHECKING:
    from tether.run import Run

log = logging.getLogger("tether.debug")


@attrs.frozen
class Located:
    """How to start an adapter found usable here (what an `AdapterDef`'s ``locate`` returns).

    Attributes:
        argv: the adapter's command line.
        python: debugpy: the interpreter the debuggee runs under.
    """

    argv: tuple[str, ...]
    python: str | None = None


@attrs.frozen
class LaunchRequest:
    """What the model asked `launch` for, as an adapter definition's ``launch_config`` receives it.

    Attributes:
        program: the program to run (absolute); None for a module launch.
        args: its command-line arguments.
        root: the run's root.
        located: how the adapter was found usable here (its argv, and for debugpy the interpreter).
        cwd: the program's working directory: the run's root unless the model named another
            directory under it.
        env: variables added to the adapter's environment.
        module: debugpy: run this module (``python -m``) instead of a program.
        test: delve: the package's tests (built with ``go test -c``).
        stop_on_entry: stop at the program's first line.
    """

    program: Path | None
    args: list[str]
    root: Path
    located: Located
    cwd: Path
    env: dict[str, str] = attrs.field(factory=dict)
    module: str | None = None
    test: bool = False
    stop_on_entry: bool = False


@attrs.frozen
class Build:
    """A command that builds the program before the adapter starts, and the executable it writes.

    Attributes:
        argv: the command, run in ``cwd`` (inside the run's envelope when there is one).
        output: the executable it writes; the adapter is then given a request for it.
        env: variables added to its environment (the launch's env: the adapter's own build had them).
        untrusted_env: set in a run that does not trust its root, over ``env`` (nothing fetched).
        no_output: what to say when it succeeds but writes no executable (a library package).
        cwd: where it runs (None: the root); for Go the program's module. Paths in its output
            are said relative to the root.
        run_in: where the program runs when the launch names no ``cwd`` (None: the root); a Go
            test binary runs in its package directory, as under ``go test``.
    """

    argv: tuple[str, ...]
    output: Path
    env: dict[str, str] = attrs.field(factory=dict)
    untrusted_env: dict[str, str] = attrs.field(factory=dict)
    no_output: str = "the build wrote no executable"
    run_in: Path | None = None
    cwd: Path | None = None


@attrs.frozen
class Availability:
    adapter: str
    usable: bool
    reason: str
    located: Located | None = None


def _which(candidates: Sequence[str]) -> str | None:
    for c in candidates:
        if os.path.isabs(c):
            if os.path.isfile(c) and os.access(c, os.X_OK):
                return c
        elif found := shutil.which(c):
            return found
    return None


@attrs.frozen
class AdapterDef:
    """One debug adapter: how to find and start it, which projects it belongs to, its quirks.

    Give one to the `tether_debug_adapters` hook; one with a built-in id replaces the built-in.

    Attributes:
        id: the adapter's name (what `launch` and `attach` take as ``adapter``).
        command: how to start it: the binary, then its arguments.
        markers: root markers of its projects (a marker AND the binary make it usable).
        launch_config: ``launch_config(request)`` builds the ``launch`` request's arguments from a
            `LaunchRequest`.
        handles: ``handles(program)`` says whether a program path is this adapter's kind (picked by
            `launch`: the first usable adapter that handles it).
        takes: what kind of program that is, for the model (e.g. "a .py file or a module").
        modules: whether it launches a module by name (`LaunchRequest.module`).
        binaries: the names or absolute paths tried for ``command[0]``, in order (empty: ``command[0]``).
        transport: "stdio", or "tcp" for an adapter that listens on a port it prints.
        attach_config: ``attach_config(port)``: the ``attach`` arguments for a debugger listening on a
            port; None: no attach by port.
        attach_pid_config: ``attach_pid_config(pid)``: the ``attach`` arguments for a running process;
            None: no attach by process id.
        build: ``build(request, directory)``: the command that builds the program into ``directory``
            before the adapter starts (delve: ``go build`` with delve's flags), so a build error is
            answered from the build's own output; None from it when there is nothing to build (a
            binary). After it the adapter is asked to run the executable (``launch_config`` gets a
            request whose program is the `Build.output`).
        locate: ``locate(root)``, when set, replaces the binary search: a `Located`, or the reason
            (a string) it is unusable.
        exception_modes: maps none/uncaught/raised to the adapter's own exception filter names.
        exception_note: what stops the program whatever the filters (a signal, a Go panic), said
            with the exception modes.
        check_condition: checks a breakpoint condition before it is sent (debugpy accepts any and
            fails at every hit): the problem, or None.
        function_hint: how to write a function breakpoint's name, said when one does not bind.
        find_functions: for an adapter that verifies any function name (debugpy):
            ``find_functions(root, names)`` looks for them in the project's sources and says, per
            name not found, what was searched; None: the adapter's answer is trusted.
        skip_scopes: scope names left out of a stop's locals (lldb-dap's "Registers").
        stdout_is_program_output: the adapter sends no output events and the program writes to the
            adapter's stdout (delve).
        comment_prefixes: line comment markers of the language (a breakpoint on a blank or comment
            line is refused, naming the next line with code).
        output_categories: the output event categories that are the program's output.
        drop_output_after_terminated: ignore output events after ``terminated`` (lldb-dap floods them
            while it dies).
        evaluate_context: the ``context`` of evaluate requests (debugpy's "repl" also runs
            statements; lldb-dap's decorates values, so "watch").
        group_names: the groups it lists among locals ("special variables" in debugpy), left out of a
            stop's snapshot.
        signal_exit: maps an exit code that means a signal killed the program (debugpy reports
            256 - N) to that signal's number; None otherwise.
        logpoint_prefix: a regex: what the adapter prints before a logpoint's message (delve:
            "> [Go 1]: ").
        function_answers_unordered: setFunctionBreakpoints answers in its own order, not the
            request's (lldb-dap).
        evaluate_assigns: whether ``x = 5`` works through evaluate; else through setVariable (delve).
    """

    id: str
    command: tuple[str, ...]
    markers: tuple[str, ...]
    launch_config: Callable[[LaunchRequest], dict[str, Any]] = attrs.field(repr=False)
    handles: Callable[[Path], bool] = attrs.field(repr=False)
    takes: str = ""
    modules: bool = False
    binaries: tuple[str, ...] = ()
    transport: Literal["stdio", "tcp"] = "stdio"
    attach_config: Callable[[int], dict[str, Any]] | None = attrs.field(default=None, repr=False)
    attach_pid_config: Callable[[int], dict[str, Any]] | None = attrs.field(default=None, repr=False)
    build: Callable[[LaunchRequest, Path], Build | None] | None = attrs.field(default=None, repr=False)
    locate: Callable[[Path], Located | str] | None = attrs.field(default=None, repr=False)
    exception_modes: dict[str, tuple[str, ...]] = attrs.field(factory=dict, repr=False)
    exception_note: str = ""
    check_condition: Callable[[str], str | None] | None = attrs.field(default=None, repr=False)
    function_hint: str = ""
    find_functions: Callable[[Path, list[str]], dict[str, str]] | None = attrs.field(default=None, repr=False)
    skip_scopes: tuple[str, ...] = ()
    stdout_is_program_output: bool = False
    comment_prefixes: tuple[str, ...] = ("#",)
    output_categories: tuple[str, ...] = ("stdout", "stderr", "important")
    drop_output_after_terminated: bool = False
    evaluate_context: str = "repl"
    group_names: tuple[str, ...] = ()
    signal_exit: Callable[[int], int | None] | None = attrs.field(default=None, repr=False)
    logpoint_prefix: str = ""
    function_answers_unordered: bool = False
    evaluate_assigns: bool = True

    def availability(self, root: Path) -> Availability:
        present = [m for m in self.markers if (root / m).exists()]
        if self.locate is not None:
            located = self.locate(root)
            binary_problem = located if isinstance(located, str) else None
        else:
            found = _which(self.binaries or self.command[:1])
            located = Located((found, *self.command[1:])) if found else None
            tried = ", ".join(self.binaries or self.command[:1])
            binary_problem = None if found else f"binary not found (tried {tried})"
        if not present:
            why = f"no root marker ({', '.join(self.markers)}) in the project root"
            if binary_problem:
                why += f"; {binary_problem}"
            return Availability(self.id, False, why)
        if binary_problem:
            return Availability(self.id, False, f"{binary_problem} (marker {present[0]} is present)")
        assert isinstance(located, Located)
        why = f"marker {present[0]}; {' '.join(located.argv)}"
        if located.python:
            python = Path(located.python)
            shown = python.relative_to(root).as_posix() if python.is_relative_to(root) else str(python)
            why += f"; programs run under {shown}"
        return Availability(self.id, True, why, located)


# -- built-in definitions ----------------------------------------------------------------------------


def project_python(root: Path) -> str | None:
    """The project's own interpreter: a local venv first; a python from $PATH is another environment."""
    return binaries.project_python(root) or shutil.which("python3")


def _locate_debugpy(root: Path) -> Located | str:
    python = project_python(root)
    if python is None:
        return "no python: neither .venv/bin/python nor venv/bin/python in the root, nor python3 on PATH"
    # The adapter runs in tether's own interpreter, where debugpy is guaranteed (a dependency of
    # tether-debug); the debuggee runs under the project's python, which need not have debugpy.
    return Located((sys.executable, "-m", "debugpy.adapter"), python)


# One definition of each language's root markers with the lsp family's servers (tether.markers): a project
# one family takes, the other takes too. Rust's and C's together, for the native adapter.
PY_MARKERS = ROOT_MARKERS["python"]
C_MARKERS = (*ROOT_MARKERS["rust"], *ROOT_MARKERS["c"])
GO_MARKERS = ROOT_MARKERS["go"]


def _is_python(program: Path) -> bool:
    """A .py file, or a script whose shebang names python (``.venv/bin/pytest``)."""
    if program.suffix in (".py", ".pyw"):
        return True
    try:
        with program.open("rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def _debugpy_launch(request: LaunchRequest) -> dict[str, Any]:
    target = {"module": request.module} if request.module else {"program": str(request.program)}
    return {
        "type": "python",
        "name": "tether",
        **target,
        "args": list(request.args),
        "cwd": str(request.cwd),
        "env": dict(request.env),
        "python": [request.located.python or sys.executable],
        # the default subProcess=true hangs a debuggee that starts a child process
        "subProcess": False,
        "console": "internalConsole",
        "justMyCode": True,
        "redirectOutput": True,
        "showReturnValue": True,
        "stopOnEntry": request.stop_on_entry,
    }


def _python_condition(expression: str) -> str | None:
    try:
        compile(expression, "<condition>", "eval")
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg}"
    return None


MAX_FUNCTION_SEARCH = 5000  # Python files read to look for a function breakpoint's def
FUNCTION_SEARCH_FILE_BYTES = 2_000_000  # a bigger Python file (generated, vendored) is not read
FUNCTION_SEARCH_BYTES = 50_000_000  # read in all for one setting of function breakpoints


def _python_functions_missing(root: Path, names: list[str]) -> dict[str, str]:
    """The names no ``def`` in the project's Python files defines, each with what was searched.

    debugpy verifies any function breakpoint and matches the bare name of the code that runs
    (``co_name``), so a typo or a qualified name would never stop and never be said. The search is
    bounded (files, the size of one, bytes in all); what it left unread is said with each name.
    """
    from tether.walk import walk

    files = walk(root, wanted=lambda name: name.endswith((".py", ".pyw"))).files
    wanted = {
        n: re.compile(rb"^[ \t]*(?:async[ \t]+)?def[ \t]+" + re.escape(n.encode()) + rb"\b", re.M)
        for n in names
    }
    read, big, total = 0, 0, 0
    for entry in files:
        if not wanted or read >= MAX_FUNCTION_SEARCH or total >= FUNCTION_SEARCH_BYTES:
            break
        if entry.size > FUNCTION_SEARCH_FILE_BYTES:
            big += 1
            continue
        try:
            data = Path(entry.path).read_bytes()
        except OSError:
            continue
        read += 1
        total += len(data)
        for name in [n for n, pattern in wanted.items() if pattern.search(data)]:
            del wanted[name]
    unread = len(files) - read - big
    left = [f"{big} over {FUNCTION_SEARCH_FILE_BYTES:,} bytes skipped"] if big else []
    if unread > 0:
        bound = (
            f"{MAX_FUNCTION_SEARCH} files"
            if read >= MAX_FUNCTION_SEARCH
            else f"{FUNCTION_SEARCH_BYTES:,} bytes"
        )
        left.append(f"{unread} not read past the first {bound}")
    where = (
        f"{read} of the project's {len(files)} Python files ({'; '.join(left)})"
        if left
        else (f"the project's {read} Python files")
    )
    said = {}
    for name in wanted:
        bare = name.rpartition(".")[2]
        how = (
            f"debugpy matches a function's bare name: write '{bare}'"
            if bare != name
            else "debugpy accepts any name and stops only if a function of that name runs (a library's too)"
        )
        said[name] = f"no `def {name}` in {where}; {how}"
    return said


FATAL_SIGNALS = frozenset(
    {
        signal.SIGSEGV,
        signal.SIGABRT,
        signal.SIGBUS,
        signal.SIGFPE,
        signal.SIGILL,
        signal.SIGKILL,
        signal.SIGTERM,
    }
)


def _debugpy_signal(code: int) -> int | None:
    """debugpy's launcher reports a signal death as the low byte of -N (SIGSEGV: 245)."""
    return 256 - code if 256 - code in FATAL_SIGNALS else None


def _debugpy_attach(port: int) -> dict[str, Any]:
    return {
        "type": "python",
        "name": "tether",
        "justMyCode": True,
        "subProcess": False,
        "redirectOutput": True,
    }


GO_BUILDINFO = b"\xff Go buildinf:"  # the magic of a Go binary's .go.buildinfo section


def _binary_kind(program: Path) -> str | None:
    """'go' for a Go executable (delve's), 'native' for another ELF/Mach-O one, None otherwise."""
    try:
        with program.open("rb") as f:
            if f.read(4) not in (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe"):
                return None
            tail = b""
            while chunk := f.read(1 << 20):
                if GO_BUILDINFO in tail + chunk:
                    return "go"
                tail = chunk[-len(GO_BUILDINFO) :]
    except OSError:
        return None
    return "native"


def _lldb_launch(request: LaunchRequest) -> dict[str, Any]:
    return {
        "name": "tether",
        "program": str(request.program),
        "args": list(request.args),
        "cwd": str(request.cwd),
        "env": [f"{k}={v}" for k, v in request.env.items()],
        "stopOnEntry": request.stop_on_entry,
    }


def _lldb_attach_pid(pid: int) -> dict[str, Any]:
    return {"name": "tether", "pid": pid}


def _delve_handles(program: Path) -> bool:
    if program.is_dir():
        return any(program.glob("*.go"))
    return program.suffix == ".go" or _binary_kind(program) == "go"


# delve's own: no optimisation, no inlining; and the sources' full paths, which the breakpoints name
# (-trimpath in the launch's GOFLAGS would strip them, and no breakpoint would bind)
GO_DEBUG_FLAGS = ("-gcflags", "all=-N -l", "-trimpath=false")


def _delve_build(request: LaunchRequest, directory: Path) -> Build | None:
    """Build as `dlv debug` / `dlv test` would (``go build -o ... -gcflags 'all=-N -l' <pkg>``).

    A package directory or a .go file is built (its tests with ``go test -c`` for test=true, a
    _test.go file or a directory of tests only); a binary is run as it is. The build runs in the
    root with the launch's env, as delve's did, so the binary's sources are the root's own paths.
    """
    program = request.program
    assert program is not None
    if _binary_kind(program) == "go":
        return None  # a Go binary (one `go test -c` wrote, test=true or not) is run as it is
    if program.name.endswith("_test.go"):
        program = program.parent  # a test file: the tests of its package
    test = request.test or program != request.program or (program.is_dir() and _only_tests(program))
    if not test and not (program.is_dir() or program.suffix == ".go"):
        return None
    # go builds a package of the module it runs in: the program's own, at or above it in the root
    module = next(
        (
            d
            for d in (program if program.is_dir() else program.parent, *program.parents)
            if d.is_relative_to(request.root) and (d / "go.mod").is_file()
        ),
        request.root,
    )
    relative = program.relative_to(module).as_posix()  # the program is confined to the root
    target = "." if relative == "." else f"./{relative}"
    name = program.stem if program.suffix == ".go" else program.name
    output = directory / (f"{name}.test" if test else name)
    flags = ("-o", str(output), *GO_DEBUG_FLAGS)
    argv = ("go", "test", "-c", *flags, target) if test else ("go", "build", *flags, target)
    no_output = (
        f"{target} has no test files: there are no tests to debug there."
        if test
        else (
            f"'{program.name}' is a library package (no package main): there is nothing to run. Debug its "
            "tests with test=true (args=['-test.run', 'TestName'] for one), or launch a main package that uses it."
        )
    )
    return Build(
        argv=argv,
        output=output,
        env=dict(request.env),
        untrusted_env=dict(binaries.GO_UNTRUSTED_ENV),  # as gopls runs there: nothing fetched
        no_output=no_output,
        run_in=program if test else None,
        cwd=module,
    )


def _delve_launch(request: LaunchRequest) -> dict[str, Any]:
    """Run a Go binary: one `_delve_build` wrote, or one the model gave (`go test -c`)."""
    return {
        "name": "tether",
        "mode": "exec",
        "program": str(request.program),
        "args": list(request.args),
        "cwd": str(request.cwd),
        "env": dict(request.env),
        "stopOnEntry": request.stop_on_entry,
    }


def _only_tests(directory: Path) -> bool:
    files = list(directory.glob("*.go"))
    return bool(files) and all(f.name.endswith("_test.go") for f in files)


def _dart_launch(request: LaunchRequest) -> dict[str, Any]:
    return {
        "name": "tether",
        "program": str(request.program),
        "args": list(request.args),
        "cwd": str(request.cwd),
    }


BUILTIN: tuple[AdapterDef, ...] = (
    AdapterDef(
        id="dart",
        command=("dart", "debug_adapter"),
        markers=("pubspec.yaml",),
        launch_config=_dart_launch,
        handles=lambda p: p.suffix == ".dart",
        takes="a .dart file",
        comment_prefixes=("//",),
    ),
    AdapterDef(
        id="debugpy",
        command=("python3", "-m", "debugpy.adapter"),
        markers=PY_MARKERS,
        launch_config=_debugpy_launch,
        attach_config=_debugpy_attach,
        handles=_is_python,
        takes="a .py file or a python script with a shebang; module='pytest' for `python -m pytest`",
        modules=True,
        locate=_locate_debugpy,
        exception_modes={"none": (), "uncaught": ("uncaught",), "raised": ("raised", "uncaught")},
        check_condition=_python_condition,
        group_names=("special variables", "function variables", "class variables", "protected variables"),
        signal_exit=_debugpy_signal,
        function_hint="a function's name as written in its def (debugpy matches it at every call, so it is verified even when no such function exists)",
        find_functions=_python_functions_missing,
        # debugpy reports telemetry as output events; only the program's streams are output here
    ),
    AdapterDef(
        id="lldb",
        command=("lldb-dap",),
        binaries=("lldb-dap", "lldb-dap-19", "/usr/lib/llvm-19/bin/lldb-dap", "lldb-vscode"),
        markers=C_MARKERS,
        launch_config=_lldb_launch,
        attach_pid_config=_lldb_attach_pid,
        handles=lambda p: _binary_kind(p) == "native",
        takes="a native binary built with -g (C, C++, Rust)",
        exception_modes={"none": (), "uncaught": (), "raised": ("cpp_throw",)},
        exception_note="a signal (SIGSEGV, SIGABRT) stops the program whatever the mode",
        function_hint="C: the function's name ('add'); C++: 'ns::Class::method'",
        skip_scopes=("Registers",),
        comment_prefixes=("//",),
        evaluate_context="watch",
        drop_output_after_terminated=True,
        function_answers_unordered=True,
    ),
    AdapterDef(
        id="delve",
        command=("dlv", "dap", "--listen=127.0.0.1:0"),
        markers=GO_MARKERS,
        transport="tcp",
        launch_config=_delve_launch,
        build=_delve_build,
        handles=_delve_handles,
        takes="a Go package directory, a .go file (a _test.go file or test=true: its tests), or a Go binary (`go test -c`)",
        exception_note="an unrecovered panic stops the program whatever the mode",
        function_hint="Go function breakpoints take qualified names: 'main.add', 'example.com/mod/pkg.Func', 'pkg.(*T).Method'",
        stdout_is_program_output=True,
        comment_prefixes=("//",),
        evaluate_assigns=False,
        logpoint_prefix=r"> \[Go \d+\]: ",
    ),
)


def adapter_table(run: Run) -> dict[str, AdapterDef]:
    """The run's adapter definitions: built-ins and those of `tether_debug_adapters` implementations.

    The core's one rule (`Run.definitions`): a third party's definition with a built-in id replaces it.
    """
    from tether_debug.hookspecs import tether_debug_adapters

    return run.definitions(tether_debug_adapters, AdapterDef)


def handles_safely(adapter: AdapterDef, path: Path) -> bool:
    """Whether ``adapter`` takes ``path``; a third party's failing predicate counts as no."""
    try:
        return bool(adapter.handles(path))
    except Exception:
        log.warning("debug adapter %s failed to judge %s", adapter.id, path, exc_info=True)
        return False
