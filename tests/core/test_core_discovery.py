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
from tether.plugins import ENV_NO_CACHE, QUIET_NS

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
        self.cache = tmp_path / "cache"  # the user's cache directory: it exists, as the cache asks
        self.cache.mkdir()
        self.env: dict[str, str] = {}

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
            "from tether.plugins import _fingerprint, _newest_change\nprint(_newest_change(_fingerprint()))\n"
        )
        wait = (int(newest) + QUIET_NS - time.time_ns()) / 1e9
        assert wait < 30, "the interpreter's own sys.path folders keep changing"
        time.sleep(max(wait, 0) + 0.1)

    def _run(self, code: str) -> str:
        env = {
            **{k: v for k, v in os.environ.items() if k not in ("TETHER_PLUGINS", "TETHER_BLOCK_PLUGINS")},
            "XDG_CACHE_HOME": str(self.cache),
            "PYTHONPATH": str(self.path),
            **self.env,
        }
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, cwd=self.path
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    def remembered(self) -> dict:
        """Settle, then find twice: the second find uses the answer the first remembered. Retried a few
        times: uv hard-links installed files from its cache, so another environment installing or
        removing the same package changes their change time, and the next process must read again."""
        for _ in range(5):
            self.settle()
            self.find()
            answer = self.find()
            if not answer["read_metadata"]:
                return answer
        raise AssertionError("a quiet installation was never remembered")

    def find(self, before: str = "") -> dict:
        """What a fresh interpreter found (after running ``before``), and whether it read the metadata."""
        answer = json.loads(self._run(before + FIND))
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
    assert site.names(site.remembered()) == ["t_one"]

    # a distribution installed
    two = site.install("t_two", "tether_test_typo:Plugin")
    assert site.names(site.find()) == ["t_one", "t_two"]
    assert site.names(site.remembered()) == ["t_one", "t_two"]

    # an entry_points.txt edited in place, even one of the same size dated back as if nothing happened
    entry_points = two / "entry_points.txt"
    before = entry_points.stat()
    entry_points.write_text("[tether]\nt_owt = tether_test_typo:Plugin\n")
    os.utime(entry_points, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = entry_points.stat()
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (
        before.st_mtime_ns,
        before.st_size,
        before.st_ino,
    )
    assert site.names(site.find()) == ["t_one", "t_owt"]

    # an entry_points.txt added to a distribution that had none
    entry_points.unlink()
    site.settle()
    assert site.names(site.find()) == ["t_one"]
    entry_points.write_text("[tether]\nt_back = tether_test_typo\n")
    assert site.names(site.find()) == ["t_back", "t_one"]

    # a distribution removed
    shutil.rmtree(two)
    assert site.names(site.find()) == ["t_one"]


def test_files_coming_and_going_beside_the_distributions_keep_the_answer(site):
    # `python -m tether.cli` puts the working folder, a project whose files change all the time, first on
    # sys.path: only a distribution added to or removed from a folder makes the metadata be read again
    site.install("t_one", "tether_test_procfam")
    assert site.names(site.remembered()) == ["t_one"]
    (site.path / "notes.py").write_text("x = 1\n")
    answer = site.find()
    assert site.names(answer) == ["t_one"] and not answer["read_metadata"]
    (site.path / "notes.py").unlink()
    answer = site.find()
    assert site.names(answer) == ["t_one"] and not answer["read_metadata"]
    site.install("t_two", "tether_test_typo:Plugin")
    answer = site.find()
    assert site.names(answer) == ["t_one", "t_two"] and answer["read_metadata"]


def test_nothing_is_remembered_while_the_installation_is_changing(site):
    fresh = site.install("t_fresh", "tether_test_procfam")  # a change in the same clock tick would not show
    # dated ahead, so it stays "just changed" however long the loaded machine takes to start the finds
    ahead = time.time() + 600
    for path in [site.path, fresh, *fresh.iterdir()]:
        os.utime(path, (ahead, ahead))
    assert site.find()["read_metadata"]
    assert site.find()["read_metadata"]
    assert not site.cache.exists() or not list(site.cache.rglob("entry-points-*.json"))


def test_a_damaged_or_unwritable_cache_is_no_cache(site):
    site.install("t_one", "tether_test_procfam")
    site.remembered()
    (remembered,) = site.cache.rglob("entry-points-*.json")
    remembered.write_text('{"fingerprint": ')
    answer = site.find()
    assert site.names(answer) == ["t_one"] and answer["read_metadata"]
    shutil.rmtree(site.cache)
    site.cache.write_text("a file where the cache folder would be")
    answer = site.find()
    assert site.names(answer) == ["t_one"] and answer["read_metadata"]


def test_a_deleted_working_folder_is_read_as_empty(site, tmp_path):
    # `python -c` and Jupyter put '' (the working folder) on sys.path; it may be gone
    gone = str(tmp_path / "gone")
    leave = (
        f"import os, sys\nos.mkdir({gone!r})\nos.chdir({gone!r})\nos.rmdir({gone!r})\nassert '' in sys.path\n"
    )
    site.install("t_one", "tether_test_procfam")
    site.settle()
    assert site.names(site.find(leave)) == ["t_one"]
    assert site.names(site.find(leave)) == ["t_one"]


@pytest.mark.parametrize("home", ["relcache", ""])
def test_no_cache_in_a_relative_folder(site, tmp_path, home):
    # a relative XDG_CACHE_HOME is ignored (the XDG spec); a home that is not absolute ("~" itself, with
    # no HOME and no passwd entry) means no cache, never a literal ./~/.cache in the working folder
    site.env = {"XDG_CACHE_HOME": "relcache", "HOME": str(tmp_path / "home")}
    (tmp_path / "home" / ".cache").mkdir(parents=True)
    if not home:
        site.env = {"XDG_CACHE_HOME": "relcache", "HOME": "~"}
    site.install("t_one", "tether_test_procfam")
    if home:
        assert site.names(site.remembered()) == ["t_one"]
        assert len(list((tmp_path / "home" / ".cache").rglob("entry-points-*.json"))) == 1
    else:
        site.settle()
        for _ in range(2):
            assert site.find()["read_metadata"]
        assert not list((tmp_path / "home").rglob("entry-points-*.json"))
    assert not any(p.name in ("relcache", "~") for p in site.path.rglob("*"))


def test_no_cache_when_turned_off_or_the_cache_folder_is_not_there_or_not_ours(site, tmp_path):
    site.install("t_one", "tether_test_procfam")
    site.settle()
    site.env = {ENV_NO_CACHE: "1"}
    for _ in range(2):
        assert site.find()["read_metadata"]
    assert not list(site.cache.rglob("*"))

    # no ~/.cache: not made (under sudo with HOME kept it would belong to root)
    site.env = {"XDG_CACHE_HOME": "", "HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    for _ in range(2):
        assert site.find()["read_metadata"]
    assert not (tmp_path / "home" / ".cache").exists()

    # a cache folder of another user's: neither read nor written
    site.env = {}
    site.remembered()
    owner = f"import os\nos.geteuid = lambda: os.stat({str(site.cache)!r}).st_uid + 1\n"
    (remembered,) = site.cache.rglob("entry-points-*.json")
    written = remembered.stat().st_mtime_ns
    remembered.write_text('{"fingerprint": [], "entry_points": []}')  # planted: would say nothing is there
    os.utime(remembered, ns=(written, written))
    answer = site.find(owner)
    assert site.names(answer) == ["t_one"] and answer["read_metadata"]
    assert remembered.read_text() == '{"fingerprint": [], "entry_points": []}'


def test_a_killed_writers_leftover_is_removed_by_the_next_writer(site):
    site.install("t_one", "tether_test_procfam")
    site.settle()
    (site.cache / "tether").mkdir()
    stale = site.cache / "tether" / "entry-points-0123.json.99999.tmp"
    fresh = site.cache / "tether" / "entry-points-0123.json.99998.tmp"  # perhaps being written now
    stale.write_text('{"fingerp')
    fresh.write_text('{"fingerp')
    past = time.time() - 120
    os.utime(stale, (past, past))
    site.remembered()
    assert len(list(site.cache.rglob("entry-points-*.json"))) == 1
    assert not stale.exists() and fresh.exists()
