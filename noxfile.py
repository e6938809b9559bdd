"""Test sessions: the core alone, the core with each single family, everything; and lint.

uvx nox -s core            # core tests with no family installed
uvx nox -s "family(family='lsp')"   # core + one family from their built wheels, that family's tests
uvx nox -s all             # the whole workspace, as CI runs it
uvx nox -s lint
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["core", "family", "lint"]

FAMILIES = ["lsp", "astgrep", "debug", "eval", "askuser", "vibe"]
TEST_DEPS = ["pytest>=8", "pytest-asyncio>=0.24", "pytest-timeout>=2.3", "hypothesis>=6.100"]
# the family's own extras its tests need (what `tether[<family>]` installs)
FAMILY_EXTRAS = {"lsp": "[basedpyright]", "eval": "[javascript]"}
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
    session.install(
        f"{core}[mcp]", f"{wheel}{FAMILY_EXTRAS.get(family, '')}", *TEST_DEPS, *EXTRA.get(family, [])
    )
    session.run("pytest", "tests/core", f"tests/{family}", *session.posargs)


@nox.session(python=False)
def all(session: nox.Session) -> None:  # the session's name on the command line
    """Everything, through the workspace's lock file (what CI runs)."""
    session.run("uv", "run", "--frozen", "pytest", *session.posargs, external=True)


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "core", "plugins", "tests", "benchmarks", "noxfile.py")
