"""Installed plugins are remembered across processes, and every change to what is installed is seen.

Each step runs a fresh interpreter (as each `tether tools` is) with its own cache directory and a
site folder of throwaway distributions, and checks what it found against `importlib.metadata`'s own
answer for the same sys.path, and whether it had to read the metadata to find it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tether.plugins import QUIET_NS

FIND = (
    "import json, sys\n"
    "from tether.plugins import discovered_entry_points\n"
    "found = [[ep.name, ep.module, ep.attr] for ep in discovered_entry_points()]\n"
    "read = 'importlib.metadata' in sys.modules\n"
    "from importlib import metadata\n"
    "truth = sorted([ep.name, ep.module, ep.attr] for ep in metadata.entry_points(group='tether'))\n"
    "print(json.dumps({'found': found, 'truth': truth, 'read_metadata': read}))\n"
)


class Site:
    """A folder on sys.path holding distributions with `tether` entry points, and the cache of a user."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "site"
        self.path.mkdir()
        self.cache = tmp_path / "cache"

    def install(self, name: str, value: str) -> Path:
        dist = self.path / f"tether_test_{name}-0.0.0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tether-test-{name}\nVersion: 0.0.0\n")
        (dist / "entry_points.txt").write_text(f"[tether]\n{name} = {value}\n")
        return dist

    def settle(self) -> None:
        """Date the site back a minute, and wait until the rest of the child's sys.path has been quiet
        as long as the cache asks (a folder that just changed, the environment's own, is not trusted)."""
        past = time.time() - 60
        for path in [self.path, *self.path.rglob("*")]:
            os.utime(path, (past, past))
        newest = self._run(
            "from tether.plugins import _fingerprint\n"
            "print(max(st[0] for item in _fingerprint() for st in item[1:] if st is not None))\n"
        )
        wait = (int(newest) + QUIET_NS - time.time_ns()) / 1e9
        assert wait < 30, "the interpreter's own sys.path folders keep changing"
        time.sleep(max(wait, 0) + 0.1)

    def _run(self, code: str) -> str:
        env = {
            **{k: v for k, v in os.environ.items() if k not in ("TETHER_PLUGINS", "TETHER_BLOCK_PLUGINS")},
            "XDG_CACHE_HOME": str(self.cache),
            "PYTHONPATH": str(self.path),
        }
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, cwd=self.path
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    def find(self) -> dict:
        answer = json.loads(self._run(FIND))
        assert answer["found"] == answer["truth"]  # whether remembered or read, never another answer
        return answer

    def names(self, answer: dict) -> list[str]:
        return [name for name, *_ in answer["found"] if name.startswith("t_")]


@pytest.fixture
def site(tmp_path) -> Site:
    return Site(tmp_path)


def test_a_quiet_installation_is_remembered_and_every_change_to_it_is_seen(site):
    site.install("t_one", "tether_test_procfam")
    site.settle()
    first = site.find()
    assert site.names(first) == ["t_one"] and first["read_metadata"]
    again = site.find()
    assert site.names(again) == ["t_one"] and not again["read_metadata"]  # remembered

    # a distribution installed
    two = site.install("t_two", "tether_test_typo:Plugin")
    assert site.names(site.find()) == ["t_one", "t_two"]
    site.settle()
    site.find()
    assert not site.find()["read_metadata"]

    # an entry_points.txt edited in place, even one dated back as if nothing happened
    (two / "entry_points.txt").write_text("[tether]\nt_renamed = tether_test_typo\n")
    past = time.time() - 60
    os.utime(two / "entry_points.txt", (past, past))
    assert site.names(site.find()) == ["t_one", "t_renamed"]

    # an entry_points.txt added to a distribution that had none
    (two / "entry_points.txt").unlink()
    site.settle()
    assert site.names(site.find()) == ["t_one"]
    (two / "entry_points.txt").write_text("[tether]\nt_back = tether_test_typo\n")
    assert site.names(site.find()) == ["t_back", "t_one"]

    # a distribution removed
    shutil.rmtree(two)
    assert site.names(site.find()) == ["t_one"]


def test_nothing_is_remembered_while_the_installation_is_changing(site):
    site.install("t_fresh", "tether_test_procfam")  # just now: a change in the same clock tick would not show
    assert site.find()["read_metadata"]
    assert site.find()["read_metadata"]
    assert not site.cache.exists() or not list(site.cache.rglob("entry-points-*.json"))


def test_a_damaged_or_unwritable_cache_is_no_cache(site):
    site.install("t_one", "tether_test_procfam")
    site.settle()
    site.find()
    (remembered,) = site.cache.rglob("entry-points-*.json")
    remembered.write_text('{"fingerprint": ')
    answer = site.find()
    assert site.names(answer) == ["t_one"] and answer["read_metadata"]
    shutil.rmtree(site.cache)
    site.cache.write_text("a file where the cache folder would be")
    answer = site.find()
    assert site.names(answer) == ["t_one"] and answer["read_metadata"]
