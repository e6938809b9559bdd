"""Diagnostics on write: only what a write introduced and the run has not reported yet comes back."""

from __future__ import annotations

import re

import pytest
import tether
import tether.files
from tether import Diagnostic, hookimpl
from tether.diagnostics import WriteDiagnostics


class FakeChecker:
    """A diagnostics plugin: every line containing ERROR:<msg> is an error, WARN:<msg> a warning.

    It also reports files that import a missing name from a written file (the 'dependent file' case).
    """

    def __init__(self, root):
        self.root = root

    def _scan(self, rel: str) -> list[Diagnostic]:
        path = self.root / rel
        if not path.exists():
            return []
        out = []
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for kind, msg in re.findall(r"(ERROR|WARN):(\w+)", line):
                out.append(
                    Diagnostic(
                        rel,
                        n,
                        line.index(kind) + 1,
                        "error" if kind == "ERROR" else "warning",
                        msg,
                        "X1",
                        "fake",
                    )
                )
        return out

    def _dependents(self, paths):
        out = {}
        for p in sorted(self.root.glob("*.txt")):
            rel = p.name
            if rel in paths:
                continue
            for target in paths:
                needs = re.findall(r"needs (\w+) from " + re.escape(target), p.read_text())
                have = (self.root / target).read_text() if (self.root / target).exists() else ""
                diags = [
                    Diagnostic(rel, 1, 1, "error", f"'{n}' is not defined in {target}")
                    for n in needs
                    if n not in have
                ]
                out[rel] = diags
        return out

    @hookimpl
    def tether_diagnostics_before_write(self, run, paths):
        return {p: self._scan(p) for p in paths} | self._dependents(paths)

    @hookimpl
    async def tether_diagnostics_after_write(self, run, paths):
        return WriteDiagnostics({p: self._scan(p) for p in paths} | self._dependents(paths), [])


@pytest.fixture
async def run(tmp_path):
    async with tether.open_run(
        tmp_path, plugins=[tether.files, FakeChecker(tmp_path)], load_entry_points=False
    ) as r:
        yield r


async def write(run, path, content):
    result = await run.call("write", {"path": path, "content": content})
    assert not result.is_error, result.plain
    return result


def reported(result) -> list[tuple[str, int, str]]:
    return [(d["file"], d["line"], d["message"]) for d in (result.data or {}).get("diagnostics", [])]


async def test_only_the_new_error_is_reported_when_the_file_already_had_one(run, tmp_path):
    (tmp_path / "a.txt").write_text("ERROR:old\n")
    result = await write(run, "a.txt", "ERROR:old\nERROR:new\n")
    assert reported(result) == [("a.txt", 2, "new")]
    assert "This write introduced 1 error(s), 0 warning(s):" in result.plain
    assert "a.txt:2:1: error [X1]: new" in result.plain


async def test_a_moved_diagnostic_is_not_reported_again(run):
    first = await write(run, "a.txt", "ERROR:boom\n")
    assert reported(first) == [("a.txt", 1, "boom")]
    moved = await write(run, "a.txt", "fine\nfine\nERROR:boom\n")
    assert reported(moved) == []
    assert "introduced" not in moved.plain


async def test_a_second_identical_message_in_the_same_file_is_reported(run):
    await write(run, "a.txt", "ERROR:dup\n")
    second = await write(run, "a.txt", "ERROR:dup\nERROR:dup\n")
    assert reported(second) == [("a.txt", 1, "dup")] or reported(second) == [("a.txt", 2, "dup")]
    assert len(reported(second)) == 1


async def test_fixed_then_reintroduced_is_reported_again(run):
    await write(run, "a.txt", "ERROR:flaky\n")
    fixed = await write(run, "a.txt", "fine\n")
    assert reported(fixed) == []
    back = await write(run, "a.txt", "ERROR:flaky\n")
    assert reported(back) == [("a.txt", 1, "flaky")]


async def test_a_diagnostic_there_before_the_run_wrote_is_never_introduced_by_a_revert(run, tmp_path):
    # a warning that existed before the first edit, vanished while the edit stood, and came back with
    # the revert: the revert did not introduce it
    (tmp_path / "a.txt").write_text("WARN:unknown\n")
    broken = await write(run, "a.txt", "ERROR:broken\n")
    assert reported(broken) == [("a.txt", 1, "broken")]
    reverted = await write(run, "a.txt", "WARN:unknown\n")
    assert reported(reverted) == [] and "introduced" not in reverted.plain, reverted.plain
    # the same for another file the write affects: its error was there when the run first saw it
    (tmp_path / "lib.txt").write_text("beta\n")
    (tmp_path / "user.txt").write_text("needs alpha from lib.txt\n")
    mended = await write(run, "lib.txt", "alpha beta\n")
    assert reported(mended) == []
    again = await write(run, "lib.txt", "beta\n")
    assert reported(again) == [], again.plain
    # one the run's own writes introduced, fixed and brought back is reported again
    await write(run, "a.txt", "WARN:unknown ERROR:mine\n")
    await write(run, "a.txt", "WARN:unknown\n")
    back = await write(run, "a.txt", "WARN:unknown ERROR:mine\n")
    assert reported(back) == [("a.txt", 1, "mine")]


async def test_new_diagnostics_in_other_files_are_reported_errors_first(run, tmp_path):
    (tmp_path / "lib.txt").write_text("alpha beta\n")
    (tmp_path / "user.txt").write_text("needs alpha from lib.txt\n")
    result = await write(run, "lib.txt", "beta WARN:style\n")
    assert reported(result) == [("user.txt", 1, "'alpha' is not defined in lib.txt"), ("lib.txt", 1, "style")]
    text = result.plain
    assert text.index("user.txt:1:1: error") < text.index("lib.txt:1:6: warning")


async def test_edit_and_apply_patch_are_wrapped_too(run, tmp_path):
    await write(run, "a.txt", "one\ntwo\n")
    edited = await run.call("edit", {"path": "a.txt", "old_string": "two", "new_string": "ERROR:edited"})
    assert reported(edited) == [("a.txt", 2, "edited")]
    patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-one\n+ERROR:patched\n ERROR:edited\n"
    patched = await run.call("apply_patch", {"patch": patch})
    assert reported(patched) == [("a.txt", 1, "patched")]


def only_errors(out):
    keep = [d for d in (out.data or {}).get("diagnostics", []) if d["severity"] == "error"]
    return tether.ToolResult(out.content[:1], out.is_error, {**(out.data or {}), "diagnostics": keep})


class OnlyErrors:
    @hookimpl(wrapper=True)
    def tether_write_result(self, run, tool, paths, result, introduced, notes):
        return only_errors((yield))


class OldOnlyErrors:  # the deprecated name, still served for one release
    @hookimpl(wrapper=True)
    def tether_post_write(self, run, tool, paths, result, introduced, notes):
        return only_errors((yield))


@pytest.mark.parametrize("harness", [OnlyErrors, OldOnlyErrors])
async def test_a_harness_wrapper_filters_what_the_model_sees(tmp_path, harness, recwarn):
    plugins = [tether.files, FakeChecker(tmp_path), harness()]
    async with tether.open_run(tmp_path, plugins=plugins, load_entry_points=False) as run:
        result = await run.call("write", {"path": "a.txt", "content": "WARN:w ERROR:e\n"})
    assert [d["message"] for d in result.data["diagnostics"]] == ["e"]
    assert "introduced" not in result.plain
    deprecated = [str(w.message) for w in recwarn if w.category is DeprecationWarning]
    if harness is OnlyErrors:
        assert deprecated == []
    else:
        (warning,) = deprecated
        assert warning.endswith(
            "implements tether_post_write, which is deprecated: implement tether_write_result "
            "(the old name works for one more release)"
        )


async def test_a_checker_that_fails_is_said_never_a_clean_write(tmp_path):
    class Broken:
        @hookimpl
        def tether_diagnostics_after_write(self, run, paths):
            raise TypeError("'<' not supported between instances of 'NoneType' and 'str'")

    async with tether.open_run(tmp_path, plugins=[tether.files, Broken()], load_entry_points=False) as run:
        result = await run.call("write", {"path": "a.txt", "content": "x\n"})
    assert not result.is_error and (tmp_path / "a.txt").read_text() == "x\n"
    assert "diagnostics unknown: a checker failed (TypeError); the write itself succeeded" in result.plain


async def test_a_checker_that_hangs_is_cut_off_and_said(tmp_path):
    import asyncio

    class Hangs:
        @hookimpl
        async def tether_diagnostics_after_write(self, run, paths):
            await asyncio.sleep(3600)

    async with tether.open_run(
        tmp_path,
        plugins=[tether.files, Hangs()],
        load_entry_points=False,
        options={"diagnostics_timeout": 0.1},
    ) as run:
        result = await run.call("write", {"path": "a.txt", "content": "x\n"})
    assert not result.is_error
    assert "diagnostics still pending" in result.plain
    assert (tmp_path / "a.txt").read_text() == "x\n"


def test_diagnostic_keys_sort_with_and_without_a_code():
    keys = [Diagnostic("a.py", 2, 1, "error", "m", None).key, Diagnostic("a.py", 1, 1, "error", "m", "X").key]
    assert sorted(keys) == [("a.py", "error", "", "m"), ("a.py", "error", "X", "m")]
