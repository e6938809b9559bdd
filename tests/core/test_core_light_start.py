"""`tether tools` with every family installed does what a listing needs and nothing a call needs.

Speed itself is measured in benchmarks/core_bench.py; these tests pin what must stay out of a cold
start, and that deferring imports never changes what the listing says.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tether.testing import assert_light_entry_point

# what only a call needs: the strict converter, a write's threads, process control, patch parsing, and
# the machinery behind the tools of the families whose registration the core's light start covers
CALL_ONLY = (
    "asyncio",  # the listing runs no event loop (tether.list_tools); with it go ssl and socket
    "ssl",
    "cattrs",
    "concurrent.futures.thread",
    "tether.procs",
    "tether.relay",
    "tether.egress",  # the sandbox's proxy: only a run that lists names to reach starts it
    "unidiff",
    "tether.patch",  # apply_patch's parser and applier
    "_hashlib",  # OpenSSL: the digests of writes and of the root's state folder use CPython's own sha256
    "psutil",
    "yaml",
    "markdownify",
    "jupyter_client",
    "zmq",
    "debugpy",
    "tether_askuser.port",
    "tether_askuser.terminal",
    "tether_askuser.card",
    "tether_eval.kernel",
    "tether_eval.cell",
    "tether_eval.cell_end",
    "tether_eval.timing",
    "tether_eval.render",
    "tether_debug.session",
    "tether_debug.dap",
    "tether_debug.adapters",
    "tether_debug.build",
    "tether_debug.output",
    "tether_debug.breakpoints",
    # each tool's code, past the arguments the listing needs (`tether_lsp.args`, `tether_astgrep.args`)
    "tether_lsp.common",
    "tether_lsp.positions",
    "tether_lsp.rename",
    "tether_lsp.move",
    "tether_lsp.fix",
    "tether_astgrep.grep",
    "tether_astgrep.edit",
    "tether_astgrep.query",
    "tether_vibe.config",
    "tether_vibe.roster",
    "tether_vibe.command_roster",
    "tether_vibe.isolation",
    "tether_vibe.merge",
    "tether_vibe.worker",
)


def _tools(root, *preload: str) -> subprocess.CompletedProcess[str]:
    """`tether tools --json` in a fresh interpreter, after importing those of ``preload`` that exist."""
    code = (
        "import importlib, importlib.util, sys\n"
        f"there = [n for n in {list(preload)!r} if importlib.util.find_spec(n) is not None]\n"
        f"assert len(there) * 2 >= {len(preload)}, f'most of the modules to preload are gone: {{there}}'\n"
        "for name in there:\n"
        "    importlib.import_module(name)\n"
        f"from tether.cli import main\nsys.exit(main(['tools', '--json', '--root', {str(root)!r}]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TETHER_PLUGINS", "TETHER_BLOCK_PLUGINS")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


def test_tether_tools_imports_nothing_that_only_a_call_needs(tmp_path):
    assert_light_entry_point(
        "tether.cli",
        forbidden=CALL_ONLY,
        then=(
            "import contextlib, io\n"
            "from tether.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert main(['tools', '--root', {str(tmp_path)!r}]) == 0"
        ),
    )


def test_the_listing_is_the_same_when_the_call_machinery_is_already_loaded(tmp_path):
    # a family that defers its imports must still describe its tools and options exactly as before:
    # the listing of a cold start and of a process that already imported all of CALL_ONLY agree
    cold = _tools(tmp_path)
    assert cold.returncode == 0, cold.stderr
    warm = _tools(tmp_path, *CALL_ONLY)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout == cold.stdout


def test_tether_tools_reads_no_distribution_metadata_once_the_plugins_are_remembered(tmp_path, monkeypatch):
    # importlib.metadata (email, zipfile, csv, ...) is only needed to find the installed plugins, and
    # they are remembered; the first listing remembers them once the environment has been quiet 2 s
    # (uv hard-links installed files, so another environment installing the same package may change
    # their change time: the listing is retried until one was remembered, within a generous bound)
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv("TETHER_NO_PLUGIN_CACHE", raising=False)
    listing = (
        "import contextlib, io\n"
        "from tether.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['tools', '--root', {str(tmp_path)!r}]) == 0"
    )
    deadline = time.monotonic() + 90
    while True:
        assert_light_entry_point("tether.cli", forbidden=(), then=listing)
        try:
            assert_light_entry_point("tether.cli", forbidden=("importlib.metadata",), then=listing)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def test_the_console_script_freezes_the_heap_for_its_exit_and_main_leaves_the_collector_as_found(tmp_path):
    # the console script's exit skips the collector's sweeps of what the families made (`console`);
    # `main`, which harnesses and tests call in their own process, changes nothing of the collector
    code = (
        "import contextlib, gc, io, sys\n"
        "import tether.cli\n"
        "gc.set_threshold(700, 10, 10)\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert tether.cli.main(['tools', '--root', {str(tmp_path)!r}]) == 0\n"
        "assert gc.get_threshold() == (700, 10, 10), gc.get_threshold()\n"
        "assert gc.get_freeze_count() == 0\n"
        f"sys.argv = ['tether', 'tools', '--root', {str(tmp_path)!r}]\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert tether.cli.console() == 0\n"
        "assert gc.get_threshold() == (700, 10, 10), gc.get_threshold()\n"
        "print(gc.get_freeze_count())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 1000  # the families' modules, classes and functions


def test_the_installed_console_script_is_the_freezing_one():
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for pyproject in (root / "pyproject.toml", root / "core" / "pyproject.toml"):
        scripts = tomllib.loads(pyproject.read_text())["project"]["scripts"]
        assert scripts["tether"] == "tether.cli:console", pyproject
