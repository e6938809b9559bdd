"""What a query reuses of the one before it, and what it must still see: the binary of a server that is
running (not looked for on PATH again), and the listing of a folder whose stamp did not change (not listed
again; its files are still stat-ed). Neither may hide a change: a file a shell adds, removes, renames or
edits in a folder listed before reaches the server, and a server that died is started from the binary
found now. Real basedpyright on a small project."""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import time

import psutil
import tether
import tether_lsp.servers
import tether_lsp.watching
from tether.testing import open_test_run
from tether_lsp.hookspecs import tether_lsp_supervisor

HOVER = {"action": "hover", "file": "pkg/main.py", "line": 4, "symbol": "greet"}
SERVER = "basedpyright-langserver"


def count_listings(monkeypatch) -> list[str]:
    """The folders the watcher lists (os.scandir called from tether_lsp.watching), in order."""
    listed: list[str] = []
    scandir = os.scandir

    def counting(path):
        frame = inspect.currentframe()
        caller = frame.f_back if frame is not None else None
        if caller is not None and caller.f_code.co_filename == tether_lsp.watching.__file__:
            listed.append(os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", counting)
    return listed


def count_binary_lookups(monkeypatch) -> list[str]:
    """The names `tether_lsp.servers.find_binary` is asked for, in order."""
    asked: list[str] = []
    find_binary = tether_lsp.servers.find_binary

    def counting(name, dirs, *, trusted=True):
        asked.append(name)
        return find_binary(name, dirs, trusted=trusted)

    monkeypatch.setattr(tether_lsp.servers, "find_binary", counting)
    return asked


async def test_a_query_on_an_unchanged_tree_neither_walks_path_nor_lists_a_folder_again(py_root, monkeypatch):
    listed = count_listings(monkeypatch)
    asked = count_binary_lookups(monkeypatch)
    async with open_test_run(py_root, only=["lsp"], plugins=[tether.files]) as run:
        assert not (await run.call("lsp", HOVER)).is_error
        assert SERVER in asked, asked
        assert str(py_root / "pkg") in listed, listed
        # the folders were written just before the server started: listed again until their stamp is
        # old enough that a later change must change it (tether.walk.settled)
        await run.call("lsp", HOVER)
        listed.clear()
        asked.clear()
        again = await run.call("lsp", HOVER)
        assert not again.is_error, again.plain
        assert asked.count(SERVER) == 0, f"the running server's binary was looked for again: {asked}"
        assert listed == [], f"an unchanged tree was listed again: {listed}"
        # a folder that changed is listed again, and only it
        (py_root / "pkg" / "extra.py").write_text("def brand_new_helper() -> int:\n    return 1\n")
        await run.call("lsp", HOVER)
    assert listed == [str(py_root / "pkg")], listed


async def test_files_created_changed_and_deleted_in_folders_already_listed_reach_the_server(
    py_root, watched_events
):
    """An entry added, removed or renamed in a folder listed before, a new folder in it, and a file
    edited in place (its folder's stamp unchanged) are each sent to the server, which then answers
    with them."""
    sent = watched_events
    pkg = py_root / "pkg"
    find = {"action": "symbols", "query": "brand_new_helper"}
    async with open_test_run(py_root, only=["lsp"], plugins=[tether.files]) as run:
        assert not (await run.call("lsp", HOVER)).is_error
        await run.call("lsp", HOVER)  # each folder listed again, its stamp now settled
        assert sent == [], sent

        (pkg / "extra.py").write_text("def brand_new_helper() -> int:\n    return 1\n")
        (pkg / "sub").mkdir()
        (pkg / "sub" / "deep.py").write_text("DEEP = 1\n")
        with (pkg / "other.py").open("a") as f:
            f.write("MORE = 2\n")
        # (workspace/symbol answers from the server's index, which takes a new file in a little later)
        found = await until(run, find, lambda plain: "pkg/extra.py" in plain)
        assert "pkg/extra.py" in found, found
        assert sorted(sent) == [("pkg/extra.py", 1), ("pkg/other.py", 2), ("pkg/sub/deep.py", 1)], sent

        sent.clear()
        (pkg / "extra.py").unlink()
        (pkg / "sub" / "deep.py").rename(pkg / "sub" / "moved.py")
        gone = await until(run, find, lambda plain: "pkg/extra.py" not in plain)
        assert "pkg/extra.py" not in gone, gone
    assert sorted(set(sent)) == [("pkg/extra.py", 3), ("pkg/sub/deep.py", 3), ("pkg/sub/moved.py", 1)], sent


async def test_a_server_that_died_is_started_from_the_binary_found_now(
    py_root, samples, no_leftover_processes
):
    """The project's own server script is run while it exists; removed, the running server goes on
    answering, and once that server dies the next query looks again and starts the interpreter's one."""
    real = tether_lsp.servers.find_binary(SERVER, [])
    assert real is not None
    own = py_root / "node_modules" / ".bin" / SERVER
    own.parent.mkdir(parents=True)
    own.write_text(f'#!/bin/sh\nexec "{real}" "$@"\n')
    own.chmod(0o755)
    async with tether.open_run(py_root) as run:
        assert run.trusted
        assert not (await run.call("lsp", HOVER)).is_error
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        assert conn.binary == str(own)

        own.unlink()
        still = await run.call("lsp", HOVER)
        assert not still.is_error, still.plain
        old = samples.pid_of(run)
        os.killpg(os.getpgid(old), signal.SIGKILL)
        psutil.Process(old).wait(5) if psutil.pid_exists(old) else None

        after = await run.call("lsp", HOVER)
        assert not after.is_error, after.plain
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        assert (conn.binary, conn.restarts) == (real, 1)
        status = await run.call("lsp", {"action": "status"})
    (based,) = [s for s in status.data["servers"] if s["id"] == "basedpyright"]
    assert based["binary"] == real, based


async def until(run, ask: dict, wanted) -> str:
    """The answer to ``ask``, asked again until ``wanted`` holds of it (at most 90 s: each call refreshes)."""
    deadline = time.monotonic() + 90
    while True:
        answer = await run.call("lsp", ask)
        assert not answer.is_error, answer.plain
        if wanted(answer.plain) or time.monotonic() > deadline:
            return answer.plain
        await asyncio.sleep(0.2)
