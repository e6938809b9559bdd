"""Real projects, downloaded once from their registries at pinned versions, checked and cached.

Shared by tests/lsp/conftest.py and the lsp benchmarks (which put this folder on sys.path), so both
read the same verified archive. The cache is $TETHER_TEST_CACHE, else ~/.cache/tether-tests.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

CACHE = Path(os.environ.get("TETHER_TEST_CACHE", Path.home() / ".cache" / "tether-tests"))
# click-8.5.1.tar.gz, the PyPI sdist
CLICK_SHA256 = "9bbfada76703fd1d784b83eea012e3e8c6a001a876543ef104fa56aaaeb072b4"
# itsdangerous-2.2.0.tar.gz, the PyPI sdist
ITSDANGEROUS_SHA256 = "e0050c0b7da1eea53ffaf149c0cfbb5c6e2e2b69c4bef22c81fa6eb73e5f6173"


# Django-5.1.4.tar.gz, the PyPI sdist
DJANGO_SHA256 = "de450c09e91879fa5a307f696e57c851955c910a438a35e6b4c895e86bedc82a"
# rxjs-7.8.2.tgz, the npm registry's tarball
RXJS_SHA256 = "2312f8ffd9726ffd7bd53ea12c5f13663d09a3dc3326f448c70b88f5ef6fac82"
# cloudflare-7.3.0.tgz, the npm registry's tarball (the Cloudflare API's TypeScript SDK: src/, 1,908 .ts files)
CLOUDFLARE_SHA256 = "9c310bd9b80844360e63709c6aef94ce3c569f5960cc6a5cd90db3486a08efa4"
# cjson_1.7.15.orig.tar.gz, Debian's upstream tarball
CJSON_SHA256 = "5308fd4bd90cef7aa060558514de6a1a4a0819974a26e6ed13973c5f624c24b2"
# Debian's golang-github-spf13-pflag-dev (an installed package, not a download)
PFLAG_SOURCE = Path("/usr/share/gocode/src/github.com/spf13/pflag")
# Debian's Go sources (every golang-*-dev package installs its module here, GOPATH style)
GOCODE = Path("/usr/share/gocode/src")
# golang.org/x/tools from golang-golang-x-tools-dev (1,072 .go files, 185 packages); its go.mod's
# requirements come from golang-github-yuin-goldmark-dev, golang-golang-x-{mod,net,sys,sync}-dev
XTOOLS_SOURCE = GOCODE / "golang.org" / "x" / "tools"


@contextlib.contextmanager
def cache_lock(name: str):
    """One process at a time fetches or unpacks ``name`` (the test session's xdist workers and a benchmark
    share the cache): an advisory lock on CACHE/.name.lock, released at the end of the block, or by the
    system when the holding process dies (a worker killed mid-fetch leaves no lock behind)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _checked(target: Path, sha256: str, origin: str) -> Path:
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    if digest != sha256:
        target.unlink()
        raise AssertionError(f"{target.name} from {origin} has sha256 {digest}, expected {sha256}")
    return target


def fetch_once(name: str, sha256: str, command: list[str]) -> Path:
    """CACHE/name, fetched with the registry's own client the first time and checked against its digest.

    The client runs in a folder of its own and the file is renamed into place once whole, so a process
    that looks at the cache meanwhile (a benchmark) never sees half an archive; processes of one test
    session fetch it one at a time (`cache_lock`), so it is fetched once."""
    target = CACHE / name
    with cache_lock(name):
        if not target.is_file():
            with tempfile.TemporaryDirectory(dir=CACHE, prefix=".fetch-") as scratch:
                done = subprocess.run(command, cwd=scratch, capture_output=True, text=True, timeout=300)
                fetched = Path(scratch) / name
                if done.returncode != 0 or not fetched.is_file():
                    said = (done.stderr or done.stdout).strip()[-2000:]
                    raise AssertionError(
                        f"fetching {name} failed: {' '.join(command)} (exit {done.returncode}): {said}"
                    )
                _checked(fetched, sha256, "the registry")
                os.replace(fetched, target)
        return _checked(target, sha256, "the registry")


def unpacked(archive: Path, top: str) -> Path:
    """The archive unpacked once next to it (read-only use: callers copy it), by one process at a time."""
    dest = archive.with_name(archive.name + ".d")
    with cache_lock(dest.name):
        if not (dest / top).is_dir():
            tmp = dest.with_name(dest.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")
            shutil.rmtree(dest, ignore_errors=True)
            tmp.rename(dest)
    return dest / top


def uv() -> list[str]:
    """The uv that runs this process (`uv run` names itself in $UV), else one on PATH, else the one the
    README's commands installed beside python3: wherever those commands have run, uv is there, while the
    project's environment has no pip."""
    found = os.environ.get("UV") or shutil.which("uv")
    if found:
        return [found]
    return [shutil.which("python3") or sys.executable, "-m", "uv"]


def pypi_sdist(requirement: str, name: str, sha256: str) -> Path:
    """CACHE/name: ``requirement``'s sdist from PyPI (no dependencies, no wheel), checked against its digest.

    pip is run by uv in an environment of its own (``uv tool run``), so it needs no pip installed anywhere."""
    command = [*uv(), "tool", "run", "--quiet", "--from", "pip", "pip", "download", "--quiet"]
    command += ["--no-deps", "--no-binary", ":all:", requirement, "-d", "."]
    return fetch_once(name, sha256, command)


def click_pristine() -> Path:
    """click 8.5.1's sdist from PyPI, unpacked (src/, tests/, [tool.pyright] include = ["src", "tests/typing"])."""
    return unpacked(pypi_sdist("click==8.5.1", "click-8.5.1.tar.gz", CLICK_SHA256), "click-8.5.1")


def itsdangerous_pristine() -> Path:
    """itsdangerous 2.2.0's sdist from PyPI, unpacked (src/, tests/, [tool.pyright] include = ["src/itsdangerous"])."""
    archive = pypi_sdist("itsdangerous==2.2.0", "itsdangerous-2.2.0.tar.gz", ITSDANGEROUS_SHA256)
    return unpacked(archive, "itsdangerous-2.2.0")


def django_pristine() -> Path:
    """Django 5.1.4's sdist from PyPI, unpacked (django/, tests/, docs/; no pyright configuration)."""
    return unpacked(pypi_sdist("django==5.1.4", "Django-5.1.4.tar.gz", DJANGO_SHA256), "Django-5.1.4")


def django_copy(pristine: Path, root: Path) -> Path:
    """Django's Python at ``root``: django/ and tests/ (2,788 .py files) and pyproject.toml, as a user's
    checkout has them (its two dependencies, asgiref and sqlparse, are not installed: imports of them are
    unresolved before and after every write alike)."""
    for name in ("django", "tests"):
        shutil.copytree(pristine / name, root / name)
    shutil.copy(pristine / "pyproject.toml", root / "pyproject.toml")
    return root


def rxjs_pristine(npm: str) -> Path:
    """rxjs 7.8.2's npm tarball, unpacked (package/)."""
    archive = fetch_once("rxjs-7.8.2.tgz", RXJS_SHA256, [npm, "pack", "rxjs@7.8.2", "--silent"])
    return unpacked(archive, "package")


def rxjs_copy(pristine: Path, root: Path) -> Path:
    """rxjs's TypeScript sources at ``root``: src/ (251 files) and the root tsconfig.json (no include: the
    whole tree); its built dist/ is left out, so tsserver loads only the sources."""
    shutil.copytree(pristine / "src", root / "src")
    for name in ("tsconfig.json", "package.json"):
        shutil.copy(pristine / name, root / name)
    return root


def cloudflare_pristine(npm: str) -> Path:
    """cloudflare 7.3.0's npm tarball, unpacked (package/)."""
    archive = fetch_once(
        "cloudflare-7.3.0.tgz", CLOUDFLARE_SHA256, [npm, "pack", "cloudflare@7.3.0", "--silent"]
    )
    return unpacked(archive, "package")


def cloudflare_copy(pristine: Path, root: Path) -> Path:
    """Cloudflare's TypeScript sources at ``root``: the package's src/ (1,908 .ts files, no dependencies) with
    the tsconfig.json it ships there (include: index.ts, so its program is the 1,201 files index.ts reaches,
    567,000 lines; tsc reports 2 errors in it, `Object.fromEntries` under its lib ES2018)."""
    return Path(shutil.copytree(pristine / "src", root))


def debian_go_module(source: Path, root: Path) -> Path:
    """A Go module from Debian's sources at ``root``, its requirements vendored from the other -dev packages.

    Debian builds its Go packages GOPATH style against each other's sources; here the module is copied and
    each module its go.mod requires is linked under vendor/ from GOCODE, with the vendor/modules.txt the go
    command checks (every requirement marked explicit, the packages listed), so go (-mod=vendor, the default
    with a vendor folder) and gopls build it with no module proxy. A requirement that is not installed is
    an AssertionError naming it."""
    import re

    root = Path(shutil.copytree(source, root, symlinks=False))
    gomod = (root / "go.mod").read_text()
    lines = []
    for module, version in re.findall(r"^\s*(?:require\s+)?([\w.-]+\.[\w./-]+)\s+(v[\w.+-]+)", gomod, re.M):
        origin = GOCODE / module
        if not origin.is_dir():
            raise AssertionError(f"{module}, which {source.name}'s go.mod requires, is not in {GOCODE}")
        link = root / "vendor" / module
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(origin, target_is_directory=True)
        lines += [f"# {module} {version}", "## explicit"]
        packages = {
            p.parent
            for p in origin.rglob("*.go")
            if not any(
                part == "testdata" or part.startswith(("_", ".")) for part in p.relative_to(origin).parts
            )
        }
        lines += sorted(str(p.relative_to(GOCODE)) for p in packages)
    (root / "vendor" / "modules.txt").write_text("\n".join(lines) + "\n")
    return root


def pflag_copy(root: Path) -> Path:
    """spf13/pflag from the Debian package at ``root``, as a module of its own (no dependencies, so no
    module proxy is needed)."""
    root = Path(shutil.copytree(PFLAG_SOURCE, root, symlinks=False))
    if not (root / "go.mod").is_file():
        (root / "go.mod").write_text("module github.com/spf13/pflag\n\ngo 1.12\n")
    return root


def debian_source(package: str, orig: str, sha256: str) -> Path:
    """CACHE/orig: the upstream tarball of a Debian source package, fetched once with apt-get source.

    apt setups usually carry no deb-src lines: a private configuration (its own lists, bookworm-security's
    source index, a few hundred KB) is used, and the system's is left alone."""
    target = CACHE / orig
    with cache_lock(orig):
        if not target.is_file():
            _apt_source(package)
    return _checked(target, sha256, "Debian")


def _apt_source(package: str) -> None:
    """apt-get source --download-only of ``package`` into CACHE, with a private configuration."""
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
