"""ast_grep: files walked, bad input answered in one paragraph, output bounded, results cached."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from time import time_ns

import psutil
import pytest
import tether
from tether.testing import assert_light_entry_point, assert_model_error
from tether.walk import COARSE_RACY_NS, RACY_NS
from tether_astgrep.hookspecs import tether_astgrep_parsers


async def call(root: Path, tool: str = "ast_grep", **args):
    async with tether.open_run(root) as run:
        return await run.call(tool, args)


def put(root: Path, name: str, content: str | bytes) -> Path:
    p = root / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return p


# -- registration -------------------------------------------------------------------------------------


HEAVY = ("tree_sitter", "tree_sitter_language_pack", "tree_sitter_python", "yaml")
# the family's own pattern and grammar machinery: imported at the first search, not at registration
MACHINERY = (
    "tether_astgrep.engine",
    "tether_astgrep.files",
    "tether_astgrep.grammars",
    "tether_astgrep.matcher",
    "tether_astgrep.pattern",
    "tether_astgrep.rewrite",
    "tether_astgrep.rules",
)


def test_plugin_module_imports_nothing_heavy():
    assert_light_entry_point("tether_astgrep.plugin", forbidden=HEAVY)


def test_registering_the_tools_imports_nothing_heavy(project):
    """What `tether tools` does (open a run, list its tools) loads no grammar and no ignore-file parser, nor
    the family's pattern and grammar modules (their import costs the cold start of every run)."""
    assert_light_entry_point(
        "tether",
        forbidden=HEAVY + MACHINERY,
        then=(
            "import tether\n"
            f"with tether.open_run_sync({str(project)!r}) as run:\n"
            "    assert sorted(t.name for t in run.tools() if t.family == 'astgrep') == ['ast_edit', 'ast_grep']"
        ),
    )


def test_a_pattern_search_imports_no_rule_machinery(project):
    """The rules module (and what it imports) is for rules: a fresh process's first pattern search,
    which pays every import it makes, does without it."""
    put(project, "a.py", "print(1)\n")
    assert_light_entry_point(
        "tether",
        forbidden=("tether_astgrep.rules", "yaml", "difflib"),
        then=(
            "import tether\n"
            f"with tether.open_run_sync({str(project)!r}) as run:\n"
            "    result = run.call('ast_grep', {'pattern': 'print($A)'})\n"
            "    assert not result.is_error and result.data['total'] > 0, result.plain"
        ),
    )


async def test_tools_and_tiers(project):
    async with tether.open_run(project) as run:
        tiers = {t.name: t.tier.value for t in run.tools() if t.family in ("astgrep", "core")}
    assert tiers == {"ast_grep": "read", "ast_edit": "write", "resolve": "write"}  # resolve is the core's
    async with tether.open_run(project, surface="readonly") as run:
        assert {t.name for t in run.tools() if t.family == "astgrep"} == {"ast_grep"}


async def test_run_option_turns_the_family_off(project):
    async with tether.open_run(project, options={"astgrep_enabled": False}) as run:
        assert not [t for t in run.tools() if t.family == "astgrep"]
        assert any(u.family == "astgrep" and "astgrep_enabled" in u.reason for u in run.unavailable)
        result = await run.call("ast_grep", {"pattern": "x"})
        assert result.is_error and "astgrep" in result.plain


class NoAstgrep:
    """A harness that switches the family off for its runs."""

    @tether.hookimpl(tryfirst=True)
    def tether_astgrep_parsers(self, run):
        return tether.NO_RESOURCE


async def test_harness_turns_the_family_off(project):
    async with tether.open_run(project, plugins=[NoAstgrep()]) as run:
        assert not [t for t in run.tools() if t.family == "astgrep"]
        assert any(u.family == "astgrep" for u in run.unavailable)


class OneWorker:
    """A harness that gives the run its own parser pool (one worker: search in the run's process)."""

    @tether.hookimpl(tryfirst=True)
    def tether_astgrep_parsers(self, run):
        from tether_astgrep.parsers import ParserPool

        return ParserPool(run, workers=1)


async def test_harness_overrides_the_resource(project):
    put(project, "a.py", "f(1)\n")
    async with tether.open_run(project, plugins=[OneWorker()]) as run:
        assert run.resource(tether_astgrep_parsers).workers == 1
        assert (await run.call("ast_grep", {"pattern": "f($A)"})).data["total"] == 1


# -- matching and output ------------------------------------------------------------------------------


async def test_nested_matches_in_source_order_with_positions(project):
    put(project, "a.py", "x = 1\n# é\nprint(print(1), 'é') ; print(2)\n")
    result = await call(project, pattern="print($$$A)")
    got = [(m["start"], m["end"], m["text"]) for m in result.data["matches"]]
    assert got == [
        ({"line": 3, "column": 1}, {"line": 3, "column": 21}, "print(print(1), 'é')"),
        ({"line": 3, "column": 7}, {"line": 3, "column": 15}, "print(1)"),
        ({"line": 3, "column": 24}, {"line": 3, "column": 32}, "print(2)"),
    ]
    assert result.plain.splitlines()[0] == "3 matches in 1 file (python, 1 file searched)"
    assert "a.py:3:7: print(1)" in result.plain


async def test_cap_keeps_the_exact_total(project):
    put(project, "a.py", "".join(f"f({i})\n" for i in range(30)))
    result = await call(project, pattern="f($A)", max_results=5)
    assert result.data["total"] == 30 and len(result.data["matches"]) == 5
    assert "[25 more matches not shown (showing 5 of 30)." in result.plain


async def test_big_structured_data_keeps_the_first_matches(project):
    """Past the run's output limit the data keeps a prefix of the matches (not none), and says so."""
    put(project, "a.py", "".join(f"f({i}, '{'x' * 300}')\n" for i in range(1000)))
    async with tether.open_run(project, options={"max_output_chars": 20_000}) as run:
        result = await run.call("ast_grep", {"pattern": "f($A, $B)", "max_results": 1000})
    data = result.data
    kept = len(data["matches"])
    assert data["total"] == 1000 and 20 < kept < 1000, kept
    assert [m["captures"]["A"] for m in data["matches"]] == [str(i) for i in range(kept)]
    assert f"matches: the first {kept} of 1000 kept" in data["data_cut"]


async def test_long_match_shows_first_lines(project):
    body = "".join(f"    x{i} = {i}\n" for i in range(40))
    put(project, "a.py", f"def f():\n{body}")
    result = await call(project, pattern="def $F(): $$$B")
    assert "... (38 more lines)" in result.plain
    assert len(result.plain) < 1000


async def test_huge_max_results_is_refused(project):
    put(project, "a.py", "f(1)\n")
    result = await call(project, pattern="f($A)", max_results=10**9)
    assert result.is_error and "max_results: must be at most 1000" in result.plain


@pytest.mark.parametrize("pattern", ["", "   \n "])
async def test_empty_pattern(project, pattern):
    put(project, "a.py", "f(1)\n")
    result = await call(project, pattern=pattern)
    assert result.is_error and "the pattern is empty" in result.plain


async def test_unknown_language_suggests(project):
    put(project, "a.py", "f(1)\n")
    result = await call(project, pattern="f($A)", language="pyhton")
    assert_model_error(result, "did you mean 'python'")


async def test_path_outside_root_and_missing_path(project):
    result = await call(project, pattern="f($A)", path="../..")
    assert result.is_error and "outside the root" in result.plain
    missing = await call(project, pattern="f($A)", path="nope/x.py")
    assert missing.is_error and "no such file" in missing.plain


async def test_unknown_extension_needs_language(project):
    put(project, "script.txt", "f(1)\n")
    result = await call(project, pattern="f($A)", path="script.txt")
    assert result.is_error and "pass language" in result.plain
    ok = await call(project, pattern="f($A)", path="script.txt", language="python")
    assert ok.data["total"] == 1


async def test_mixed_languages_are_each_searched_and_language_narrows(project):
    put(project, "a.py", "f(1)\n")
    put(project, "b.js", "f(1);\n")
    put(project, "c.js", "f(2);\n")
    result = await call(project, pattern="f($A)")
    assert [m["file"] for m in result.data["matches"]] == ["a.py", "b.js", "c.js"], result.plain
    assert (
        "javascript: 2 matches in 2 files, python: 1 in 1" in result.plain and "pass language" in result.plain
    )
    js = await call(project, pattern="f($A)", language="javascript")
    assert js.data["total"] == 2 and js.data["languages"] == {"javascript": 2}


async def test_binary_and_invalid_utf8_are_counted_skips(project):
    put(project, "good.py", "f(1)\n")
    put(project, "bin.py", b"f(2)\x00\x01\x02")
    put(project, "latin.py", "f('caf\xe9')\n".encode("latin-1"))
    result = await call(project, pattern="f($A)")
    assert not result.is_error
    assert result.data["total"] == 1
    assert result.data["skipped"] == {"binary": 1, "non-utf8": 1}
    assert "skipped: 1 binary, 1 non-utf8" in result.plain
    direct = await call(project, pattern="f($A)", path="latin.py")
    assert direct.data["total"] == 0 and direct.data["skipped"] == {"non-utf8": 1}


async def test_walk_honours_gitignore_and_skips_vendored_folders(project):
    put(project, ".gitignore", "build/\n*.gen.py\n")
    put(project, "src/a.py", "f(1)\n")
    put(project, "src/.gitignore", "local.py\n")
    put(project, "src/local.py", "f(2)\n")
    put(project, "build/b.py", "f(3)\n")
    put(project, "x.gen.py", "f(4)\n")
    put(project, "node_modules/m/i.py", "f(5)\n")
    put(project, ".git/hooks/h.py", "f(6)\n")
    put(project, "env/pyvenv.cfg", "home = /usr\n")
    put(project, "env/lib/s.py", "f(7)\n")
    put(project, ".hidden/h.py", "f(8)\n")
    result = await call(project, pattern="f($A)")
    assert [(m["file"], m["captures"]["A"]) for m in result.data["matches"]] == [("src/a.py", "1")]
    sub = await call(project, pattern="f($A)", path="src")
    assert [m["file"] for m in sub.data["matches"]] == ["src/a.py"]  # the root's .gitignore applies too


# -- cache and workers --------------------------------------------------------------------------------


async def test_repeated_search_is_cached_and_sees_changes(project):
    a = put(project, "a.py", "f(1)\n")
    async with tether.open_run(project) as run:
        first = await run.call("ast_grep", {"pattern": "f($A)"})
        pool = run.resource(tether_astgrep_parsers)
        assert len(pool.cache._data) == 1
        second = await run.call("ast_grep", {"pattern": "f($A)"})
        assert second.data == first.data
        a.write_text("f(1)\nf(22)\n")
        third = await run.call("ast_grep", {"pattern": "f($A)"})
        assert [m["captures"]["A"] for m in third.data["matches"]] == ["1", "22"]


def test_cache_is_bounded():
    from tether_astgrep.engine import FileResult
    from tether_astgrep.files import FileEntry
    from tether_astgrep.parsers import ResultCache

    cache = ResultCache(max_matches=100, max_patterns=3)
    for k in range(10):
        cache.put(
            ("p", k),
            [
                (FileEntry(f"/f{i}", 1, 1, 1, 1), FileResult(f"/f{i}", "searched", ((0, 1, 1, ()),) * 5))
                for i in range(4)
            ],
            began=10**12,
        )
    assert len(cache._data) <= 3 and sum(cache._weight.values()) <= 100
    assert cache.get(("p", 9), FileEntry("/f0", 1, 1, 1, 1)) is not None
    assert cache.get(("p", 9), FileEntry("/f0", 2, 1, 1, 1)) is None  # size changed: stale
    assert cache.get(("p", 9), FileEntry("/f0", 1, 1, 1, 2)) is None  # ctime moved: stale
    assert cache.get(("p", 0), FileEntry("/f0", 1, 1, 1, 1)) is None  # evicted


NOW = 1_700_000_000_123_456_789  # when a search began to read, in nanoseconds
TICK, COARSE = RACY_NS, COARSE_RACY_NS  # the walk's racy windows: 100 ms, 2 s for whole seconds


@pytest.mark.parametrize(
    ("mtime", "ctime", "kept"),
    [
        (NOW - 3600 * 10**9, NOW - 10**6, False),  # mtime put back an hour, written a millisecond before
        (NOW - 10**6, NOW - 10**6, False),
        (NOW + 10**9, NOW - 10**6, False),  # dated in the future
        (NOW - 5 * TICK, NOW - 5 * TICK, True),  # older than a tick
        (NOW - 3600 * 10**9, NOW - 5 * TICK, True),
        (NOW // 10**9 * 10**9 - 10**9, NOW - 5 * TICK, False),  # a whole-second mtime a second before
        (NOW // 10**9 * 10**9 - COARSE - 10**9, NOW - 5 * TICK, True),
    ],
)
def test_a_result_read_within_a_tick_of_its_files_stamp_is_not_kept(mtime, ctime, kept):
    """A file may change again within the tick of its clock in which it was read without its stamp moving:
    a result read then would be served for content the search never saw. The same stamp again stands for
    that change (the file system cannot tell it)."""
    from tether_astgrep.engine import FileResult
    from tether_astgrep.files import FileEntry
    from tether_astgrep.parsers import ResultCache

    cache = ResultCache()
    f = FileEntry("/f", 5, mtime, 7, ctime)
    cache.put("p", [(f, FileResult("/f", "searched", ((0, 4, 1, ()),)))], began=NOW)
    assert (cache.get("p", FileEntry("/f", 5, mtime, 7, ctime)) is not None) is kept


def cached(pool) -> set[str]:
    return {path for files in pool.cache._data.values() for path in files}


@pytest.fixture
def later(monkeypatch):
    """Set when the searches begin (as `time.time_ns()`): ``later(ns)``."""
    import types

    from tether_astgrep import parsers

    def at(ns: int) -> None:
        monkeypatch.setattr(parsers, "time", types.SimpleNamespace(time_ns=lambda: ns))

    return at


@pytest.mark.parametrize("how", ["os.utime", "cp -p", "rename"])
async def test_a_same_size_rewrite_with_its_mtime_put_back_is_searched_again(project, later, how):
    """An editor's or a tool's rewrite to the same size that restores the mtime (`touch -r`, `cp -p`,
    `rsync -t`, a checkout) keeps size, mtime and inode; the ctime moves. (A rename over it moves the inode.)"""
    a = put(project, "a.py", "f(1)\ng(2)\n")
    before = a.stat()
    later(time_ns() + 10**10)  # the file is long settled when the searches read it
    async with tether.open_run(project) as run:
        first = await run.call("ast_grep", {"pattern": "f($A)"})
        assert [(m["start"]["line"], m["captures"]["A"]) for m in first.data["matches"]] == [(1, "1")]
        assert cached(run.resource(tether_astgrep_parsers)) == {str(a)}
        if how == "os.utime":
            with a.open("r+b") as fh:  # in place: the same inode
                fh.write(b"g(1)\nf(2)\n")
            os.utime(a, ns=(before.st_atime_ns, before.st_mtime_ns))
        else:
            other = put(project.parent, "other.py", "g(1)\nf(2)\n")
            subprocess.run(["touch", "-r", str(a), str(other)], check=True)
            if how == "cp -p":
                subprocess.run(["cp", "-p", str(other), str(a)], check=True)
            else:  # an editor's save: another file renamed over it (a new inode, which the stamp has too)
                other.replace(a)
        now = a.stat()
        assert (now.st_size, now.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        assert (now.st_ino == before.st_ino) is (how != "rename")
        second = await run.call("ast_grep", {"pattern": "f($A)"})
        assert [(m["start"]["line"], m["captures"]["A"]) for m in second.data["matches"]] == [(2, "2")]


async def test_a_file_written_just_before_the_search_read_it_is_not_cached(project, later):
    """`rsync -t` writes a file and puts its old mtime back: only its ctime says it was written just now,
    within the tick in which the search reads it, and a second write in that tick would not move it."""
    a = put(project, "a.py", "f(1)\n")
    hour_ago = time_ns() - 3600 * 10**9
    os.utime(a, ns=(hour_ago, hour_ago))
    ctime = a.stat().st_ctime_ns
    async with tether.open_run(project) as run:
        pool = run.resource(tether_astgrep_parsers)
        later(ctime + 10**6)
        first = await run.call("ast_grep", {"pattern": "f($A)"})
        assert [m["captures"]["A"] for m in first.data["matches"]] == ["1"]
        assert cached(pool) == set()
        later(ctime + 10**9)  # a second later it is settled: kept
        assert (await run.call("ast_grep", {"pattern": "f($A)"})).data == first.data
        assert cached(pool) == {str(a)}


@pytest.fixture
def before_read_back(monkeypatch):
    """``before_read_back(path, change)``: ``change()`` runs once, right before the read-back of the matches
    shown (`grep._read_back`) reads ``path``: after the search read it, the window a rewrite can fall in."""
    from tether_astgrep import grep

    real = grep._read_back

    def at(path: Path, change) -> None:
        pending = [change]

        def read_back(p: str) -> bytes | None:
            if p == str(path) and pending:
                pending.pop()()
            return real(p)

        monkeypatch.setattr(grep, "_read_back", read_back)

    return at


def rewrite_keeping_the_mtime(path: Path, content: bytes) -> None:
    """In place (the same inode), to the same size, with the mtime put back: all a stamp taken within the
    tick of the search's read could show is the ctime, and within one tick that does not move either."""
    st = path.stat()
    assert len(content) == st.st_size
    with path.open("r+b") as fh:
        fh.write(content)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = path.stat()
    assert (now.st_size, now.st_mtime_ns, now.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)


async def test_a_rewrite_between_the_search_and_the_read_back_shows_what_the_file_holds_now(
    project, later, before_read_back
):
    """The search found `f(1)` at bytes 0-4 of line 1; the file then holds `g(1)` there and `f(2)` on line 2.
    The old span on the new bytes would show `g(1)` as a match of `f($A)`: the file is searched again."""
    a = put(project, "a.py", "f(1)\ng(2)\n")
    later(time_ns() + 10**10)  # settled: the result would be cached
    before_read_back(a, lambda: rewrite_keeping_the_mtime(a, b"g(1)\nf(2)\n"))
    async with tether.open_run(project) as run:
        out = await run.call("ast_grep", {"pattern": "f($A)"})
        assert out.data is not None
        assert [(m["start"]["line"], m["text"], m["captures"]["A"]) for m in out.data["matches"]] == [
            (2, "f(2)", "2")
        ]
        assert out.data["matches"][0]["byte_range"] == [5, 9]
        assert out.data["changed_while_searched"] == ["a.py"]
        assert "a.py:2:1: f(2)" in out.plain and "g(1)" not in out.plain
        assert "changed during the search, so searched again and shown as they are now: a.py" in out.plain
        assert cached(run.resource(tether_astgrep_parsers)) == set()  # its result was for other bytes
        again = await run.call("ast_grep", {"pattern": "f($A)"})
        assert again.data is not None
        assert again.data["matches"] == out.data["matches"] and "changed_while_searched" not in again.data


async def test_a_file_that_stopped_matching_during_the_search_gives_its_place_to_the_next(
    project, later, before_read_back
):
    """Searched again, a.py has no match left: the total and the matches shown (one, by max_results) are
    chosen again, so b.py's is shown and is read back in its turn."""
    a = put(project, "a.py", "f(1)\n")
    put(project, "b.py", "x = 0\nf(2)\n")
    later(time_ns() + 10**10)
    before_read_back(a, lambda: rewrite_keeping_the_mtime(a, b"g(1)\n"))
    out = await call(project, pattern="f($A)", max_results=1)
    assert out.data is not None
    assert [(m["file"], m["start"]["line"], m["text"]) for m in out.data["matches"]] == [("b.py", 2, "f(2)")]
    assert out.data["total"] == 1 and out.data["changed_while_searched"] == ["a.py"]
    assert out.plain.startswith("1 match in 1 file ") and "more matches not shown" not in out.plain


async def test_a_file_touched_during_the_search_with_its_bytes_unchanged_is_shown(project, before_read_back):
    a = put(project, "a.py", "f(1)\n")
    before_read_back(a, lambda: os.utime(a, ns=(time_ns() + 10**9, time_ns() + 10**9)))
    out = await call(project, pattern="f($A)")
    assert out.data is not None
    assert [(m["start"]["line"], m["text"]) for m in out.data["matches"]] == [(1, "f(1)")]
    assert "changed_while_searched" not in out.data


async def test_a_file_deleted_before_the_read_back_is_said_so(project, before_read_back):
    a = put(project, "a.py", "f(1)\n")
    before_read_back(a, a.unlink)
    out = await call(project, pattern="f($A)")
    assert out.data is not None
    assert out.data["matches"] == [] and out.data["total"] == 1
    assert "a.py: (deleted or unreadable since it was searched; search again)" in out.plain


async def test_a_file_swapped_for_a_fifo_before_the_read_back_is_said_so_without_waiting(
    project, before_read_back
):
    """A FIFO opened for reading waits for a writer: the read-back must never wait on one."""
    a = put(project, "a.py", "f(1)\n")

    def swap() -> None:
        a.unlink()
        os.mkfifo(a)

    before_read_back(a, swap)
    out = await asyncio.wait_for(call(project, pattern="f($A)"), 60)
    assert out.data is not None and out.data["matches"] == []
    assert "a.py: (deleted or unreadable since it was searched; search again)" in out.plain


async def test_large_search_uses_workers_and_leaves_no_process(tmp_path, no_leftover_processes):
    root = tmp_path / "big"
    body = "".join(f"def f{i}(x):\n    return g(x, {i})\n\n" for i in range(250))
    for n in range(200):  # ~1.8 MB: above the size searched in the run's own process
        put(root, f"pkg{n % 7}/m{n}.py", body)
    async with tether.open_run(root) as run:
        result = await run.call("ast_grep", {"pattern": "g($X, $N)", "max_results": 3})
        pool = run.resource(tether_astgrep_parsers)
        assert pool._pool is not None, "the search should have used the worker pool"
        workers = [p.pid for p in pool.worker_procs]
        assert len(workers) == pool.workers, "every worker process should be known to the pool"
        assert all(psutil.Process(pid).ppid() == os.getpid() for pid in workers)
        assert result.data["total"] == 200 * 250
        assert result.data["files_searched"] == 200
    assert workers and all(not Path(f"/proc/{pid}").exists() or _zombie(pid) for pid in workers)


_KILLED_SERVER = """
import asyncio, json, sys
import tether
from tether_astgrep.hookspecs import tether_astgrep_parsers

async def main():
    async with tether.open_run(sys.argv[1]) as run:
        result = await run.call("ast_grep", {"pattern": "g($X, $N)", "max_results": 1})
        pool = run.resource(tether_astgrep_parsers)
        print(json.dumps({"total": result.data["total"], "workers": [p.pid for p in pool.worker_procs]}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


def test_workers_are_stopped_when_the_server_is_killed(tmp_path):
    """SIGKILL leaves no shutdown to run: the run's keeper must know the pool's processes and stop them."""
    root = tmp_path / "big"
    body = "".join(f"def f{i}(x):\n    return g(x, {i})\n\n" for i in range(250))
    for n in range(200):
        put(root, f"m{n}.py", body)
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_SERVER, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TETHER_PLUGINS": "astgrep"},
    )
    try:
        assert proc.stdout is not None
        report = json.loads(proc.stdout.readline() or "{}")
        assert report.get("total") == 200 * 250, report
        workers = [psutil.Process(pid) for pid in report["workers"]]
        assert workers
    finally:
        proc.kill()
        proc.wait(30)
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert all(_zombie(p.pid) for p in alive), "worker processes outlived the server"


async def test_a_worker_killed_between_searches_is_replaced(tmp_path, no_leftover_processes):
    """A dead worker breaks the pool for good; the next search starts fresh workers instead of failing."""
    root = tmp_path / "big"
    body = "".join(f"def f{i}(x):\n    return g(x, {i})\n\n" for i in range(250))
    for n in range(200):
        put(root, f"m{n}.py", body)
    async with tether.open_run(root) as run:
        first = await run.call("ast_grep", {"pattern": "g($X, $N)", "max_results": 1})
        assert first.data["total"] == 200 * 250
        pool = run.resource(tether_astgrep_parsers)
        dead = pool.worker_procs[0]
        dead.kill()
        dead.wait(30)
        results = [await run.call("ast_grep", {"pattern": f"g($X, {i})", "max_results": 1}) for i in range(3)]
        for result in results:  # the pool may learn of the death while a search is under way: then that one
            if result.is_error:  # says so, and the next one starts fresh workers
                assert_model_error(result, "lost a worker process")
        assert not results[-1].is_error and results[-1].data["total"] == 200, results[-1].plain
        assert dead not in pool.worker_procs and len(pool.worker_procs) == pool.workers


_REUSED_PID = """
import asyncio, json, multiprocessing, subprocess, sys, time
import psutil, tether

async def main():
    async with tether.open_run(sys.argv[1]) as run:
        await run.call("ast_grep", {"pattern": "g($X, $N)", "max_results": 1})
        dead = psutil.Process(multiprocessing.active_children()[0].pid)  # a worker of the pool
        dead.kill()
        deadline = time.monotonic() + 30
        while psutil.pid_exists(dead.pid) and time.monotonic() < deadline:
            multiprocessing.active_children()  # reaps it, as the next search's submit would
            time.sleep(0.01)
        for _ in range(20):  # the next process this namespace starts takes the dead worker's pid
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(dead.pid - 1))
            other = subprocess.Popen(["sleep", "120"])
            if other.pid == dead.pid:
                break
            other.kill()
            other.wait()
        else:
            print(json.dumps({"reused": False}), flush=True)
            return
        try:
            results = [await run.call("ast_grep", {"pattern": f"g($X, {i})", "max_results": 1}) for i in range(2)]
            last = results[-1]
            total = None if last.is_error else last.data["total"]
            print(json.dumps({"reused": True, "alive": other.poll() is None, "total": total}), flush=True)
        finally:
            other.kill()
            other.wait()

asyncio.run(main())
"""
_NAMESPACE = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"]


def test_a_reused_pid_of_a_dead_worker_is_not_killed(tmp_path):
    """A dead worker's pid, reaped and given to an unrelated process, is not what dropping the pool stops.

    In a pid namespace of its own (nothing else takes pids there), the next process started gets the
    dead worker's pid; the next search finds the pool broken and stops its workers.
    """
    if subprocess.run([*_NAMESPACE, "true"], capture_output=True).returncode != 0:
        pytest.skip("no unprivileged user and pid namespaces here (unshare failed)")
    root = tmp_path / "big"
    body = "".join(f"def f{i}(x):\n    return g(x, {i})\n\n" for i in range(250))
    for n in range(200):
        put(root, f"m{n}.py", body)
    out = subprocess.run(
        [*_NAMESPACE, sys.executable, "-c", _REUSED_PID, str(root)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TETHER_PLUGINS": "astgrep"},
    )
    report = json.loads(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "{}")
    assert report.get("reused"), (out.stdout, out.stderr)
    assert report["alive"], "dropping the broken pool killed the process that reused a dead worker's pid"
    assert report["total"] == 200, "the search after the drop should run on fresh workers"


_REAPED_ELSEWHERE = """
import asyncio, json, os, signal, sys, threading, time
import tether
from tether_astgrep.hookspecs import tether_astgrep_parsers

async def main():
    async with tether.open_run(sys.argv[1], options={"astgrep_workers": 2}) as run:
        pool = run.resource(tether_astgrep_parsers)
        for attempt in range(8):  # until this code, not the pool's thread, reaps the killed worker
            await run.call("ast_grep", {"pattern": f"g($X, {attempt})", "max_results": 1})
            dead, stopped = (p.pid for p in pool.worker_procs)
            os.kill(stopped, signal.SIGSTOP)  # it takes no more work: the next search's chunks stay queued
            os.kill(dead, signal.SIGSTOP)
            search = asyncio.create_task(run.call("ast_grep", {"pattern": "g($X, $N)", "max_results": 1}))
            queue = None
            deadline = time.monotonic() + 60
            while not (queue is not None and queue.full()) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
                queue = getattr(pool._pool, "_call_queue", None)
            os.kill(dead, signal.SIGKILL)
            try:  # reaped by this process's code, not by multiprocessing (a library, a SIGCHLD handler)
                reaped = os.waitpid(dead, 0)[0] == dead
            except ChildProcessError:  # the pool's thread was first
                reaped = False
            broken = await search
            if reaped:
                break
        after = await run.call("ast_grep", {"pattern": "g($X, 2)", "max_results": 1})
    deadline = time.monotonic() + 60
    def managers():
        return [t for t in threading.enumerate() if type(t).__name__ == "_ExecutorManagerThread"]
    while managers() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    print(json.dumps({"queued": bool(queue and queue.full()), "reaped": reaped, "broken": broken.plain.splitlines()[0],
                      "after": None if after.is_error else after.data["total"], "managers": len(managers())}), flush=True)

asyncio.run(main())
os._exit(0)  # a manager thread left running would make the interpreter's exit wait for it forever
"""


def test_a_worker_reaped_elsewhere_leaves_no_pool_thread_running(tmp_path):
    """A worker killed and reaped by other code of the process while a search's chunks are queued.

    multiprocessing then takes it for alive forever (its waitpid finds no such child), and the pool's
    manager thread looped for good, 100% CPU, trying to queue a stop sentinel for it: the process
    could never exit. The search says it lost a worker; the next one runs on fresh workers; after the
    run's close no thread of the pool is left.
    """
    root = tmp_path / "big"
    body = "".join(f"def f{i}(x):\n    return g(x, {i})\n\n" for i in range(250))
    for n in range(200):
        put(root, f"m{n}.py", body)
    try:
        out = subprocess.run(
            [sys.executable, "-c", _REAPED_ELSEWHERE, str(root)],
            capture_output=True,
            text=True,
            timeout=100,
            env={**os.environ, "TETHER_PLUGINS": "astgrep"},
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the process did not end: the pool's shutdown hung ({exc.stdout!r})")
    report = json.loads(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "{}")
    assert report.get("queued") and report["reaped"], (out.stdout, out.stderr)
    assert "lost a worker process" in report["broken"], report
    assert report["after"] == 200, report
    assert report["managers"] == 0, "the worker pool's manager thread outlived the run's close"


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


async def test_a_search_that_outlives_its_bound_is_stopped(tmp_path, no_leftover_processes):
    root = tmp_path / "big"
    body = "".join(f"def f{i}(x):\n    return g(x, {i})\n\n" for i in range(250))
    for n in range(200):
        put(root, f"m{n}.py", body)
    async with tether.open_run(root, options={"astgrep_timeout": 0.001}) as run:
        result = await run.call("ast_grep", {"pattern": "g($X, $N)"})
        assert (
            result.is_error and "took longer than 0.001 s" in result.plain and "narrower path" in result.plain
        )
        pool = run.resource(tether_astgrep_parsers)
        assert pool._pool is None and pool.cache._data == {}
        small = await run.call("ast_grep", {"pattern": "g($X, $N)", "path": "m1.py", "max_results": 1})
        assert small.data["total"] == 250  # the run still works


async def test_any_language_pack_grammar_by_id(project):
    put(project, "app.rb", 'def hi(name)\n  puts "hi #{name}"\nend\nputs 1\n')
    result = await call(project, pattern="puts $A", language="ruby")
    assert not result.is_error, result.plain
    assert [m["captures"]["A"] for m in result.data["matches"]] == ['"hi #{name}"', "1"]
    unknown = await call(project, pattern="x", language="cobol-85")
    assert unknown.is_error and "tree-sitter-language-pack" in unknown.plain


async def test_hints_for_the_model(project):
    put(project, "A.java", "class A {\n  public void run() {}\n}\n")
    member = await call(project, pattern="public void $M() {}")
    assert "pattern read as a class member" in member.plain.splitlines()[0]
    put(project, "a.js", "f(1);\n")
    lower = await call(project, pattern="f($a)", path="a.js")
    assert lower.data["total"] == 0 and "metavariables are uppercase" in lower.plain
    put(project, "a.py", "f(1)\n")
    unparsed = await call(project, pattern="f($a)", path="a.py")
    assert unparsed.is_error and "metavariables are uppercase" in unparsed.plain


async def test_indented_multi_line_pattern_is_dedented(project):
    put(project, "a.py", "def f():\n    if x:\n        a()\n")
    result = await call(project, pattern="        if $C:\n            a()\n")
    assert [m["captures"]["C"] for m in result.data["matches"]] == ["x"]
