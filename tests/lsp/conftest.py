"""Sample projects, real projects (click, pflag) and helpers for the lsp family's tests (real servers; basedpyright always)."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest
import real_projects
import tether.files
from tether_lsp.hookspecs import tether_lsp_supervisor

REPO = Path(__file__).resolve().parents[2]

UTIL = '''\
def greet(name: str) -> str:
    """Say hello."""
    return "hi " + name


class Greeter:
    def hello(self) -> str:
        return greet("x")
'''

MAIN = """\
from pkg import util as u
from pkg.util import greet

greeting = greet("a")
result = greet(greet("b"))
print("😀😀", u.greet("c"))
value: int = u.greet("d")
"""

OTHER = """\
from pkg.util import greet, Greeter

print(greet("other"), Greeter().hello())
"""


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text) if text.startswith("\n") else text, encoding="utf-8")
    return root


def python_project(root: Path) -> Path:
    """pkg/util.py (definitions), pkg/main.py (uses, one existing type error), pkg/other.py (never opened)."""
    return write_tree(
        root,
        {
            "pyproject.toml": '[project]\nname = "sample"\nversion = "0"\n\n[tool.basedpyright]\ntypeCheckingMode = "standard"\n',
            "pkg/__init__.py": "",
            "pkg/util.py": UTIL,
            "pkg/main.py": MAIN,
            "pkg/other.py": OTHER,
        },
    )


@pytest.fixture
def py_root(tmp_path: Path) -> Path:
    return python_project(tmp_path / "proj")


@pytest.fixture
def watched_events(py_root, monkeypatch) -> list[tuple[str, int]]:
    """The watched-file events sent to the run's servers from now on, as (file under py_root, type: 1 created,
    2 changed, 3 deleted), in order."""
    from tether_lsp.connection import Connection

    sent: list[tuple[str, int]] = []
    notify = Connection.notify

    def spy(self, method, params):
        if method == "workspace/didChangeWatchedFiles":
            for change in params.changes:
                path = Path(change.uri.removeprefix("file://")).relative_to(py_root)
                sent.append((path.as_posix(), int(change.type)))
        return notify(self, method, params)

    monkeypatch.setattr(Connection, "notify", spy)
    return sent


@pytest.fixture(scope="session")
def samples():
    """The builders, for tests and module-scoped fixtures (a test module cannot import this conftest)."""
    import types

    return types.SimpleNamespace(
        python_project=python_project,
        write_tree=write_tree,
        pid_of=pid_of,
        UTIL=UTIL,
        MAIN=MAIN,
        OTHER=OTHER,
        node_bin=node_bin,
        xtools_copy=xtools_copy,
    )


def node_bin() -> Path:
    """typescript-language-server and tsc come from the repository's package.json (npm ci)."""
    return REPO / "node_modules" / ".bin"


@pytest.fixture
def with_node_bin(monkeypatch):
    monkeypatch.setenv("PATH", f"{node_bin()}{os.pathsep}{os.environ.get('PATH', '')}")


FILE_PLUGINS = [tether.files]


def pid_of(run, server: str = "basedpyright") -> int:
    for conn in run.resource(tether_lsp_supervisor).connections.values():
        if conn.server.id == server and conn.alive:
            return conn.pid
    raise AssertionError(f"{server} is not running")


# -- real projects, downloaded once from their registries at pinned versions (tests/real_projects.py) --


@pytest.fixture(scope="session")
def click_pristine() -> Path:
    return real_projects.click_pristine()


@pytest.fixture
def click_root(click_pristine: Path, tmp_path: Path) -> Path:
    """A private copy of click 8.5.1 (src/, tests/, [tool.pyright] include = ["src", "tests/typing"])."""
    return Path(shutil.copytree(click_pristine, tmp_path / "click"))


@pytest.fixture(scope="session")
def django_pristine() -> Path:
    return real_projects.django_pristine()


@pytest.fixture
def django_root(django_pristine: Path, tmp_path: Path) -> Path:
    """A private copy of Django 5.1.4's django/ and tests/ (2,788 .py files, no pyright configuration)."""
    return real_projects.django_copy(django_pristine, tmp_path / "django")


def _npm() -> str:
    """npm, which fetches the TypeScript projects; a failure in CI (.ci/run installs it), a skip elsewhere."""
    npm = shutil.which("npm")
    if npm is None:
        from support import IN_CI

        (pytest.fail if IN_CI else pytest.skip)("npm is not installed (.ci/run installs it)")
    assert npm is not None
    return npm


@pytest.fixture(scope="session")
def rxjs_pristine() -> Path:
    return real_projects.rxjs_pristine(_npm())


@pytest.fixture
def rxjs_root(rxjs_pristine: Path, tmp_path: Path) -> Path:
    """A private copy of rxjs 7.8.2's TypeScript sources from npm (src/ and the root tsconfig.json)."""
    return real_projects.rxjs_copy(rxjs_pristine, tmp_path / "rxjs")


@pytest.fixture(scope="session")
def cloudflare_pristine() -> Path:
    return real_projects.cloudflare_pristine(_npm())


@pytest.fixture
def cloudflare_root(cloudflare_pristine: Path, tmp_path: Path) -> Path:
    """A private copy of cloudflare 7.3.0's TypeScript sources from npm (src/: 1,908 .ts files, its tsconfig.json)."""
    return real_projects.cloudflare_copy(cloudflare_pristine, tmp_path / "cloudflare")


def xtools_copy(root: Path) -> Path:
    """golang.org/x/tools from Debian's golang-golang-x-tools-dev at ``root``, its requirements vendored
    from Debian's other -dev packages (no module proxy needed)."""
    if not (real_projects.XTOOLS_SOURCE / "go.mod").is_file():
        from support import IN_CI

        (pytest.fail if IN_CI else pytest.skip)(
            "golang-golang-x-tools-dev is not installed (.ci/run installs it)"
        )
    return real_projects.debian_go_module(real_projects.XTOOLS_SOURCE, root)


@pytest.fixture
def xtools_root(tmp_path: Path) -> Path:
    return xtools_copy(tmp_path / "tools")


@pytest.fixture
def pflag_root(tmp_path: Path) -> Path:
    """spf13/pflag from the Debian package, as a module of its own (no module proxy needed: no dependencies)."""
    if not (real_projects.PFLAG_SOURCE / "flag.go").is_file():
        from support import IN_CI

        (pytest.fail if IN_CI else pytest.skip)(
            "golang-github-spf13-pflag-dev is not installed (.ci/run installs it)"
        )
    return real_projects.pflag_copy(tmp_path / "pflag")


@pytest.fixture(scope="session")
def cjson_pristine() -> Path:
    if not shutil.which("apt-get"):
        from support import IN_CI

        (pytest.fail if IN_CI else pytest.skip)("cJSON's source comes from Debian (apt-get source)")
    archive = real_projects.debian_source("cjson", "cjson_1.7.15.orig.tar.gz", real_projects.CJSON_SHA256)
    return real_projects.unpacked(archive, "cJSON-1.7.15")


@pytest.fixture
def cjson_root(cjson_pristine: Path, tmp_path: Path) -> Path:
    """A private copy of cJSON 1.7.15 with the compile_commands.json its CMake build exports with
    -DENABLE_CJSON_UTILS=On -DENABLE_CJSON_TEST=Off (the library's two sources, C89)."""
    import json

    root = Path(shutil.copytree(cjson_pristine, tmp_path / "cjson"))
    commands = [
        {
            "directory": str(root),
            "file": str(root / name),
            "arguments": ["cc", "-std=c89", "-pedantic", "-Wall", f"-I{root}", "-c", name],
        }
        for name in ("cJSON.c", "cJSON_Utils.c")
    ]
    (root / "compile_commands.json").write_text(json.dumps(commands, indent=1))
    return root
