"""Fixtures of the debug family's tests: sample projects built in tmp_path, and a run per test."""

from __future__ import annotations

import contextlib
import textwrap
from pathlib import Path

import pytest
import tether
from tether.testing import assert_model_error
from tether_debug.hookspecs import tether_debug_supervisor
from tether_debug.supervisor import DebugSupervisor

APP = """\
import sys


def add(a, b):
    c = a + b
    return c


def main():
    items = list(range(1000))
    text = "x" * 5000
    print("hello out")
    total = add(2, 3)
    print("total", total, file=sys.stderr)
    return total


main()
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text) if name != "app.py" else text)
    return root


@pytest.fixture
def pyproject(tmp_path: Path) -> Path:
    """A Python project: a marker and app.py (add() on lines 4-6, main() on 9-15)."""
    return write(tmp_path, {"pyproject.toml": "[project]\nname = 'demo'\nversion = '0'\n", "app.py": APP})


class Debug:
    """Calls the debug tool of one run; `ok` asserts success, `err` an error the model can act on."""

    def __init__(self, run) -> None:
        self.run = run

    async def __call__(self, **arguments):
        return await self.run.call("debug", arguments)

    async def ok(self, **arguments):
        result = await self.run.call("debug", arguments)
        assert not result.is_error, result.plain
        return result

    async def err(self, **arguments):
        result = await self.run.call("debug", arguments)
        assert_model_error(result)
        return result

    @property
    def supervisor(self) -> DebugSupervisor:
        """The run's session supervisor (what the tool is bound to)."""
        supervisor = self.run.resource(tether_debug_supervisor)
        assert supervisor is not None
        return supervisor


@contextlib.asynccontextmanager
async def _open_debug(root: Path, **options):
    async with tether.open_run(root, conversation_id="conv-1", options=options) as run:
        yield Debug(run)


@pytest.fixture
def open_debug():
    """``async with open_debug(root, **run_options) as debug``: a run with a conversation, its debug tool."""
    return _open_debug


@pytest.fixture
def write_files():
    """``write_files(root, {name: text})``: add files to a sample project."""
    return write


@pytest.fixture
async def debug(pyproject, no_leftover_processes):
    async with _open_debug(pyproject, debug_stop_timeout=20) as debug:
        yield debug
