"""Installed the way MCP servers are: `uv tool install 'tether[astgrep]'` and `uvx --from 'tether[all]'
tether serve` from this checkout, and a core installed without the `mcp` extra."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from support import IN_CI
from tether.testing import assert_no_traceback

CHECKOUT = Path(__file__).resolve().parents[2]


@pytest.fixture
def uv(tmp_path):
    """The uv binary (`uv run` names itself in $UV) with tool directories of this test's own."""
    found = os.environ.get("UV") or shutil.which("uv")
    if not found:
        if IN_CI:
            pytest.fail("uv is not on PATH")
        pytest.skip("uv is not on PATH")
    env = dict(os.environ, UV_TOOL_DIR=str(tmp_path / "tools"), UV_TOOL_BIN_DIR=str(tmp_path / "bin"))
    for leak in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONPATH"):
        env.pop(leak, None)

    def run(*args, **kwargs):
        return subprocess.run([found, *args], capture_output=True, text=True, timeout=600, env=env, **kwargs)

    return run


def test_version():
    out = subprocess.run(
        [sys.executable, "-m", "tether.cli", "--version"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stdout == f"tether {version('tether-core')}\n"


@pytest.mark.slow
def test_uv_tool_install_of_the_meta_distribution_provides_the_script(uv, tmp_path):
    installed = uv("tool", "install", f"{CHECKOUT}[astgrep]")
    assert installed.returncode == 0, installed.stderr
    assert "Installed 1 executable: tether" in installed.stderr
    tether = tmp_path / "bin" / "tether"
    listing = subprocess.run(
        [tether, "tools", "--root", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert listing.returncode == 0 and "ast_grep [read] (astgrep)" in listing.stdout


@pytest.mark.slow
def test_uvx_from_the_meta_distribution_runs_without_a_warning(uv, tmp_path):
    out = uv("tool", "run", "--from", f"{CHECKOUT}[all]", "tether", "--version", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"tether {version('tether-core')}\n"
    assert "warning" not in out.stderr.lower(), out.stderr


@pytest.mark.slow
def test_serve_without_the_mcp_extra_names_the_extra(uv, tmp_path):
    venv = tmp_path / "venv"
    assert uv("venv", "--python", sys.executable, str(venv)).returncode == 0
    core = uv("pip", "install", "--python", str(venv / "bin" / "python"), str(CHECKOUT / "core"))
    assert core.returncode == 0, core.stderr
    tether = venv / "bin" / "tether"
    tools = subprocess.run(
        [tether, "tools", "--root", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert tools.returncode == 0 and "read [read] (files)" in tools.stdout  # the core alone works
    serve = subprocess.run(
        [tether, "serve", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert serve.returncode == 2
    assert "install the mcp extra, e.g. pip install 'tether-core[mcp]'" in serve.stderr
    assert serve.stderr.count("\n") == 1
    assert_no_traceback(serve.stderr, "stderr")
