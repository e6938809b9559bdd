"""`tether.testing`: the pytest kit for testing a tether family, ours or a third party's.

Installed with tether-core as a pytest plugin (entry point ``pytest11``, name ``tether``; turn it off
with ``-p no:tether``). Fixtures:

- ``tether_run``: ``async with tether_run(root, only=["greeter"], plugins=[Harness()]) as run`` opens a
  run where only the named entry-point families load (the others are never imported), with extra
  plugin objects; every other keyword goes to `tether.open_run`.
- ``no_leftover_processes``: after the test, no process the test started may still be alive (it
  waits a few seconds for processes that are on their way out).

Assertions, plain functions to import:

- `assert_model_error(result, *fragments)`: an error result a model can act on: no traceback, no
  "inside the tool" (a fault of the tool, not of the arguments), each fragment present.
- `assert_no_traceback(text)`: text that is not an error result (a process's stderr, an MCP client's
  view of a result, a result that may or may not be an error) shows no Python traceback.
- `assert_light_entry_point(module, forbidden=(...))`: importing ``module`` in a fresh interpreter
  imports none of ``forbidden`` (the heavy libraries a family must load only when a tool needs
  them), so `tether tools` stays fast with every family installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tether.run import Run, open_run
from tether.tools import ToolResult

LEFTOVER_WAIT = 5.0
FAULT_MARKERS = ("Traceback (most recent call last)", 'File "', "inside the tool", "a fault of the tool")


@asynccontextmanager
async def open_test_run(
    root: str | os.PathLike[str] = ".",
    *,
    only: Iterable[str] | None = None,
    plugins: Sequence[Any] = (),
    **kwargs: Any,
) -> AsyncIterator[Run]:
    """`tether.open_run` where ``only`` names the entry-point families that may load (None: all)."""
    if only is not None:
        from tether.plugins import discovered_entry_points

        keep = set(only)
        kwargs["block"] = [
            *kwargs.get("block", ()),
            *(ep.name for ep in discovered_entry_points() if ep.name not in keep),
        ]
    async with open_run(root, plugins=plugins, **kwargs) as run:
        yield run


@pytest.fixture
def tether_run() -> Callable[..., Any]:
    """``async with tether_run(root, only=[...], plugins=[...]) as run``: see `open_test_run`."""
    return open_test_run


def children() -> set[int]:
    """Live (non-zombie) descendants of this process."""
    import psutil

    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out.add(p.pid)
        except psutil.Error:
            pass
    return out


def assert_no_new_children(before: set[int], timeout: float = LEFTOVER_WAIT) -> None:
    """Fail if a process started since ``before`` is still alive after ``timeout`` seconds."""
    import psutil

    deadline = time.monotonic() + timeout
    while True:
        left = children() - before
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    names = []
    for pid in left:
        try:
            names.append(f"{pid} {' '.join(psutil.Process(pid).cmdline())[:120]}")
        except psutil.Error:
            pass
    assert not names, "processes left behind: " + "; ".join(names)


@pytest.fixture
def no_leftover_processes() -> Any:
    """Use in a test that opens a run: after it, no process the test started may be alive."""
    before = children()
    yield
    assert_no_new_children(before)


def assert_model_error(result: ToolResult, *fragments: str) -> None:
    """``result`` is an error the model can act on: no traceback, not a fault of the tool, with ``fragments``."""
    text = result.plain
    assert result.is_error, f"expected an error result, got: {text[:500]}"
    for marker in FAULT_MARKERS:
        assert marker not in text, f"the error reads like a fault of the tool ({marker!r}): {text[:500]}"
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in the error: {text[:500]}"


def assert_no_traceback(text: str, what: str = "the text") -> None:
    """``text`` shows no Python traceback: for what `assert_model_error` cannot take (a process's stderr,
    an MCP client's view of a result, a result that may or may not be an error, a contained fault)."""
    assert "Traceback" not in text, f"{what} shows a traceback: {text[-2000:]}"


def assert_light_entry_point(module: str, forbidden: Iterable[str], *, then: str = "") -> None:
    """Importing ``module`` (then running ``then``, e.g. opening a run) in a fresh interpreter imports
    none of ``forbidden`` (module names; a name also forbids its submodules)."""
    names = sorted(set(forbidden))
    code = (
        f"import sys, importlib\nimportlib.import_module({module!r})\n{then}\n"
        f"names = {names!r}\n"
        "print(','.join(n for n in names if any(m == n or m.startswith(n + '.') for m in sys.modules)))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=Path.cwd()
    )
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    assert not loaded, f"importing {module} loaded {loaded}; import them inside the handlers that need them"
