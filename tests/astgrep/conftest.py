"""Fixtures of the astgrep tests: the ast-grep CLI (the anchor) and a project in tmp_path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import require_binary


def _sg_path() -> str:
    beside = Path(sys.executable).parent / "ast-grep"  # the ast-grep-cli wheel puts it beside python
    if beside.exists():
        return str(beside)
    return require_binary("ast-grep", "sg")


@pytest.fixture(scope="session")
def sg_binary() -> str:
    """The ast-grep CLI's path (uv.lock's ast-grep-cli)."""
    return _sg_path()


@pytest.fixture(scope="session")
def sg():
    """Call ``sg(pattern, path, lang, rewrite=None, update=False)`` to run the ast-grep CLI."""
    binary = _sg_path()
    return lambda *a, **k: _run_sg(binary, *a, **k)


def _run_sg(
    sg: str, pattern: str, path: Path, lang: str, rewrite: str | None = None, update: bool = False
) -> list[dict]:
    """ast-grep's matches as JSON objects (with --rewrite, its replacements)."""
    cmd = [sg, "run", "-p", pattern, "-l", lang, "--json=stream"]
    if rewrite is not None:
        cmd += ["-r", rewrite]
    if update:
        cmd = [sg, "run", "-p", pattern, "-l", lang, "-r", rewrite or "", "-U"]
    cmd.append(str(path))
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=60, env={**os.environ, "NO_COLOR": "1"}, check=False
    )
    # exit 1 is "no match" and a pattern ast-grep cannot parse finds nothing there either; any other
    # failure (a bad flag, an unreadable path) must not pass as an empty result
    refused = "Cannot parse query as a valid pattern" in proc.stderr
    assert refused or (proc.returncode in (0, 1) and "error" not in proc.stderr.lower()), (
        f"ast-grep failed (exit {proc.returncode}): {proc.stderr.strip()}"
    )
    if update:
        return []
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def sg_scan():
    """Call ``sg_scan(config, path, update=False)`` to run ``ast-grep scan --inline-rules`` (config: a dict,
    or a rule file's YAML text, given to ast-grep as it is)."""
    binary = _sg_path()

    def scan(config: dict | str, path: Path, update: bool = False) -> list[dict]:
        inline = config if isinstance(config, str) else json.dumps({"id": "t", **config})
        cmd = [binary, "scan", "--inline-rules", inline]
        cmd += ["-U", str(path)] if update else ["--json=stream", str(path)]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=60, env={**os.environ, "NO_COLOR": "1"}, check=False
        )
        assert proc.returncode in (0, 1) and "error" not in proc.stderr.lower(), (
            f"ast-grep scan failed (exit {proc.returncode}): {proc.stderr.strip()}"
        )
        return [] if update else [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    return scan


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    return root


@pytest.fixture(scope="module", autouse=True)
def only_this_family():
    """Load only the astgrep family: its tests must not depend on the other families' state."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TETHER_PLUGINS", "astgrep")
        yield
