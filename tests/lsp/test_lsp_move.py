"""lsp_move against real servers: typescript-language-server and basedpyright update the importers of a moved
file (workspace/willRenameFiles); gopls offers no such request and nothing is moved; force moves alone.

Small projects of our own, so the three servers and tsc together stay within a few seconds each.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest
import tether
import tether.atomic
import tether.files
from lsprotocol import types as lsp
from support import require_binary
from tether.testing import assert_model_error
from tether_lsp.edits import plan_workspace_edit
from tether_lsp.hookspecs import tether_lsp_supervisor


def test_a_server_edit_that_already_moves_the_file_is_not_moved_twice(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.py").write_text("import b\n")
    run = tether.Run(root, load_entry_points=False)
    move = lsp.RenameFile(old_uri=(root / "a.py").as_uri(), new_uri=(root / "sub/a.py").as_uri())
    plan = plan_workspace_edit(lsp.WorkspaceEdit(document_changes=[move]), run, "utf-16", then=[move])
    assert plan.writes() == {root / "a.py": None, root / "sub/a.py": b"import b\n"}
    assert plan.operations == ["renamed a.py -> sub/a.py"]


def snapshot(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def servers(run):
    return run.resource(tether_lsp_supervisor).connections.values()


def open_files(run, server):
    (conn,) = [c for c in servers(run) if c.server.id == server]
    return {run.relpath(d.path) for d in conn.docs.values()}


TS_PROJECT = {
    "tsconfig.json": '{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2020"}, "include": ["src"]}\n',
    "src/types.ts": "export interface Named { name: string }\n",
    "src/util/format.ts": (
        "import type { Named } from '../types';\n\n"
        "export function format(n: Named): string {\n  return `<${n.name}>`;\n}\n"
    ),
    "src/main.ts": "import { format } from './util/format';\n\nconsole.log(format({ name: 'a' }));\n",
    "src/deep/other.ts": "import { format as f } from '../util/format';\n\nexport const shown: string = f({ name: 'b' });\n",
    "src/index.ts": "export * from './util/format';\nexport * from './deep/other';\n",
}


@pytest.fixture
def ts_root(tmp_path, samples, with_node_bin):
    require_binary("typescript-language-server", str(samples.node_bin() / "typescript-language-server"))
    return samples.write_tree(tmp_path / "ts", TS_PROJECT)


def tsc(root, samples) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(samples.node_bin() / "tsc"), "--noEmit", "-p", "."],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_typescript_move_updates_every_importer_and_tsc_stays_clean(ts_root, samples):
    async with tether.open_run(ts_root, plugins=[tether.files]) as run:
        r = await run.call(
            "lsp", {"action": "hover", "file": "src/util/format.ts", "line": 3, "symbol": "format"}
        )
        assert not r.is_error, r.plain
        r = await run.call("lsp_move", {"file": "src/util/format.ts", "to": "src/lib/text/format.ts"})
        assert not r.is_error, r.plain
        assert r.plain.startswith(
            "moved src/util/format.ts -> src/lib/text/format.ts; typescript-language-server updated the imports"
        ), r.plain
        # the importers and the moved file's own import of ../types
        assert sorted(f["file"] for f in r.data["files"]) == [
            "src/deep/other.ts",
            "src/index.ts",
            "src/lib/text/format.ts",
            "src/main.ts",
        ], r.plain
        assert r.data["imports_updated"] is True and r.data.get("diagnostics", []) == [], r.plain
        assert "This write introduced" not in r.plain
        # every importer was checked: the old path and the destination (each in no project on one side of
        # the move) do not cut tsserver's search for them
        assert "may be incomplete" not in r.plain, r.plain
        # the run's open documents follow the move: the old one closed, the new one open
        opened = open_files(run, "typescript-language-server")
        assert "src/lib/text/format.ts" in opened and "src/util/format.ts" not in opened
    assert not (ts_root / "src/util/format.ts").exists()
    assert "from '../../types'" in (ts_root / "src/lib/text/format.ts").read_text()
    assert "from './lib/text/format'" in (ts_root / "src/main.ts").read_text()
    assert "from '../lib/text/format'" in (ts_root / "src/deep/other.ts").read_text()
    checked = tsc(ts_root, samples)
    assert checked.returncode == 0, checked.stdout + checked.stderr


BAD_MOVES = [
    ({"file": "pkg", "to": "lib"}, "'pkg' is a directory; lsp_move moves one file"),
    ({"file": "pkg/util.py", "to": "pkg/main.py"}, "'pkg/main.py' exists; nothing was moved"),
    ({"file": "pkg/util.py", "to": "pkg/util.py"}, "'pkg/util.py' exists; nothing was moved"),
    ({"file": "pkg/util.py", "to": "../util.py"}, "resolves outside the root"),
    ({"file": "../util.py", "to": "pkg/x.py"}, "resolves outside the root"),
    ({"file": "pkg/missing.py", "to": "pkg/x.py"}, "no such file: 'pkg/missing.py'"),
    ({"file": "pkg/util.py", "to": "pkg/main.py/x.py"}, "'pkg/main.py' is a file"),
    ({"file": "pkg/util.py"}, "missing required argument 'to'"),
]


async def test_python_moves_renames_and_refusals(py_root, monkeypatch):
    (py_root / "README.md").write_text("# sample\n")
    before = snapshot(py_root)
    async with tether.open_run(py_root, plugins=[tether.files]) as run:
        # bad inputs: one line each, refused before any server is started, nothing changed
        for args, expected in BAD_MOVES:
            r = await run.call("lsp_move", args)
            assert_model_error(r, expected)
            assert "\n" not in r.plain, (args, r.plain)
        assert snapshot(py_root) == before and not servers(run)

        # a file no server serves: refused, unless forced
        r = await run.call("lsp_move", {"file": "README.md", "to": "docs/README.md"})
        assert r.is_error and "nothing was moved: no server can update the imports of 'README.md'" in r.plain
        assert "force: true" in r.plain and snapshot(py_root) == before
        r = await run.call("lsp_move", {"file": "README.md", "to": "docs/README.md", "force": True})
        assert not r.is_error and "WITHOUT updating imports" in r.plain, r.plain
        assert (py_root / "docs/README.md").read_text() == "# sample\n" and not (
            py_root / "README.md"
        ).exists()
        before = snapshot(py_root)

        r = await run.call("lsp", {"action": "hover", "file": "pkg/util.py", "line": 1, "symbol": "greet"})
        assert not r.is_error, r.plain
        # a write that fails half-way (the disk full at the second file) restores every file: nothing moved
        real, calls = tether.atomic._replace, []

        def flaky(src, dst):
            calls.append(dst)
            if len(calls) == 2:
                raise OSError(28, "No space left on device", str(dst))
            return real(src, dst)

        monkeypatch.setattr(tether.atomic, "_replace", flaky)
        r = await run.call("lsp_move", {"file": "pkg/util.py", "to": "pkg/greeting.py"})
        monkeypatch.setattr(tether.atomic, "_replace", real)
        assert r.is_error and "nothing was written" in r.plain and "No space left" in r.plain, r.plain
        assert len(calls) == 2 and snapshot(py_root) == before

        # a rename within the folder: basedpyright updates both importers, one of them never opened
        r = await run.call("lsp_move", {"file": "pkg/util.py", "to": "pkg/greeting.py"})
        assert not r.is_error, r.plain
        assert r.data["files"] == [
            {"file": "pkg/main.py", "edits": 2},
            {"file": "pkg/other.py", "edits": 1},
        ], r.plain
        assert r.data.get("diagnostics", []) == [], r.plain
        assert (py_root / "pkg/other.py").read_text().startswith("from pkg.greeting import greet, Greeter\n")
        main = (py_root / "pkg/main.py").read_text()
        assert main.startswith("from pkg import greeting as u\nfrom pkg.greeting import greet\n"), main
        opened = open_files(run, "basedpyright")
        assert "pkg/greeting.py" in opened and "pkg/util.py" not in opened

        # the file's own old error (value: int = a str) moves with it: not reported as the move's doing
        r = await run.call("lsp_move", {"file": "pkg/main.py", "to": "pkg/app.py"})
        assert not r.is_error, r.plain
        assert "basedpyright found no import of it to update" in r.plain
        assert r.data.get("diagnostics", []) == [], r.plain

        # basedpyright's edits for a move to another folder would name the wrong module: refused
        moved = snapshot(py_root)
        r = await run.call("lsp_move", {"file": "pkg/greeting.py", "to": "lib/greeting.py"})
        assert r.is_error and r.data["error"] == "unsupported", r.plain
        assert r.plain.startswith(
            "nothing was moved: basedpyright updates imports only for a file renamed within its folder"
        ), r.plain
        assert "force: true" in r.plain and snapshot(py_root) == moved

        # force: moved alone, said so, and the imports it broke are the errors it introduced
        r = await run.call("lsp_move", {"file": "pkg/greeting.py", "to": "lib/greeting.py", "force": True})
        assert not r.is_error, r.plain
        assert r.plain.startswith("moved pkg/greeting.py -> lib/greeting.py WITHOUT updating imports"), (
            r.plain
        )
        assert r.data["imports_updated"] is False and r.data["files"] == []
        # the importers' broken imports are the errors it introduced, as far as the server had re-checked them
        # when the write's round ended (basedpyright applies a deleted file to its importers after a timer of
        # its own: on a loaded machine the round can end first, so the answer says they may not be all);
        # asked of each importer now, each shows its broken import
        assert "which may not be all of them yet" in r.plain, r.plain
        reported = {(d["file"], d["line"]) for d in r.data["diagnostics"] if d["severity"] == "error"}
        assert {f for f, _ in reported} <= {"pkg/app.py", "pkg/other.py"}, r.plain
        for importer in ("pkg/app.py", "pkg/other.py"):
            deadline = time.monotonic() + 60
            while True:
                now = await run.call("lsp", {"action": "diagnostics", "file": importer})
                if "reportMissingImports" in now.plain or time.monotonic() > deadline:
                    break
            assert "reportMissingImports" in now.plain, now.plain
    assert not (py_root / "pkg/greeting.py").exists() and (py_root / "lib/greeting.py").is_file()
    assert "from pkg.greeting import" in (py_root / "pkg/other.py").read_text()  # untouched


async def test_a_move_told_while_a_scan_was_listing_is_not_undone_by_it(py_root, watched_events, monkeypatch):
    """A scan of the tree that listed its folders before a move and ended after it (the poller's, on a loaded
    machine) must not undo what the move told. It replaced the watcher's record with what it had listed,
    which lacked the moved-to file; when that file was moved on before the next scan, its deletion was told
    to no one, and basedpyright kept the module for its importers for the rest of the run: "greet" is
    unknown import symbol, never the missing import."""
    import asyncio
    import threading

    import tether_lsp.watching
    from tether_lsp.watching import Watcher

    # the tree is polled, often: each scan a test gate holds is listed, then held until released
    monkeypatch.setattr(tether_lsp.watching, "SYNC_SCAN_BUDGET", -1.0)
    monkeypatch.setattr(tether_lsp.watching, "POLL_INTERVAL", 0.01)
    scan, gates = Watcher.scan, []

    def gated_scan(self):
        found = scan(self)
        if gates:
            listed, release = gates.pop(0)
            listed.set()
            release.wait(60)
        return found

    def gate():
        g = (threading.Event(), threading.Event())
        gates.append(g)
        return g

    async def listed(g):
        assert await asyncio.to_thread(g[0].wait, 60), "the poller's scan never began"

    monkeypatch.setattr(Watcher, "scan", gated_scan)
    first = second = None
    try:
        async with tether.open_run(py_root) as run:
            # pkg/util.py open: its move opens the new path
            r = await run.call("lsp", {"action": "diagnostics", "file": "pkg/util.py"})
            assert not r.is_error, r.plain
            first = gate()
            await listed(first)  # a poll has listed the tree: pkg/util.py, no pkg/greeting.py
            r = await run.call("lsp_move", {"file": "pkg/util.py", "to": "pkg/greeting.py"})
            assert not r.is_error and r.data["importers"] == ["pkg/main.py", "pkg/other.py"], r.plain
            second = gate()
            first[1].set()  # the poll that listed before the move ends after it
            await listed(second)  # and the next one has begun
            r = await run.call(
                "lsp_move", {"file": "pkg/greeting.py", "to": "lib/greeting.py", "force": True}
            )
            assert not r.is_error and r.data["imports_updated"] is False, r.plain
            assert ("pkg/greeting.py", 3) in watched_events, watched_events
            second[1].set()
            deadline = time.monotonic() + 60
            while True:
                now = await run.call("lsp", {"action": "diagnostics", "file": "pkg/other.py"})
                if "reportMissingImports" in now.plain or time.monotonic() > deadline:
                    break
            assert "reportMissingImports" in now.plain, now.plain
    finally:
        gates.clear()
        for g in (first, second):
            if g is not None:
                g[1].set()


@pytest.fixture
def go_root(tmp_path, samples, monkeypatch):
    gopls = require_binary("gopls", os.path.expanduser("~/go/bin/gopls"))
    require_binary("go")
    monkeypatch.setenv("PATH", f"{os.path.dirname(gopls)}{os.pathsep}{os.environ['PATH']}")
    return samples.write_tree(
        tmp_path / "go",
        {
            "go.mod": "module example.com/m\n\ngo 1.19\n",
            "util/util.go": 'package util\n\nfunc Greet() string { return "hi" }\n',
            "main.go": 'package main\n\nimport "example.com/m/util"\n\nfunc main() { println(util.Greet()) }\n',
        },
    )


async def test_gopls_cannot_update_imports_so_nothing_is_moved(go_root):
    before = snapshot(go_root)
    async with tether.open_run(go_root, plugins=[tether.files]) as run:
        r = await run.call("lsp_move", {"file": "util/util.go", "to": "util/greet.go"})
    assert r.is_error and r.data == {"error": "unsupported", "server": "gopls"}, r.plain
    assert r.plain.startswith(
        "nothing was moved: gopls cannot update imports on a move (it offers no workspace/willRenameFiles)"
    ), r.plain
    assert "force: true" in r.plain and "\n" not in r.plain
    assert snapshot(go_root) == before
