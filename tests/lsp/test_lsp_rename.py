"""lsp_rename against real basedpyright, and WorkspaceEdit application (all files or none, inside the root)."""

from __future__ import annotations

import subprocess

import pytest
import tether
import tether.atomic
from lsprotocol import types as lsp
from tether.testing import assert_model_error
from tether.tools import ToolError
from tether_lsp import readiness
from tether_lsp.edits import plan_workspace_edit
from tether_lsp.hookspecs import tether_lsp_supervisor


def snapshot(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


async def test_rename_across_three_files_including_unopened_ones(py_root, no_leftover_processes):
    async with tether.open_run(py_root) as run:
        r = await run.call(
            "lsp_rename", {"file": "pkg/util.py", "line": 1, "symbol": "greet", "new_name": "welcome"}
        )
        assert not r.is_error, r.plain
        sup = run.resource(tether_lsp_supervisor)
        (conn,) = sup.connections.values()
        opened = {run.relpath(d.path) for d in conn.docs.values()}
        assert "pkg/other.py" not in opened  # never opened, still renamed
        assert {f["file"]: f["edits"] for f in r.data["files"]} == {
            "pkg/util.py": 2,
            "pkg/main.py": 6,
            "pkg/other.py": 2,
        }
        assert r.plain.startswith("renamed 'greet' to 'welcome': 10 edit(s) in 3 file(s)")
        assert "greet" not in (py_root / "pkg/util.py").read_text() + (py_root / "pkg/other.py").read_text()
        main = (py_root / "pkg/main.py").read_text()
        assert (
            'print("😀😀", u.welcome("c"))' in main and "greeting = welcome(" in main
        )  # 'greeting' itself untouched
        assert "This write introduced" not in r.plain  # a clean rename introduces nothing
        # the server saw the new files: the new name resolves, from a file it never had open
        r = await run.call(
            "lsp", {"action": "definition", "file": "pkg/other.py", "line": 3, "symbol": "welcome"}
        )
        assert r.data["locations"][0] == {
            "file": "pkg/util.py",
            "line": 1,
            "column": 5,
            "text": "def welcome(name: str) -> str:",
        }


BAD_RENAMES = [
    (
        {"file": "pkg/util.py", "line": 1, "symbol": "nothere", "new_name": "x"},
        "'nothere' does not occur on line 1",
    ),
    ({"file": "pkg/util.py", "line": 1, "symbol": "greet", "new_name": "two words"}, "contains whitespace"),
    ({"file": "../elsewhere.py", "line": 1, "symbol": "x", "new_name": "y"}, "resolves outside the root"),
    ({"file": "pkg/util.py", "line": 40, "symbol": "greet", "new_name": "y"}, "line 40 is beyond the end"),
    (
        {"file": "pkg/missing.py", "line": 1, "symbol": "greet", "new_name": "y"},
        "no such file: 'pkg/missing.py'",
    ),
    ({"file": "pkg/util.py", "line": 2, "symbol": "Say", "new_name": "y"}, "found nothing to rename"),
    ({"file": "pkg/util.py", "line": 1, "symbol": "greet"}, "missing required argument 'new_name'"),
]


async def test_bad_rename_input_is_one_clear_error_and_nothing_changes(py_root):
    before = snapshot(py_root)
    async with tether.open_run(py_root) as run:  # one run for all cases: each would start a server
        for args, expected in BAD_RENAMES:
            r = await run.call("lsp_rename", args)
            assert_model_error(r, expected)
            assert "\n" not in r.plain, (args, r.plain)
            assert snapshot(py_root) == before, args


async def test_a_failing_write_restores_every_file(py_root, monkeypatch):
    before = snapshot(py_root)
    real = tether.atomic._replace
    calls = []

    def flaky(src, dst):
        calls.append(dst)
        if len(calls) == 2:  # after the first file was replaced (one rename per file)
            raise OSError(28, "No space left on device", str(dst))
        return real(src, dst)

    async with tether.open_run(py_root) as run:
        await run.call("lsp", {"action": "hover", "file": "pkg/util.py", "line": 1, "symbol": "greet"})
        monkeypatch.setattr(tether.atomic, "_replace", flaky)
        r = await run.call(
            "lsp_rename", {"file": "pkg/util.py", "line": 1, "symbol": "greet", "new_name": "welcome"}
        )
    assert r.is_error and "nothing was written" in r.plain and "No space left" in r.plain, r.plain
    assert snapshot(py_root) == before


def _edit(uri, l1, c1, l2, c2, text):
    return lsp.TextEdit(
        range=lsp.Range(start=lsp.Position(line=l1, character=c1), end=lsp.Position(line=l2, character=c2)),
        new_text=text,
    )


@pytest.fixture
def bare_run(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.py").write_text("café = 1\nprint(café)\n")
    (root / "b.py").write_text("old\r\ncontent\r\n")
    (root / "gone.py").write_text("x\n")
    return tether.Run(root, load_entry_points=False), root


def test_document_changes_with_file_operations_and_whole_file_edits(bare_run):
    run, root = bare_run
    a, b = (root / "a.py").as_uri(), (root / "b.py").as_uri()
    edit = lsp.WorkspaceEdit(
        document_changes=[
            lsp.TextDocumentEdit(
                text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=a, version=None),
                edits=[
                    _edit(a, 1, 11, 1, 11, "XX"),
                    _edit(a, 0, 0, 0, 4, "cafe"),
                ],  # after 'café)': UTF-16 offsets
            ),
            lsp.CreateFile(uri=(root / "new/c.py").as_uri()),
            lsp.TextDocumentEdit(
                text_document=lsp.OptionalVersionedTextDocumentIdentifier(
                    uri=(root / "new/c.py").as_uri(), version=None
                ),
                edits=[_edit(None, 0, 0, 0, 0, "made = True\n")],
            ),
            lsp.RenameFile(old_uri=b, new_uri=(root / "b2.py").as_uri()),
            lsp.TextDocumentEdit(  # whole-file replacement, the end past the last line
                text_document=lsp.OptionalVersionedTextDocumentIdentifier(
                    uri=(root / "b2.py").as_uri(), version=None
                ),
                edits=[_edit(None, 0, 0, 99, 0, "whole\n")],
            ),
            lsp.DeleteFile(uri=(root / "gone.py").as_uri()),
        ]
    )
    plan = plan_workspace_edit(edit, run, "utf-16")
    tether.atomic.write_all(plan.writes(), root=root)
    assert (root / "a.py").read_text() == "cafe = 1\nprint(café)XX\n"
    assert (root / "new/c.py").read_text() == "made = True\n"
    assert not (root / "b.py").exists() and (root / "b2.py").read_text() == "whole\n"
    assert not (root / "gone.py").exists()
    assert plan.operations == ["created new/c.py", "renamed b.py -> b2.py", "deleted gone.py"]


def test_changes_form_and_edits_outside_the_root_are_refused_whole(bare_run, tmp_path):
    run, root = bare_run
    a = (root / "a.py").as_uri()
    outside = tmp_path / "outside.py"
    outside.write_text("x = 1\n")
    edit = lsp.WorkspaceEdit(
        changes={a: [_edit(a, 0, 0, 0, 4, "tea")], outside.as_uri(): [_edit(None, 0, 0, 0, 1, "y")]}
    )
    with pytest.raises(ToolError, match="outside the root; nothing was written"):
        plan_workspace_edit(edit, run, "utf-16")
    assert (root / "a.py").read_text().startswith("café") and outside.read_text() == "x = 1\n"
    plan = plan_workspace_edit(lsp.WorkspaceEdit(changes={a: [_edit(a, 0, 0, 0, 5, "tea")]}), run, "utf-8")
    # utf-8 offsets: 'café' is 5 bytes (in UTF-16 units, 5 would also take the space)
    assert plan.contents[root / "a.py"].startswith("tea = 1")


async def test_an_approval_policy_sees_every_file_a_rename_would_write(py_root):
    """The rename's files are known only once the server answers: approval is asked again, before any write."""
    asked = []

    class Protect:
        @tether.hookimpl
        def tether_approve(self, run, tool, arguments, paths):
            asked.append(list(paths))
            return "pkg/other.py is protected" if "pkg/other.py" in paths else None

    before = snapshot(py_root)
    async with tether.open_run(py_root, plugins=[Protect()]) as run:
        r = await run.call(
            "lsp_rename", {"file": "pkg/util.py", "line": 1, "symbol": "greet", "new_name": "welcome"}
        )
    assert r.is_error and "pkg/other.py is protected" in r.plain and "Nothing was written" in r.plain, r.plain
    assert asked == [["pkg/util.py"], ["pkg/main.py", "pkg/other.py", "pkg/util.py"]]
    assert snapshot(py_root) == before


async def test_rename_counts_lines_as_the_server_does_not_at_form_feeds_or_line_separators(tmp_path):
    # str.splitlines breaks at \x0c and U+2028; language servers (and now tether) only at \n, \r\n, \r
    root = tmp_path / "r"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "r"\nversion = "0"\n')
    source = (
        "def helper(x):\n    return x\n\ndef main():\n    # c\x0c p\n    # s \u2028 h\n    return helper(2)\n"
    )
    (root / "f.py").write_bytes(source.encode("utf-8"))
    async with tether.open_run(root, plugins=[tether.files]) as run:
        r = await run.call("lsp_rename", {"file": "f.py", "line": 1, "symbol": "helper", "new_name": "h2"})
        assert not r.is_error, r.plain
        assert (root / "f.py").read_bytes().decode("utf-8") == source.replace("helper", "h2")
        r = await run.call("lsp", {"action": "references", "file": "f.py", "line": 7, "symbol": "h2"})
        assert {(x["file"], x["line"]) for x in r.data["locations"]} == {("f.py", 1), ("f.py", 7)}, r.plain
        r = await run.call("read", {"path": "f.py"})
        assert "     7\t    return h2(2)" in r.plain, r.plain


async def test_leftovers_of_references_and_rename_include_gitignored_files_outside_the_program(py_root):
    """A .gitignore'd script outside pyright's include is a file the model can see and edit: references
    name the old name written there, and lsp_rename opens it first, so its use is renamed too."""
    (py_root / "pyproject.toml").write_text(
        '[project]\nname = "sample"\nversion = "0"\n\n[tool.basedpyright]\ninclude = ["pkg"]\n'
    )
    (py_root / ".gitignore").write_text("scripts/\n")
    (py_root / "scripts").mkdir()
    (py_root / "scripts" / "report.py").write_text('from pkg.util import greet\n\nprint(greet("r"))\n')
    git = ["git", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=py_root, check=True)
    subprocess.run([*git, "add", "."], cwd=py_root, check=True)
    async with tether.open_run(py_root) as run:
        refs = await run.call(
            "lsp", {"action": "references", "file": "pkg/util.py", "line": 1, "symbol": "greet"}
        )
        assert not refs.is_error, refs.plain
        assert {"file": "scripts/report.py", "line": 3} in refs.data["outside_program"], refs.plain
        assert not any(loc["file"] == "scripts/report.py" for loc in refs.data["locations"]), refs.plain
        r = await run.call(
            "lsp_rename", {"file": "pkg/util.py", "line": 1, "symbol": "greet", "new_name": "welcome"}
        )
        assert not r.is_error, r.plain
    assert {"file": "scripts/report.py", "edits": 2} in r.data["files"], r.plain
    assert r.data["not_renamed"] == [], r.plain
    assert (
        "opened first, since they are outside basedpyright's program and mention 'greet': scripts/report.py"
        in (r.plain)
    )
    assert (
        py_root / "scripts/report.py"
    ).read_text() == 'from pkg.util import welcome\n\nprint(welcome("r"))\n'


async def test_a_rename_while_the_server_is_not_ready_is_refused_and_writes_nothing(py_root):
    import time

    rename = {"file": "pkg/util.py", "line": 1, "symbol": "greet", "new_name": "welcome"}
    async with tether.open_run(py_root, options={"lsp_ready_wait": 1}) as run:
        r = await run.call("lsp", {"action": "hover", "file": "pkg/util.py", "line": 1, "symbol": "greet"})
        assert not r.is_error, r.plain
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        assert await readiness.wait_ready(conn, 90) is None
        # as a $/progress begin without its end (a server loading its packages) would leave it
        conn.progress_tokens.add("load")
        conn.progress_titles["load"] = ("Loading packages", time.monotonic())
        before = snapshot(py_root)
        r = await run.call("lsp_rename", rename)
        assert r.is_error and r.data == {"error": "not_ready", "ready": False}, r.plain
        assert r.plain.startswith(
            "nothing was renamed: basedpyright still working on 'Loading packages' ("
        ), r.plain
        assert snapshot(py_root) == before
        conn.progress_tokens.discard("load")
        del conn.progress_titles["load"]
        r = await run.call("lsp_rename", rename)
        assert not r.is_error and r.data["ready"] is True and r.data["edits"] == 10, r.plain
