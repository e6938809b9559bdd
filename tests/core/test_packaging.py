"""The eight distributions, built as a user gets them: metadata a PyPI page and pip can trust.

Builds every wheel and sdist of the workspace (``uv build``), runs ``twine check --strict`` on them,
and reads their METADATA: all carry the version of the one VERSION file, each family bounds
tether-core to that release series, every wheel is typed, licensed, classified POSIX and described
by its README, and the meta sdist ships only what it needs.
"""

from __future__ import annotations

import email
import os
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.message import Message
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from support import require_binary

REPO = Path(__file__).resolve().parents[2]
FAMILIES = ["askuser", "astgrep", "debug", "eval", "lsp", "vibe"]
DISTS = ["tether", "tether_core", *(f"tether_{f}" for f in FAMILIES)]


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    uv = os.environ.get("UV") or require_binary("uv")  # `uv run` names itself in $UV
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [uv, "build", "--all-packages", "--quiet", "-o", str(out)], cwd=REPO, check=True, timeout=600
    )
    return out


def metadata(dist: Path, name: str) -> Message:
    (wheel,) = dist.glob(f"{name}-*-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(z.read(meta))


def test_twine_check_passes_on_every_wheel_and_sdist(dist):
    files = sorted([*dist.glob("*.whl"), *dist.glob("*.tar.gz")])
    assert len(files) == 2 * len(DISTS), [f.name for f in files]
    out = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def sdist_metadata(dist: Path, name: str) -> Message:
    (sdist,) = dist.glob(f"{name}-[0-9]*.tar.gz")
    with tarfile.open(sdist) as t:
        (info,) = [m for m in t.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO")]
        data = t.extractfile(info)
        assert data is not None
        return email.message_from_bytes(data.read())


def test_every_wheel_and_sdist_has_the_version_of_the_one_version_file(dist):
    version = Version((REPO / "VERSION").read_text().strip())
    for name in DISTS:
        assert Version(metadata(dist, name)["Version"]) == version, name
        assert Version(sdist_metadata(dist, name)["Version"]) == version, name
    # no distribution spells its own version: each reads the VERSION file
    for pyproject in [
        REPO / "pyproject.toml",
        *REPO.glob("core/pyproject.toml"),
        *REPO.glob("plugins/*/pyproject.toml"),
    ]:
        project = tomllib.loads(pyproject.read_text())["project"]
        assert "version" not in project and "version" in project["dynamic"], pyproject


def test_every_family_and_the_meta_bound_their_tether_requirements_alike(dist):
    version = Version((REPO / "VERSION").read_text().strip())
    # the bound of the release series: this minor version, not the next
    series = SpecifierSet(f">={version.major}.{version.minor},<{version.major}.{version.minor + 1}")
    for name in ["tether", *(f"tether_{f}" for f in FAMILIES)]:
        needs = [Requirement(r) for r in metadata(dist, name).get_all("Requires-Dist", [])]
        bounded = [r for r in needs if r.name.startswith("tether")]
        assert any(r.name == "tether-core" for r in bounded), name
        for r in bounded:  # tether-core for a family; every family for the meta's extras
            assert r.specifier == series, f"{name}: {r} (VERSION is {version}: every bound is {series})"


def test_every_wheel_is_described_licensed_classified_and_typed(dist):
    root_license = (REPO / "LICENSE").read_text()
    for name in DISTS:
        meta = metadata(dist, name)
        assert meta["License-Expression"] == "MIT" and meta["License-File"] == "LICENSE", name
        assert meta["Description-Content-Type"] == "text/markdown" and len(meta.get_payload()) > 200, name
        assert "Operating System :: POSIX" in meta.get_all("Classifier", []), name
        (wheel,) = dist.glob(f"{name}-*-py3-none-any.whl")
        with zipfile.ZipFile(wheel) as z:
            names = z.namelist()
            (license_file,) = [n for n in names if n.endswith("licenses/LICENSE")]
            assert z.read(license_file).decode() == root_license, name
            if name != "tether":  # the meta-distribution has no code
                package = "tether" if name == "tether_core" else name
                assert f"{package}/py.typed" in names, name


def test_the_meta_sdist_ships_only_what_it_needs(dist):
    (sdist,) = dist.glob("tether-0*.tar.gz")
    with tarfile.open(sdist) as t:
        shipped = {
            Path(m.name).relative_to(Path(m.name).parts[0]).as_posix() for m in t.getmembers() if m.isfile()
        }
    assert shipped <= {"pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "PKG-INFO", ".gitignore"}, (
        shipped
    )
    assert {"pyproject.toml", "README.md", "LICENSE", "PKG-INFO"} <= shipped


# the heavy binaries a family's user may leave out: (family, extra, what it brings); the meta brings them
LIGHTER = [("lsp", "basedpyright", "basedpyright"), ("eval", "javascript", "deno")]


@pytest.mark.parametrize(("family", "extra", "heavy"), LIGHTER)
def test_a_heavy_binary_is_an_extra_of_its_family_that_the_meta_brings(dist, family, extra, heavy):
    needs = [Requirement(r) for r in metadata(dist, f"tether_{family}").get_all("Requires-Dist", [])]
    (dep,) = [r for r in needs if r.name == heavy]
    assert dep.marker is not None and f'extra == "{extra}"' in str(dep.marker), dep
    meta = [Requirement(r) for r in metadata(dist, "tether").get_all("Requires-Dist", [])]
    for meta_extra in (family, "all"):
        (needed,) = [
            r for r in meta if r.name == f"tether-{family}" and f'extra == "{meta_extra}"' in str(r.marker)
        ]
        assert needed.extras == {extra}, needed
