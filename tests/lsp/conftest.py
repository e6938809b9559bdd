"""Sample projects and helpers for the lsp family's tests (real servers; basedpyright always)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import tether.files

REPO = Path(__file__).resolve().parents[2]

UTIL = '''\
def greet(name: str) -> str:
    """Say hello."""
    return "hi " + name


class Greeter:
    def hello(self) -> str:
        return greet("x")
'''

MAIN = '''\
from pkg import util as u
from pkg.util import greet

greeting = greet("a")
result = greet(greet("b"))
print("😀😀", u.greet("c"))
value: int = u.greet("d")
'''

OTHER = '''\
from pkg.util import greet, Greeter

print(greet("other"), Greeter().hello())
'''


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text) if text.startswith("\n") else text, encoding="utf-8")
    return root


def python_project(root: Path) -> Path:
    """pkg/util.py (definitions), pkg/main.py (uses, one existing type error), pkg/other.py (never opened)."""
    return write_tree(root, {
        "pyproject.toml": '[project]\nname = "sample"\nversion = "0"\n\n[tool.basedpyright]\ntypeCheckingMode = "standard"\n',
        "pkg/__init__.py": "",
        "pkg/util.py": UTIL,
        "pkg/main.py": MAIN,
        "pkg/other.py": OTHER,
    })


@pytest.fixture
def py_root(tmp_path: Path) -> Path:
    return python_project(tmp_path / "proj")


@pytest.fixture(scope="session")
def samples():
    """The builders, for tests and module-scoped fixtures (a test module cannot import this conftest)."""
    import types

    return types.SimpleNamespace(python_project=python_project, write_tree=write_tree, pid_of=pid_of,
                                 UTIL=UTIL, MAIN=MAIN, OTHER=OTHER, node_bin=node_bin)


def node_bin() -> Path:
    """typescript-language-server and tsc come from the repository's package.json (npm ci)."""
    return REPO / "node_modules" / ".bin"


@pytest.fixture
def with_node_bin(monkeypatch):
    monkeypatch.setenv("PATH", f"{node_bin()}{os.pathsep}{os.environ.get('PATH', '')}")


FILE_PLUGINS = [tether.files]


def pid_of(run, server: str = "basedpyright") -> int:
    for conn in run.resource("tether_lsp_supervisor").connections.values():
        if conn.server.id == server and conn.alive:
            return conn.pid
    raise AssertionError(f"{server} is not running")
