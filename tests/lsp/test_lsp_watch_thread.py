"""The file watcher's scan of the tree runs in a thread, never on the event loop (a big tree must not
stall every other call of the run), and still tells the server about a file changed behind its back:
every file the server may analyse, .gitignore'd and symlinked ones included."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time

import pytest
import tether
from tether.testing import open_test_run
from tether_lsp.hookspecs import tether_lsp_supervisor
from tether_lsp.watching import Watcher


async def test_the_watchers_scan_runs_off_the_loop_and_sees_a_shell_edit(py_root, monkeypatch):
    threads: list[threading.Thread] = []
    scan = Watcher.scan

    def spy(self):
        threads.append(threading.current_thread())
        return scan(self)

    monkeypatch.setattr(Watcher, "scan", spy)
    async with open_test_run(py_root, only=["lsp"], plugins=[tether.files]) as run:
        first = await run.call(
            "lsp", {"action": "hover", "file": "pkg/main.py", "line": 4, "symbol": "greet"}
        )
        assert not first.is_error, first.plain
        # a shell adds a function the server has never been told about; a query's refresh finds it
        (py_root / "pkg" / "extra.py").write_text("def brand_new_helper() -> int:\n    return 1\n")
        found = await run.call("lsp", {"action": "symbols", "query": "brand_new_helper"})
    assert "brand_new_helper" in found.plain, found.plain
    assert len(threads) >= 2, "start and the query's refresh both scan"
    assert threading.main_thread() not in threads, "a scan ran on the event loop's thread"


@pytest.mark.parametrize("in_git", [True, False], ids=["git-work-tree", "plain-folder"])
async def test_the_server_hears_of_every_file_it_analyses_ignored_or_symlinked_and_no_deleted_for_open_ones(
    py_root, in_git, watched_events
):
    """basedpyright reads no .gitignore: a generated module an import reaches is in its program, and the
    server relies on our watched-file events, so a shell's change to an ignored file is sent (the source
    importing it is checked again), as is one to a symlinked source. A file tether writes or opens under
    an ignored path is never sent as Deleted while it exists; one a shell removes is."""
    (py_root / ".gitignore").write_text("generated/\n*_pb2.py\n")
    (py_root / "generated").mkdir()
    (py_root / "generated" / "out.py").write_text("OUT = 1\n")
    (py_root / "pkg" / "msg_pb2.py").write_text("def make() -> int:\n    return 1\n")
    (py_root / "pkg" / "uses.py").write_text("from pkg.msg_pb2 import make\n\nx: int = make()\n")
    shared = py_root.parent / "shared"
    shared.mkdir()
    (shared / "linked.py").write_text("LINKED = 1\n")
    (py_root / "pkg" / "linked.py").symlink_to(shared / "linked.py")
    if in_git:
        git = ["git", "-c", "init.defaultBranch=main"]
        subprocess.run([*git, "init", "-q"], cwd=py_root, check=True)
        subprocess.run([*git, "add", "."], cwd=py_root, check=True)
    sent = watched_events
    diagnose = {"action": "diagnostics", "file": "pkg/uses.py"}
    async with open_test_run(py_root, only=["lsp"], plugins=[tether.files]) as run:

        async def until(wanted: str, present: bool) -> str:
            deadline = time.monotonic() + 90  # each call refreshes; a busy machine may need several
            while True:
                answer = await run.call("lsp", diagnose)
                assert not answer.is_error, answer.plain
                if (wanted in answer.plain) == present or time.monotonic() > deadline:
                    return answer.plain
                await asyncio.sleep(0.5)

        first = await run.call("lsp", diagnose)
        assert "reportAssignmentType" not in first.plain, first.plain
        # a shell regenerates the ignored module (protoc): make() now returns str
        (py_root / "pkg" / "msg_pb2.py").write_text("def make() -> str:\n    return 'a'\n")
        with (py_root / "generated" / "out.py").open("a") as f:
            f.write("MORE = 2\n")
        with (shared / "linked.py").open("a") as f:
            f.write("MORE = 2\n")
        stale = await until("reportAssignmentType", True)
        assert "reportAssignmentType" in stale, (
            f"the ignored module's change never reached the server: {stale}"
        )
        told = set(sent)
        assert {("pkg/msg_pb2.py", 2), ("generated/out.py", 2), ("pkg/linked.py", 2)} <= told, told

        # the model writes the ignored module back, then opens it: never a Deleted for it
        sent.clear()
        wrote = await run.call(
            "write", {"path": "pkg/msg_pb2.py", "content": "def make() -> int:\n    return 1\n"}
        )
        assert not wrote.is_error, wrote.plain
        fixed = await until("reportAssignmentType", False)
        assert "reportAssignmentType" not in fixed, fixed
        hover = await run.call(
            "lsp", {"action": "hover", "file": "pkg/msg_pb2.py", "line": 1, "symbol": "make"}
        )
        assert "int" in hover.plain, hover.plain
        again = await run.call("lsp", diagnose)
        assert not again.is_error, again.plain
        assert not [change for change in sent if change[1] == 3], sent

        # a file a shell removes is sent as Deleted
        (py_root / "generated" / "out.py").unlink()
        await run.call("lsp", diagnose)
    assert ("generated/out.py", 3) in sent, sent
    assert ("pkg/msg_pb2.py", 3) not in sent, sent


async def test_an_open_document_tether_deletes_is_said_deleted_at_once_not_at_a_later_scan(
    py_root, monkeypatch, samples, watched_events
):
    """A file tether deletes while it is open is closed and sent as Deleted in the same step: closed alone,
    basedpyright kept the module for its importers until a later scan said it was gone (on a loaded machine
    the scans are a poller's; a moved module's importer showed "unknown import symbol" for a minute)."""
    import tether_lsp.watching as watching

    monkeypatch.setattr(watching, "SYNC_SCAN_BUDGET", -1.0)  # every scan after the first is the poller's...
    monkeypatch.setattr(watching, "POLL_INTERVAL", 3600.0)  # ...which does not come within the test
    sent = watched_events
    async with open_test_run(py_root, only=["lsp"], plugins=[tether.files]) as run:
        hover = await run.call(
            "lsp", {"action": "hover", "file": "pkg/util.py", "line": 1, "symbol": "greet"}
        )
        assert not hover.is_error, hover.plain
        lines = samples.UTIL.splitlines()
        patch = f"--- a/pkg/util.py\n+++ /dev/null\n@@ -1,{len(lines)} +0,0 @@\n" + "".join(
            f"-{line}\n" for line in lines
        )
        r = await run.call("apply_patch", {"patch": patch})
        assert not r.is_error and not (py_root / "pkg/util.py").exists(), r.plain
        assert ("pkg/util.py", 3) in sent, sent
        deadline = time.monotonic() + 90  # basedpyright applies a deletion on a timer of its own
        while True:
            now = await run.call("lsp", {"action": "diagnostics", "file": "pkg/other.py"})
            if "reportMissingImports" in now.plain or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        assert "reportMissingImports" in now.plain, now.plain


async def test_an_open_document_whose_file_is_gone_is_said_deleted_before_it_is_closed(
    py_root, monkeypatch, samples
):
    """basedpyright takes a deletion only of a file its program holds. Told after the didClose, a document
    it had opened before its workspace was listed (a loaded machine) was no longer its file: the deletion
    was dropped, and its importers showed "unknown import symbol" for the rest of the run. Whoever deletes
    the file (tether's write, its move, a shell), the server hears of it while it still has the document."""
    from tether_lsp.connection import Connection

    said: list[tuple[str, str]] = []
    notify = Connection.notify

    def spy(self, method, params):
        if method == "textDocument/didClose":
            said.append(("closed", params.text_document.uri.rsplit("/", 1)[-1]))
        elif method == "workspace/didChangeWatchedFiles":
            said.extend(("deleted", c.uri.rsplit("/", 1)[-1]) for c in params.changes if int(c.type) == 3)
        return notify(self, method, params)

    monkeypatch.setattr(Connection, "notify", spy)

    def first(kind, name):
        return said.index((kind, name))

    async with open_test_run(py_root, only=["lsp"], plugins=[tether.files]) as run:
        for name in ("util.py", "main.py"):
            r = await run.call("lsp", {"action": "diagnostics", "file": f"pkg/{name}"})
            assert not r.is_error, r.plain
        # tether's own write deletes an open document
        lines = samples.UTIL.splitlines()
        patch = f"--- a/pkg/util.py\n+++ /dev/null\n@@ -1,{len(lines)} +0,0 @@\n" + "".join(
            f"-{line}\n" for line in lines
        )
        r = await run.call("apply_patch", {"patch": patch})
        assert not r.is_error, r.plain
        assert first("deleted", "util.py") < first("closed", "util.py"), said
        # a shell deletes one: the next query's refresh finds it gone
        (py_root / "pkg/main.py").unlink()
        await run.call("lsp", {"action": "diagnostics", "file": "pkg/other.py"})
        assert first("deleted", "main.py") < first("closed", "main.py"), said


async def test_a_small_tree_is_scanned_at_each_query_however_long_the_machine_keeps_the_scan_waiting(
    py_root, monkeypatch
):
    """The scan moves to a background poller when it costs more than SYNC_SCAN_BUDGET of its own CPU time.
    Timed by the wall clock, a loaded machine (here: a scan kept waiting 50 ms, as a descheduled thread is)
    moved a 3-file tree to the poller, and a query right after a shell's edit ran before any scan saw it."""
    scan = Watcher.scan

    def kept_waiting(self):
        time.sleep(0.05)  # the thread waits for a CPU: wall time passes, the scan's own cost does not grow
        return scan(self)

    monkeypatch.setattr(Watcher, "scan", kept_waiting)
    async with open_test_run(py_root, only=["lsp"], plugins=[tether.files]) as run:
        for _ in range(2):
            r = await run.call("lsp", {"action": "diagnostics", "file": "pkg/main.py"})
            assert not r.is_error and "reportCallIssue" not in r.plain, r.plain
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        assert conn.watcher.poller is None, "a 3-file tree went to the poller"
        # a shell's edit of an imported module is seen by the very next query
        util = py_root / "pkg" / "util.py"
        util.write_text(util.read_text().replace("def greet(name: str)", "def greet(name: str, n: int)"))
        r = await run.call("lsp", {"action": "diagnostics", "file": "pkg/main.py"})
        assert "reportCallIssue" in r.plain, r.plain
