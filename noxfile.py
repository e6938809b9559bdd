"""Test sessions: the core alone, the core with each single family, everything; and lint.

uvx nox -s core            # core tests with no family installed
uvx nox -s "family(family='lsp')"   # core + one family from their built wheels, that family's tests
uvx nox -s all             # the whole workspace, as CI runs it
uvx nox -s lint
"""

from __future__ import annotations

import os
import shutil
import tomllib
from pathlib import Path

import nox
from packaging.requirements import Requirement

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["core", "family", "lint"]

ROOT = Path(__file__).resolve().parent
# the families: every plugins/<family>/pyproject.toml (tests/core/test_wiring.py holds the root to them)
FAMILIES = sorted(p.parent.name for p in ROOT.glob("plugins/*/pyproject.toml"))
TEST_DEPS = ["pytest>=8", "pytest-asyncio>=0.24", "pytest-timeout>=2.3", "hypothesis>=6.100"]


def family_extras(family: str) -> str:
    """The family's own extras its tests need: what the root's `tether[<family>]` installs of it."""
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    wanted = [Requirement(r) for r in root.get(family, [])]
    extras = sorted({e for r in wanted if r.name == f"tether-{family}" for e in r.extras})
    return f"[{','.join(extras)}]" if extras else ""


# what some families' tests drive besides the family itself
EXTRA = {
    "astgrep": ["ast-grep-cli>=0.30", "tree-sitter-python>=0.23"],
    "eval": ["pandas>=2", "matplotlib>=3.8"],
    "lsp": ["ty"],
}


@nox.session(python="3.11")
def core(session: nox.Session) -> None:
    """The core with no family installed: discovery, surfaces, arguments, diagnostics wrapping, host."""
    session.install("-e", "core[mcp]", *TEST_DEPS)
    session.run("pytest", "tests/core", *session.posargs)


@nox.session(python="3.11")
@nox.parametrize("family", FAMILIES)
def family(session: nox.Session, family: str) -> None:
    """The core with exactly one family, from their built wheels: proves each distribution stands alone."""
    dist = Path(session.create_tmp()) / "dist"
    shutil.rmtree(dist, ignore_errors=True)  # only this build's wheels
    session.run(
        "uv", "build", "--quiet", "--wheel", "--package", "tether-core", "-o", str(dist), external=True
    )
    session.run(
        "uv", "build", "--quiet", "--wheel", "--package", f"tether-{family}", "-o", str(dist), external=True
    )
    (core,) = dist.glob("tether_core-*.whl")
    (wheel,) = dist.glob(f"tether_{family}-*.whl")
    # the wheel files, not the workspace (and never a namesake from an index)
    session.install(f"{core}[mcp]", f"{wheel}{family_extras(family)}", *TEST_DEPS, *EXTRA.get(family, []))
    session.run("pytest", "tests/core", f"tests/{family}", *session.posargs)


@nox.session(python=False)
def all(session: nox.Session) -> None:  # the session's name on the command line
    """Everything, through the workspace's lock file (what CI runs)."""
    session.run("uv", "run", "--frozen", "pytest", *session.posargs, external=True)


LINTED = ("core", "plugins", "tests", "benchmarks", "scripts", "noxfile.py")


@nox.session(python=False)
def lint(session: nox.Session) -> None:
    """The gates .ci/run runs before the tests: ruff's format and rule set, basedpyright at "standard"
    (pyproject.toml holds their configuration, uv.lock their versions), and the architecture gate."""
    uv = (os.environ.get("UV") or "uv", "run", "--frozen")
    session.run(*uv, "ruff", "format", "--check", *LINTED, external=True)
    session.run(*uv, "ruff", "check", *LINTED, external=True)
    session.run(*uv, "basedpyright", external=True)
    # the doors ruff cannot name (string option reads, family=, dict ToolErrors, hand-written traceback
    # checks), module sizes and import cycles: a syntax-tree reading of the families, in about a second
    session.run(
        *uv,
        "pytest",
        "-q",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
        "tests/core/test_architecture.py",
        external=True,
    )
