"""Sample projects, real projects (click, pflag) and helpers for the lsp family's tests (real servers; basedpyright always)."""

from __future__ import annotations

import os
import shutil
import sys
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
    )


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


# -- real projects, downloaded once from their registries at pinned versions ------------------------

CACHE = Path(os.environ.get("TETHER_TEST_CACHE", Path.home() / ".cache" / "tether-tests"))
CLICK_SHA256 = (
    "9bbfada76703fd1d784b83eea012e3e8c6a001a876543ef104fa56aaaeb072b4"  # click-8.5.1.tar.gz, the PyPI sdist
)
RXJS_SHA256 = "2312f8ffd9726ffd7bd53ea12c5f13663d09a3dc3326f448c70b88f5ef6fac82"  # rxjs-7.8.2.tgz, the npm registry's tarball
PFLAG_SOURCE = Path("/usr/share/gocode/src/github.com/spf13/pflag")  # Debian's golang-github-spf13-pflag-dev


def _fetch_once(name: str, sha256: str, command: list[str]) -> Path:
    """CACHE/name, fetched with the registry's own client the first time and checked against its digest."""
    import hashlib
    import subprocess

    CACHE.mkdir(parents=True, exist_ok=True)
    target = CACHE / name
    if not target.is_file():
        subprocess.run(command, cwd=CACHE, check=True, capture_output=True, timeout=300)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    if digest != sha256:
        target.unlink()
        raise AssertionError(f"{name} from the registry has sha256 {digest}, expected {sha256}")
    return target


def _unpacked(archive: Path, top: str) -> Path:
    """The archive unpacked once next to it (read-only use: tests copy it)."""
    import tarfile

    dest = archive.with_name(archive.name + ".d")
    if not (dest / top).is_dir():
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    return dest / top


@pytest.fixture(scope="session")
def click_pristine() -> Path:
    python = shutil.which("python3") or sys.executable
    archive = _fetch_once(
        "click-8.5.1.tar.gz",
        CLICK_SHA256,
        [
            python,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "click==8.5.1",
            "-d",
            str(CACHE),
        ],
    )
    return _unpacked(archive, "click-8.5.1")


@pytest.fixture
def click_root(click_pristine: Path, tmp_path: Path) -> Path:
    """A private copy of click 8.5.1 (src/, tests/, [tool.pyright] include = ["src", "tests/typing"])."""
    return Path(shutil.copytree(click_pristine, tmp_path / "click"))


@pytest.fixture(scope="session")
def rxjs_pristine() -> Path:
    npm = shutil.which("npm")
    if npm is None:
        from support import IN_CI

        (pytest.fail if IN_CI else pytest.skip)("npm is not installed (.ci/run installs it)")
    archive = _fetch_once("rxjs-7.8.2.tgz", RXJS_SHA256, [npm, "pack", "rxjs@7.8.2", "--silent"])
    return _unpacked(archive, "package")


@pytest.fixture
def rxjs_root(rxjs_pristine: Path, tmp_path: Path) -> Path:
    """A private copy of rxjs 7.8.2's TypeScript sources from npm: src/ (251 files) and the root tsconfig.json
    (no include: the whole tree); its built dist/ is left out, so tsserver loads only the sources."""
    root = tmp_path / "rxjs"
    shutil.copytree(rxjs_pristine / "src", root / "src")
    for name in ("tsconfig.json", "package.json"):
        shutil.copy(rxjs_pristine / name, root / name)
    return root


@pytest.fixture
def pflag_root(tmp_path: Path) -> Path:
    """spf13/pflag from the Debian package, as a module of its own (no module proxy needed: no dependencies)."""
    if not (PFLAG_SOURCE / "flag.go").is_file():
        from support import IN_CI

        (pytest.fail if IN_CI else pytest.skip)(
            "golang-github-spf13-pflag-dev is not installed (.ci/run installs it)"
        )
    root = Path(shutil.copytree(PFLAG_SOURCE, tmp_path / "pflag", symlinks=False))
    if not (root / "go.mod").is_file():
        (root / "go.mod").write_text("module github.com/spf13/pflag\n\ngo 1.12\n")
    return root


@pytest.fixture
def cpu_stress():
    """Two busy processes for the length of the test (each stops on its own after 10 minutes at most)."""
    import subprocess

    busy = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end:\n    pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", busy]) for _ in range(2)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)


CJSON_SHA256 = "5308fd4bd90cef7aa060558514de6a1a4a0819974a26e6ed13973c5f624c24b2"  # cjson_1.7.15.orig.tar.gz


def _debian_source(package: str, orig: str, sha256: str) -> Path:
    """CACHE/orig: the upstream tarball of a Debian source package, fetched once with apt-get source.

    apt setups usually carry no deb-src lines: a private configuration (its own lists, bookworm-security's
    source index, a few hundred KB) is used, and the system's is left alone."""
    import hashlib
    import subprocess

    CACHE.mkdir(parents=True, exist_ok=True)
    target = CACHE / orig
    if not target.is_file():
        apt = CACHE / "apt"
        for sub in ("lists/partial", "parts", "cache/archives/partial"):
            (apt / sub).mkdir(parents=True, exist_ok=True)
        (apt / "parts" / "src.sources").write_text(
            "Types: deb-src\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n"
            "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        )
        opts = []
        for key, value in {
            "Dir::Etc::SourceList": "/dev/null",
            "Dir::Etc::SourceParts": apt / "parts",
            "Dir::State::Lists": apt / "lists",
            "Dir::Cache": apt / "cache",
            "Debug::NoLocking": "1",
        }.items():
            opts += ["-o", f"{key}={value}"]
        for args in (["update"], ["source", "--download-only", package]):
            subprocess.run(["apt-get", *opts, *args], cwd=CACHE, check=True, capture_output=True, timeout=300)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    if digest != sha256:
        target.unlink()
        raise AssertionError(f"{orig} from Debian has sha256 {digest}, expected {sha256}")
    return target


@pytest.fixture(scope="session")
def cjson_pristine() -> Path:
    if not shutil.which("apt-get"):
        from support import IN_CI

        (pytest.fail if IN_CI else pytest.skip)("cJSON's source comes from Debian (apt-get source)")
    return _unpacked(_debian_source("cjson", "cjson_1.7.15.orig.tar.gz", CJSON_SHA256), "cJSON-1.7.15")


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
