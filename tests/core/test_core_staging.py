"""Staged changes and previews (`tether.staging`): a dry run or a staged change says what it would introduce
without writing a byte, leaves the run's registry as it was, and `resolve` with if_clean refuses a breaking one.

The checker here is Python's own compiler (a real one: `compile` of the file's text), offered by a harness
plugin through the core's three diagnostics hooks, so the core's side is tested without a language server.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tether
import tether.files
from tether.diagnostics import Diagnostic, PreviewDiagnostics
from tether.hookspecs import hookimpl
from tether.testing import assert_model_error

GOOD = "def f(x):\n    return x + 1\n"


def _compile(rel: str, text: str | None) -> list[Diagnostic]:
    if text is None:
        return []
    try:
        compile(text, rel, "exec")
    except SyntaxError as exc:
        return [Diagnostic(rel, exc.lineno or 1, exc.offset or 1, "error", exc.msg, "syntax", "compile")]
    return []


class Compiler:
    """Diagnostics of .py files from `compile`, on write and in previews."""

    def __init__(self) -> None:
        self.previews = 0

    def _disk(self, run, paths) -> dict[str, list[Diagnostic]]:
        out = {}
        for rel in paths:
            if rel.endswith(".py"):
                p = run.root / rel
                out[rel] = _compile(rel, p.read_text() if p.exists() else None)
        return out

    @hookimpl
    def tether_diagnostics_before_write(self, run, paths):
        return self._disk(run, paths)

    @hookimpl
    def tether_diagnostics_after_write(self, run, paths):
        return self._disk(run, paths)

    @hookimpl
    def tether_diagnostics_preview(self, run, contents):
        self.previews += 1
        py = [rel for rel in contents if rel.endswith(".py")]
        after = {rel: _compile(rel, contents[rel]) for rel in py}
        return PreviewDiagnostics(before=self._disk(run, py), after=after, covered=py)


class Refuse:
    @hookimpl
    def tether_approve(self, run, tool, arguments, paths):
        return "no writes in this test"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "m.py").write_text(GOOD)
    (tmp_path / "notes.txt").write_text("hello\n")
    return tmp_path


def _open(root: Path, *extra):
    return tether.open_run(root, plugins=[tether.files, *extra], load_entry_points=False)


async def test_a_dry_run_writes_nothing_asks_no_approval_and_shows_what_it_would_break(root):
    checker = Compiler()
    async with _open(root, checker, Refuse()) as run:
        edit = await run.call(
            "edit",
            {"path": "m.py", "old_string": "return x + 1", "new_string": "return (x +", "dry_run": True},
        )
        assert not edit.is_error, edit.plain
        assert edit.plain.startswith(
            "(dry run) would edit m.py: 1 replacement(s), first at line 2; nothing was written"
        )
        assert "This change would introduce 1 error(s), 0 warning(s):" in edit.plain
        assert "m.py:2:" in edit.plain and "+    return (x +" in edit.plain  # the diagnostic and the diff
        assert edit.data["preview"]["introduced"][0]["file"] == "m.py"
        write = await run.call("write", {"path": "new.py", "content": "x = 1\n", "dry_run": True})
        assert not write.is_error and "would create new.py" in write.plain
        assert "The preview found no new diagnostics: nothing would be introduced." in write.plain
        patch = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n def f(x):\n-    return x + 1\n+    return x +\n"
        patched = await run.call("apply_patch", {"patch": patch, "dry_run": True})
        assert not patched.is_error and "would introduce 1 error(s)" in patched.plain, patched.plain
        # the same call without dry_run is put to the approval hook, which refuses it
        real = await run.call(
            "edit", {"path": "m.py", "old_string": "return x + 1", "new_string": "return (x +"}
        )
        assert real.is_error and "not approved" in real.plain
        assert checker.previews == 3
    assert (root / "m.py").read_text() == GOOD and not (root / "new.py").exists()


async def test_a_preview_leaves_the_registry_so_the_write_after_it_reports_the_same(root):
    async with _open(root, Compiler()) as run:
        args = {"path": "m.py", "old_string": "return x + 1", "new_string": "return (x +"}
        for _ in range(2):  # a preview neither records nor consumes: twice the same answer
            dry = await run.call("edit", {**args, "dry_run": True})
            assert len(dry.data["preview"]["introduced"]) == 1
        done = await run.call("edit", args)
        assert not done.is_error
        assert [d["message"] for d in done.data["diagnostics"]] == [
            d["message"] for d in dry.data["preview"]["introduced"]
        ]


async def test_a_file_no_checker_previews_is_said_and_no_clean_is_claimed(root):
    async with _open(root) as run:
        dry = await run.call("write", {"path": "notes.txt", "content": "bye\n", "dry_run": True})
        assert not dry.is_error
        assert "not checked (no checker of this run previews changes to it): notes.txt" in dry.plain
        assert "no new diagnostics" not in dry.plain
    assert (root / "notes.txt").read_text() == "hello\n"


async def test_resolve_exists_only_when_a_tool_of_the_run_can_stage(root, monkeypatch):
    async with _open(root) as run:
        assert "resolve" not in {t.name for t in run.tools()}
    monkeypatch.setenv("TETHER_PLUGINS", "astgrep")
    async with tether.open_run(root, plugins=[tether.files]) as run:
        tools = {t.name: t for t in run.tools()}
        assert "resolve" in tools and tools["resolve"].family == "core" and tools["ast_edit"].stages


async def test_if_clean_refuses_a_staged_change_that_breaks_and_writes_one_that_does_not(root, monkeypatch):
    monkeypatch.setenv("TETHER_PLUGINS", "astgrep")
    (root / "u.py").write_text("from m import f\nprint(f(1))\n")
    async with tether.open_run(root, plugins=[tether.files, Compiler()]) as run:
        bad = await run.call(
            "ast_edit",
            {"pattern": "f($A)", "rewrite": "f($A,", "path": "u.py", "allow_parse_errors": True},
        )
        assert not bad.is_error, bad.plain
        assert "This change would introduce 1 error(s)" in bad.plain
        refused = await run.call(
            "resolve", {"edit_id": bad.data["edit_id"], "action": "accept", "if_clean": True}
        )
        assert refused.is_error and refused.data["error"] == "not_clean", refused.plain
        assert_model_error(refused, "Nothing was written")
        assert (root / "u.py").read_text() == "from m import f\nprint(f(1))\n"
        good = await run.call("ast_edit", {"pattern": "f($A)", "rewrite": "f($A + 1)", "path": "u.py"})
        assert "The preview found no new diagnostics: nothing would be introduced." in good.plain, good.plain
        done = await run.call(
            "resolve", {"edit_id": good.data["edit_id"], "action": "accept", "if_clean": True}
        )
        assert not done.is_error, done.plain
        # the broken one, accepted without if_clean, is written and says the preview showed its error
        again = await run.call(
            "ast_edit",
            {"pattern": "print($A)", "rewrite": "print($A", "path": "u.py", "allow_parse_errors": True},
        )
        written = await run.call("resolve", {"edit_id": again.data["edit_id"], "action": "accept"})
        assert not written.is_error and "the preview showed all 1 of these" in written.plain, written.plain
    assert (root / "u.py").read_text().startswith("from m import f\nprint(f(1 + 1)")


async def test_if_clean_refuses_what_the_preview_could_not_check(root, monkeypatch):
    monkeypatch.setenv("TETHER_PLUGINS", "astgrep")
    async with tether.open_run(root, plugins=[tether.files]) as run:
        staged = await run.call("ast_edit", {"pattern": "x + 1", "rewrite": "x + 2", "path": "m.py"})
        assert not staged.is_error, staged.plain
        refused = await run.call(
            "resolve", {"edit_id": staged.data["edit_id"], "action": "accept", "if_clean": True}
        )
        assert refused.is_error and refused.data["error"] == "not_checked", refused.plain
        assert "m.py" in refused.plain and "Accept without if_clean" in refused.plain
    assert (root / "m.py").read_text() == GOOD
