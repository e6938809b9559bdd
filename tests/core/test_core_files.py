"""The host's file tools: confined to the root, clear errors, all-or-nothing patches."""

from __future__ import annotations

import asyncio
import json
import os
import stat

import attrs
import pytest
import tether
import tether.atomic
import tether.files
from tether.testing import assert_model_error, open_test_run


@pytest.fixture
async def run(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    async with tether.open_run(root, plugins=[tether.files], load_entry_points=False) as r:
        yield r


@pytest.mark.parametrize("tool", ["read", "write", "edit"])
async def test_paths_outside_the_root_are_refused(run, tmp_path, tool):
    secret = tmp_path / "secret.txt"
    secret.write_text("secret\n")
    (run.root / "link").symlink_to(tmp_path)
    args = {"read": {}, "write": {"content": "x"}, "edit": {"old_string": "secret", "new_string": "x"}}[tool]
    for path in ("../secret.txt", str(secret), "link/secret.txt"):
        result = await run.call(tool, {"path": path, **args})
        assert result.is_error, path
        assert f"path '{path}' resolves outside the root" in result.plain
    assert secret.read_text() == "secret\n"


async def test_paths_inside_the_root_may_be_relative_or_absolute(run):
    await run.call("write", {"path": "pkg/mod.py", "content": "a = 1\n"})
    rel = await run.call("read", {"path": "pkg/mod.py"})
    absolute = await run.call("read", {"path": str(run.root / "pkg" / "mod.py")})
    assert rel.plain == absolute.plain == "     1\ta = 1"
    assert absolute.data["path"] == "pkg/mod.py"


async def test_read_pages_and_says_how_to_see_more(run):
    (run.root / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    result = await run.call("read", {"path": "long.txt", "offset": 10, "limit": 5})
    assert result.plain.splitlines()[0] == "    10\tline 10"
    assert "[showing lines 10-14 of 100; call read with offset=15 to see more]" in result.plain
    past = await run.call("read", {"path": "long.txt", "offset": 500})
    assert past.is_error and "past the end" in past.plain


async def test_read_refuses_binary_and_non_utf8(run):
    (run.root / "b.bin").write_bytes(b"\x00\x01\x02")
    (run.root / "l1.txt").write_bytes("caf\xe9".encode("latin-1"))
    assert "binary file" in (await run.call("read", {"path": "b.bin"})).plain
    assert "not valid UTF-8" in (await run.call("read", {"path": "l1.txt"})).plain
    missing = await run.call("read", {"path": "nope.py"})
    assert missing.is_error and missing.plain == "no such file: 'nope.py' (paths are relative to the root)"


async def test_edit_needs_a_unique_exact_match(run):
    (run.root / "a.py").write_text("x = 1\nx = 1\ny = 2\n")
    many = await run.call("edit", {"path": "a.py", "old_string": "x = 1", "new_string": "x = 3"})
    assert many.is_error and "occurs 2 times" in many.plain and "lines 1, 2" in many.plain
    none = await run.call("edit", {"path": "a.py", "old_string": "z = 9", "new_string": "z = 3"})
    assert none.is_error and "was not found" in none.plain
    ok = await run.call(
        "edit", {"path": "a.py", "old_string": "x = 1", "new_string": "x = 3", "replace_all": True}
    )
    assert not ok.is_error and ok.data["replacements"] == 2
    assert (run.root / "a.py").read_text() == "x = 3\nx = 3\ny = 2\n"


async def test_apply_patch_changes_every_file_or_none(run):
    (run.root / "a.txt").write_text("a1\na2\n")
    (run.root / "b.txt").write_text("b1\nb2\n")
    bad = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-a1\n+A1\n a2\n"
        "--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n-nope\n+B1\n b2\n"
    )
    result = await run.call("apply_patch", {"patch": bad})
    assert result.is_error and "hunk 1 of 'b.txt' does not apply" in result.plain
    assert (run.root / "a.txt").read_text() == "a1\na2\n"
    good = bad.replace("-nope", "-b1")
    result = await run.call("apply_patch", {"patch": good})
    assert not result.is_error, result.plain
    assert (run.root / "a.txt").read_text() == "A1\na2\n" and (run.root / "b.txt").read_text() == "B1\nb2\n"


async def test_apply_patch_restores_files_when_a_write_fails_midway(run, monkeypatch):
    (run.root / "a.txt").write_text("a\n")
    (run.root / "b.txt").write_text("b\n")
    real = os.replace
    calls = {"n": 0}

    def failing(src, dst):
        calls["n"] += 1
        if calls["n"] == 2:  # new -> a.txt, then new -> b.txt fails
            raise OSError("disk full")
        return real(src, dst)

    monkeypatch.setattr(tether.atomic, "_replace", failing)
    patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-b\n+B\n"
    result = await run.call("apply_patch", {"patch": patch})
    assert result.is_error and "disk full" in result.plain
    assert (run.root / "a.txt").read_text() == "a\n" and (run.root / "b.txt").read_text() == "b\n"
    assert sorted(p.name for p in run.root.iterdir()) == ["a.txt", "b.txt"]


async def test_apply_patch_creates_and_deletes_and_rejects_garbage(run):
    (run.root / "old.txt").write_text("bye\n")
    patch = "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hi\n--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
    result = await run.call("apply_patch", {"patch": patch})
    assert not result.is_error, result.plain
    assert (run.root / "new.txt").read_text() == "hi\n" and not (run.root / "old.txt").exists()
    garbage = await run.call("apply_patch", {"patch": "just some words"})
    assert garbage.is_error and "no file headers" in garbage.plain
    outside = await run.call(
        "apply_patch", {"patch": "--- /dev/null\n+++ b/../evil.txt\n@@ -0,0 +1 @@\n+x\n"}
    )
    assert outside.is_error and "outside the root" in outside.plain
    assert not (run.root.parent / "evil.txt").exists()


async def test_a_symlink_that_leads_out_is_named_as_such(run, tmp_path):
    (run.root / "link").symlink_to(tmp_path)
    result = await run.call("read", {"path": "link/anything.txt"})
    assert "resolves outside the root through a symlink" in result.plain
    plain = await run.call("read", {"path": "../anything.txt"})
    assert "resolves outside the root;" in plain.plain


# -- apply_patch keeps every byte it does not change (issue 18, item 2) -------------------------------------


async def test_apply_patch_keeps_crlf_form_feeds_and_line_separators_it_does_not_touch(run):
    (run.root / "c.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    (run.root / "s.py").write_bytes("a = 1\x0c\ns = 'x\u2028y'\nb = 2\n".encode())
    patch = (
        "--- a/c.txt\n+++ b/c.txt\n@@ -1,2 +1,3 @@\n one\n-two\n+one\n+TWO\n"
        "--- a/s.py\n+++ b/s.py\n@@ -2,2 +2,2 @@\n s = 'x\u2028y'\n-b = 2\n+b = 3\n"
    )
    result = await run.call("apply_patch", {"patch": patch})
    assert not result.is_error, result.plain
    assert (
        run.root / "c.txt"
    ).read_bytes() == b"one\r\none\r\nTWO\r\nthree\r\n"  # added lines take the file's ending
    assert (run.root / "s.py").read_bytes() == "a = 1\x0c\ns = 'x\u2028y'\nb = 3\n".encode()


async def test_apply_patch_honours_no_newline_markers_and_git_renames(run):
    (run.root / "n.txt").write_bytes(b"a\nb")
    (run.root / "old.txt").write_bytes(b"keep\r\nme\n")
    patch = (
        "diff --git a/n.txt b/n.txt\n--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+B\n"
        "diff --git a/old.txt b/moved/new.txt\nsimilarity index 100%\nrename from old.txt\nrename to moved/new.txt\n"
    )
    result = await run.call("apply_patch", {"patch": patch})
    assert not result.is_error, result.plain
    assert (run.root / "n.txt").read_bytes() == b"a\nB\n"
    assert (run.root / "moved" / "new.txt").read_bytes() == b"keep\r\nme\n" and not (
        run.root / "old.txt"
    ).exists()
    assert "renamed old.txt -> moved/new.txt" in result.plain


async def test_apply_patch_refuses_lines_past_the_hunks_count(run):
    (run.root / "x.txt").write_text("a\n")
    result = await run.call(
        "apply_patch", {"patch": "--- a/x.txt\n+++ b/x.txt\n@@ -1 +1 @@\n-a\n+b\n+extra\n"}
    )
    assert result.is_error and "patch line 6 ('+extra') lies past the end of its hunk" in result.plain
    short = await run.call("apply_patch", {"patch": "--- a/x.txt\n+++ b/x.txt\n@@ -1,3 +1,3 @@\n a\n"})
    assert short.is_error and "the patch does not parse" in short.plain
    assert (run.root / "x.txt").read_text() == "a\n"


# -- what is not a regular file, and what is too big, is refused before it is opened (item 7) --------------


async def test_fifos_and_devices_are_refused_without_blocking(run):
    os.mkfifo(run.root / "p")
    patch = "--- a/p\n+++ b/p\n@@ -1 +1 @@\n-a\n+b\n"
    for tool, args in (
        ("read", {"path": "p"}),
        ("edit", {"path": "p", "old_string": "a", "new_string": "b"}),
        ("write", {"path": "p", "content": "x"}),
        ("apply_patch", {"patch": patch}),
    ):
        result = await asyncio.wait_for(run.call(tool, args), 30)  # a blocking open would never return
        assert result.is_error and "'p' is a named pipe (FIFO), not a regular file" in result.plain, (
            tool,
            result.plain,
        )
    assert stat.S_ISFIFO(os.stat(run.root / "p").st_mode)


async def test_a_huge_sparse_file_is_refused_by_its_size(run):
    with open(run.root / "sparse.bin", "wb") as fh:
        fh.truncate(2 * 1024**3)
    for tool, args in (("read", {}), ("edit", {"old_string": "a", "new_string": "b"})):
        result = await asyncio.wait_for(run.call(tool, {"path": "sparse.bin", **args}), 30)
        assert result.is_error and "is 2048.0 MiB, more than the 16 MiB these tools read" in result.plain


async def test_file_io_runs_off_the_event_loop(run, monkeypatch):
    import threading

    loop_thread = threading.get_ident()
    seen: list[int] = []
    real = tether.files._read_bytes

    def spy(path, rel):
        seen.append(threading.get_ident())
        return real(path, rel)

    monkeypatch.setattr(tether.files, "_read_bytes", spy)
    (run.root / "a.txt").write_text("a\n")
    await run.call("read", {"path": "a.txt"})
    await run.call("edit", {"path": "a.txt", "old_string": "a", "new_string": "b"})
    await run.call("apply_patch", {"patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-b\n+c\n"})
    assert len(seen) == 3 and loop_thread not in seen


# -- bad input is one line, never "a fault of the tool" (item 15) ------------------------------------------


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("a\x00b", "path contains a NUL character"),
        ("x" * 5000, "path is too long (5000 bytes, longest name 5000)"),
        ("loop/x", "goes through a symlink loop"),
        ("bad\udcff.txt", "path: unpaired surrogate U+DCFF at character 3"),
    ],
)
async def test_impossible_paths_are_one_line_argument_errors(run, path, says):
    (run.root / "loop").symlink_to("loop")
    extra = {"read": {}, "write": {"content": "x"}, "edit": {"old_string": "a", "new_string": "b"}}
    for tool, args in extra.items():
        result = await run.call(tool, {"path": path, **args})
        assert result.is_error and says in result.plain, (tool, result.plain)
        assert_model_error(result)
        assert "\n" not in result.plain, (tool, result.plain)
    patch = await run.call("apply_patch", {"patch": f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n"})
    assert_model_error(patch)
    assert "\n" not in patch.plain, patch.plain


async def test_unpaired_surrogates_in_text_are_one_line_argument_errors(run):
    (run.root / "a.txt").write_text("a\n")
    for tool, args, says in (
        (
            "write",
            {"path": "a.txt", "content": "a\ud800b"},
            "content: unpaired surrogate U+D800 at character 1",
        ),
        (
            "edit",
            {"path": "a.txt", "old_string": "a", "new_string": "\udfff"},
            "new_string: unpaired surrogate U+DFFF",
        ),
        (
            "apply_patch",
            {"patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+\udc80\n"},
            "patch: unpaired surrogate",
        ),
    ):
        result = await run.call(tool, args)
        assert result.is_error and says in result.plain and "\n" not in result.plain, (tool, result.plain)
    assert (run.root / "a.txt").read_text() == "a\n"


async def test_a_file_in_the_way_of_a_folder_is_one_line(run):
    (run.root / "f").write_text("x")
    result = await run.call("write", {"path": "f/a.txt", "content": "x"})
    assert_model_error(result)
    assert "\n" not in result.plain, result.plain
    assert "a part of the path is a file, not a folder" in result.plain


# -- approval sees the paths a call will write (issue 16) ----------------------------------------------------


class ProtectPyproject:
    asked: list[tuple[str, list[str]]]

    def __init__(self):
        self.asked = []

    @tether.hookimpl
    def tether_approve(self, run, tool, arguments, paths):
        self.asked.append((tool.name, list(paths)))
        return "pyproject.toml is protected" if "pyproject.toml" in paths else None


async def test_approval_sees_the_files_apply_patch_would_write(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (root / "a.txt").write_text("a\n")
    policy = ProtectPyproject()
    async with tether.open_run(root, plugins=[tether.files, policy], load_entry_points=False) as r:
        patch = (
            "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n"
            "--- a/pyproject.toml\n+++ b/pyproject.toml\n@@ -1,2 +1,2 @@\n [project]\n-name = 'x'\n+name = 'y'\n"
        )
        refused = await r.call("apply_patch", {"patch": patch})
        allowed = await r.call("write", {"path": "a.txt", "content": "b\n"})
    assert refused.is_error and "was not approved: pyproject.toml is protected" in refused.plain
    assert (root / "pyproject.toml").read_text() == "[project]\nname = 'x'\n" and not allowed.is_error
    assert ("apply_patch", ["a.txt", "pyproject.toml"]) in policy.asked and (
        "write",
        ["a.txt"],
    ) in policy.asked


async def test_files_known_only_when_writing_are_approved_before_any_is_written(tmp_path):
    """A tool whose `touches` names one file but whose work writes more (a rename's edits) asks again."""
    from tether.tools import Tool, ToolResult

    root = tmp_path / "r"
    root.mkdir()
    (root / "pyproject.toml").write_text("x\n")

    @attrs.frozen
    class Args:
        path: str = tether.arg("start file")

    async def rename_like(ctx, args):
        await ctx.run.write_files({ctx.run.root / args.path: b"1\n", ctx.run.root / "pyproject.toml": b"2\n"})
        return ToolResult.text("wrote")

    class Family:
        @tether.hookimpl
        def tether_register_tools(self, run, register):
            register(Tool("renamer", "write", "d", Args, rename_like, family="t", touches=lambda a: [a.path]))

    policy = ProtectPyproject()
    async with tether.open_run(root, plugins=[Family(), policy], load_entry_points=False) as r:
        result = await r.call("renamer", {"path": "a.py"})
    assert (
        result.is_error
        and "pyproject.toml is protected" in result.plain
        and "Nothing was written" in result.plain
    )
    assert policy.asked == [("renamer", ["a.py"]), ("renamer", ["a.py", "pyproject.toml"])]
    assert not (root / "a.py").exists() and (root / "pyproject.toml").read_text() == "x\n"


# -- structured data is bounded as the text is (item 16) ------------------------------------------------------


async def test_error_data_echoing_a_huge_argument_is_bounded(tmp_path):
    from tether.tools import Tool, ToolError

    @attrs.frozen
    class Args:
        worker_id: str = tether.arg("id")

    async def wait(ctx, args):
        raise ToolError(
            f"unknown worker {args.worker_id[:20]}",
            code="unknown_worker",
            worker_id=args.worker_id,
            known=[args.worker_id] * 3,
        )

    class Family:
        @tether.hookimpl
        def tether_register_tools(self, run, register):
            register(Tool("wait", "read", "d", Args, wait, family="t"))

    async with tether.open_run(tmp_path, plugins=[Family()], load_entry_points=False) as r:
        result = await r.call("wait", {"worker_id": "w" * 10_000_000})
        small = await r.call("wait", {"worker_id": "w1"})
    assert len(json.dumps(result.data)) < 4 * 30_000 + 1000
    assert result.data["error"] == "unknown_worker" and "data_cut" in result.data
    assert small.data == {"error": "unknown_worker", "worker_id": "w1", "known": ["w1"] * 3}


async def test_data_past_the_limit_keeps_a_prefix_of_each_list(tmp_path):
    from tether.tools import Tool, ToolResult

    @attrs.frozen
    class Args:
        n: int = tether.arg("items")

    async def find(ctx, args):
        items = [{"file": f"f{i}.py", "text": "x" * 500} for i in range(args.n)]
        return ToolResult.text("found", {"matches": items, "total": args.n, "files": ["a.py"] * 5})

    class Family:
        @tether.hookimpl
        def tether_register_tools(self, run, register):
            register(Tool("find", "read", "d", Args, find, family="t"))

    async with tether.open_run(
        tmp_path, plugins=[Family()], load_entry_points=False, options={"max_output_chars": 10_000}
    ) as r:
        result = await r.call("find", {"n": 1000})
        small = await r.call("find", {"n": 3})
    data = result.data
    assert len(json.dumps(data)) <= 4 * 10_000
    kept = len(data["matches"])
    assert 50 < kept < 1000 and data["matches"] == [
        {"file": f"f{i}.py", "text": "x" * 500} for i in range(kept)
    ]
    assert data["total"] == 1000 and data["files"] == ["a.py"] * 5
    assert f"matches: the first {kept} of 1000" in data["data_cut"]
    assert "data_cut" not in small.data and len(small.data["matches"]) == 3


@pytest.mark.parametrize("tool", ["vibe_wait", "vibe_kill", "vibe_send"])
async def test_vibe_tools_echoing_a_10_mb_worker_id_answer_bounded_data(tmp_path, tool):
    import sys

    from tether_vibe import plugin

    extra = {"message": "hi"} if tool == "vibe_send" else {}
    async with tether.open_run(
        tmp_path,
        modes={"vibe"},
        options={"vibe": {"fast": [sys.executable, "-c", "pass"]}},
        plugins=[plugin],
        load_entry_points=False,
    ) as r:
        result = await r.call(tool, {"worker_id": "w" * 10_000_000, **extra})
    assert result.is_error and result.data["error"] == "unknown_worker"
    assert len(result.plain) < 31_000 and len(json.dumps(result.data)) < 31_000


async def test_approval_sees_the_files_resolve_would_write(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1"\n')
    policy = ProtectPyproject()
    async with open_test_run(root, only=["astgrep"], plugins=[policy]) as r:
        staged = await r.call(
            "ast_edit",
            {
                "pattern": 'version = "1"',
                "rewrite": 'version = "2"',
                "path": "pyproject.toml",
                "language": "toml",
            },
        )
        assert not staged.is_error, staged.plain
        refused = await r.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
    assert refused.is_error and "was not approved: pyproject.toml is protected" in refused.plain
    assert ("resolve", ["pyproject.toml"]) in policy.asked
    assert (root / "pyproject.toml").read_text() == '[project]\nname = "x"\nversion = "1"\n'


async def test_a_character_device_is_refused_not_read_until_memory_runs_out(run):
    try:
        os.mknod(run.root / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # what /dev/zero is
    except PermissionError:
        pytest.skip("this user may not make device nodes")
    for tool, args in (("read", {}), ("edit", {"old_string": "a", "new_string": "b"})):
        result = await asyncio.wait_for(run.call(tool, {"path": "zero", **args}), 30)
        assert result.is_error and "'zero' is a character device, not a regular file" in result.plain


async def test_an_unpaired_surrogate_in_a_search_pattern_is_an_argument_error(tmp_path):
    (tmp_path / "a.py").write_text("f(1)\n")
    async with open_test_run(tmp_path, only=["astgrep"]) as r:
        result = await r.call("ast_grep", {"pattern": "f(\ud83d)"})
    assert result.is_error and "pattern: unpaired surrogate U+D83D at character 2" in result.plain
    assert_model_error(result)
    assert "\n" not in result.plain
