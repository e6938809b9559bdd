"""Debug adapter definitions, and whether one can start here: a root marker AND its binary.

The same intersection as the lsp family: a Python adapter is not offered in a Go project, and a
project marker is not enough without the binary. Third parties add or replace definitions through
the ``tether_debug_adapters`` hook (a definition with a built-in id replaces the built-in one).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

if TYPE_CHECKING:
    from tether.run import Run

log = logging.getLogger("tether.debug")


@attrs.frozen
class Located:
    """How to start an adapter found usable here."""

    argv: tuple[str, ...]
    python: str | None = None  # debugpy: the interpreter the debuggee runs under


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

    ``binaries`` are the names or absolute paths tried for ``command[0]``, in order.
    ``launch_config(program, args, root, located)`` builds the ``launch`` request's arguments.
    ``handles(program)`` says whether a program path is this adapter's kind (picked by `launch`).
    ``locate(root)``, when set, replaces the binary search (returns a reason string when unusable).
    """

    id: str
    command: tuple[str, ...]
    markers: tuple[str, ...]
    launch_config: Callable[[Path, list[str], Path, Located], dict[str, Any]] = attrs.field(repr=False)
    handles: Callable[[Path], bool] = attrs.field(repr=False)
    binaries: tuple[str, ...] = ()
    transport: Literal["stdio", "tcp"] = "stdio"
    attach_config: Callable[[int], dict[str, Any]] | None = attrs.field(default=None, repr=False)
    locate: Callable[[Path], Located | str] | None = attrs.field(default=None, repr=False)
    exception_filters: tuple[str, ...] = ()
    skip_scopes: tuple[str, ...] = ()
    stdout_is_program_output: bool = False  # delve: no output events; the program writes to dlv's stdout
    comment_prefixes: tuple[str, ...] = ("#",)
    output_categories: tuple[str, ...] = ("stdout", "stderr", "important")
    drop_output_after_terminated: bool = False  # lldb-dap floods output events while it dies
    evaluate_context: str = "repl"  # debugpy's repl also runs statements; lldb-dap's repl decorates values

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
    for venv in (".venv", "venv"):
        for name in ("python", "python3"):
            candidate = root / venv / "bin" / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return shutil.which("python3")


def _locate_debugpy(root: Path) -> Located | str:
    python = project_python(root)
    if python is None:
        return "no python: neither .venv/bin/python nor venv/bin/python in the root, nor python3 on PATH"
    # The adapter runs in tether's own interpreter, where debugpy is guaranteed (a dependency of
    # tether-debug); the debuggee runs under the project's python, which need not have debugpy.
    return Located((sys.executable, "-m", "debugpy.adapter"), python)


def _debugpy_launch(program: Path, args: list[str], root: Path, located: Located) -> dict[str, Any]:
    return {
        "type": "python",
        "name": "tether",
        "program": str(program),
        "args": list(args),
        "cwd": str(root),
        "python": [located.python or sys.executable],
        # the default subProcess=true hangs a debuggee that starts a child process
        "subProcess": False,
        "console": "internalConsole",
        "justMyCode": True,
        "redirectOutput": True,
        "showReturnValue": True,
    }


def _debugpy_attach(port: int) -> dict[str, Any]:
    return {"type": "python", "name": "tether", "justMyCode": True, "subProcess": False, "redirectOutput": True}


def _is_native_binary(program: Path) -> bool:
    try:
        with program.open("rb") as f:
            magic = f.read(4)
    except OSError:
        return False
    return magic in (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe")


def _lldb_launch(program: Path, args: list[str], root: Path, located: Located) -> dict[str, Any]:
    return {"name": "tether", "program": str(program), "args": list(args), "cwd": str(root), "stopOnEntry": False}


def _delve_handles(program: Path) -> bool:
    if program.is_dir():
        return any(program.glob("*.go"))
    return program.suffix == ".go"


def _delve_launch(program: Path, args: list[str], root: Path, located: Located) -> dict[str, Any]:
    mode = "debug" if program.is_dir() or program.suffix == ".go" else "exec"
    return {"name": "tether", "mode": mode, "program": str(program), "args": list(args), "cwd": str(root)}


def _dart_launch(program: Path, args: list[str], root: Path, located: Located) -> dict[str, Any]:
    return {"name": "tether", "program": str(program), "args": list(args), "cwd": str(root)}


BUILTIN: tuple[AdapterDef, ...] = (
    AdapterDef(
        id="dart",
        command=("dart", "debug_adapter"),
        markers=("pubspec.yaml",),
        launch_config=_dart_launch,
        handles=lambda p: p.suffix == ".dart",
        comment_prefixes=("//",),
    ),
    AdapterDef(
        id="debugpy",
        command=("python3", "-m", "debugpy.adapter"),
        markers=("pyproject.toml", "setup.py", "requirements.txt"),
        launch_config=_debugpy_launch,
        attach_config=_debugpy_attach,
        handles=lambda p: p.suffix in (".py", ".pyw"),
        locate=_locate_debugpy,
        exception_filters=("uncaught",),
        # debugpy reports telemetry as output events; only the program's streams are output here
    ),
    AdapterDef(
        id="lldb",
        command=("lldb-dap",),
        binaries=("lldb-dap", "lldb-dap-19", "/usr/lib/llvm-19/bin/lldb-dap", "lldb-vscode"),
        markers=("Cargo.toml", "CMakeLists.txt"),
        launch_config=_lldb_launch,
        handles=_is_native_binary,
        skip_scopes=("Registers",),
        comment_prefixes=("//",),
        evaluate_context="watch",
        drop_output_after_terminated=True,
    ),
    AdapterDef(
        id="delve",
        command=("dlv", "dap", "--listen=127.0.0.1:0"),
        markers=("go.mod",),
        transport="tcp",
        launch_config=_delve_launch,
        handles=_delve_handles,
        stdout_is_program_output=True,
        comment_prefixes=("//",),
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
