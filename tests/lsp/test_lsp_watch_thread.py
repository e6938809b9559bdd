"""The file watcher's scan of the tree runs in a thread, never on the event loop (a big tree must not
stall every other call of the run), and still tells the server about a file changed behind its back;
what it tells is the project's files, not what .gitignore leaves out."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
import tether
from tether.testing import open_test_run
from tether_lsp.connection import Connection
from tether_lsp.watching import Watcher


async def test_the_watchers_scan_runs_off_the_loop_and_sees_a_shell_edit(py_root, monkeypatch):
    threads: list[threading.Thread] = []
    traverse = Watcher._traverse  # every scan starts with it (then, when the files changed, the walk)

    def spy(self):
        threads.append(threading.current_thread())
        return traverse(self)

    monkeypatch.setattr(Watcher, "_traverse", spy)
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
async def test_the_server_hears_of_the_projects_files_not_of_gitignored_ones(py_root, monkeypatch, in_git):
    """What the project's .gitignore leaves out (build output, generated code) is not the project's
    sources: a shell's change to it is not sent; a change to a source (tracked, or new and not ignored)
    is. In a git work tree git answers; in a plain folder the same rules are read by the ignore crate."""
    (py_root / ".gitignore").write_text("generated/\n*_pb2.py\n")
    (py_root / "generated").mkdir()
    (py_root / "generated" / "out.py").write_text("OUT = 1\n")
    (py_root / "pkg" / "msg_pb2.py").write_text("MSG = 1\n")
    if in_git:
        git = ["git", "-c", "init.defaultBranch=main"]
        subprocess.run([*git, "init", "-q"], cwd=py_root, check=True)
        subprocess.run([*git, "add", "pkg", "pyproject.toml", ".gitignore"], cwd=py_root, check=True)
    sent: dict[str, int] = {}  # file -> its last change's type (1 created, 2 changed, 3 deleted)
    notify = Connection.notify

    def spy(self, method, params):
        if method == "workspace/didChangeWatchedFiles":
            sent.update((run_rel(py_root, change.uri), change.type) for change in params.changes)
        return notify(self, method, params)

    monkeypatch.setattr(Connection, "notify", spy)
    hover = {"action": "hover", "file": "pkg/main.py", "line": 4, "symbol": "greet"}
    async with open_test_run(py_root, only=["lsp"], plugins=[tether.files]) as run:
        first = await run.call("lsp", hover)
        assert not first.is_error, first.plain
        for ignored in ("generated/out.py", "pkg/msg_pb2.py"):
            with (py_root / ignored).open("a") as f:
                f.write("MORE = 2\n")
        (py_root / "generated" / "new.py").write_text("NEW = 1\n")
        with (py_root / "pkg" / "other.py").open("a") as f:
            f.write("\nADDED = 1\n")
        (py_root / "pkg" / "fresh.py").write_text("FRESH = 1\n")
        again = await run.call("lsp", hover)  # its refresh tells the server
        assert not again.is_error, again.plain
        told = dict(sent)
        # a rule added later counts from then on: the newly ignored file leaves the server's view
        sent.clear()
        with (py_root / ".gitignore").open("a") as f:
            f.write("pkg/fresh.py\n")
        for source in ("pkg/fresh.py", "pkg/other.py"):
            with (py_root / source).open("a") as f:
                f.write("LATER = 3\n")
        third = await run.call("lsp", hover)
        assert not third.is_error, third.plain
    assert {"pkg/other.py", "pkg/fresh.py"} <= told.keys(), told
    assert not told.keys() & {"generated/out.py", "generated/new.py", "pkg/msg_pb2.py"}, told
    assert sent == {"pkg/other.py": 2, "pkg/fresh.py": 3}, sent


def run_rel(root, uri: str) -> str:
    return Path(uri.removeprefix("file://")).relative_to(root).as_posix()
