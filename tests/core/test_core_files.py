"""The host's file tools: confined to the root, clear errors, all-or-nothing patches."""

from __future__ import annotations

import os

import pytest

import tether
import tether.atomic
import tether.files


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
    ok = await run.call("edit", {"path": "a.py", "old_string": "x = 1", "new_string": "x = 3", "replace_all": True})
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
        if calls["n"] == 3:  # a.txt -> backup, new -> a.txt, then b.txt's backup fails
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
    outside = await run.call("apply_patch", {"patch": "--- /dev/null\n+++ b/../evil.txt\n@@ -0,0 +1 @@\n+x\n"})
    assert outside.is_error and "outside the root" in outside.plain
    assert not (run.root.parent / "evil.txt").exists()


async def test_a_symlink_that_leads_out_is_named_as_such(run, tmp_path):
    (run.root / "link").symlink_to(tmp_path)
    result = await run.call("read", {"path": "link/anything.txt"})
    assert "resolves outside the root through a symlink" in result.plain
    plain = await run.call("read", {"path": "../anything.txt"})
    assert "resolves outside the root;" in plain.plain
