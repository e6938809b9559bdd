"""ast_edit stages, resolve accepts (all files or none) or discards; changes behind tether's back refuse."""

from __future__ import annotations

from pathlib import Path

import pytest
import tether
import tether.atomic
from tether.testing import assert_model_error

A = "def f(items):\n    items.append(1)\n    items.append(2)\n"
B = "x = []\nx.append(3)\n"
C = "nothing = 'x.append(4)'\n"


@pytest.fixture
def three(project: Path) -> Path:
    (project / "a.py").write_text(A)
    (project / "b.py").write_text(B)
    (project / "c.py").write_text(C)
    return project


def contents(root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(root.iterdir()) if p.is_file()}


async def stage(run, **extra):
    result = await run.call("ast_edit", {"pattern": "$X.append($Y)", "rewrite": "$X.extend([$Y])", **extra})
    assert not result.is_error, result.plain
    return result


async def test_stage_writes_nothing_and_accept_writes_all(three):
    before = contents(three)
    async with tether.open_run(three) as run:
        staged = await stage(run)
        assert staged.data == {
            "edit_id": "edit_1",
            "replacements": 3,
            "files": ["a.py", "b.py"],
            "kept_tails": 0,
            "tails": [],
            "preview": staged.data["preview"],
        }
        # no checker of this run previews Python here: said, and no claim of "clean"
        assert staged.data["preview"]["introduced"] == []
        assert {u["file"] for u in staged.data["preview"]["unchecked"]} == {"a.py", "b.py"}
        assert "no new diagnostics" not in staged.plain
        assert staged.plain.startswith(
            '(proposed) 3 replacements in 2 files; nothing is written until you call resolve with edit_id "edit_1"'
        )
        assert "+    items.extend([1])" in staged.plain and "-x.append(3)" in staged.plain
        assert contents(three) == before
        done = await run.call("resolve", {"edit_id": "edit_1", "action": "accept"})
        assert not done.is_error, done.plain
        assert done.data["files"] == ["a.py", "b.py"]
        again = await run.call("resolve", {"edit_id": "edit_1", "action": "accept"})
        assert again.is_error and "already accepted" in again.plain
    after = contents(three)
    assert after["a.py"] == "def f(items):\n    items.extend([1])\n    items.extend([2])\n"
    assert after["b.py"] == "x = []\nx.extend([3])\n"
    assert after["c.py"] == C
    assert sorted(p.name for p in three.iterdir()) == ["a.py", "b.py", "c.py"]  # no temp or backup left


async def test_discard_writes_nothing(three):
    before = contents(three)
    async with tether.open_run(three) as run:
        await stage(run)
        done = await run.call("resolve", {"edit_id": "edit_1", "action": "discard"})
        assert not done.is_error and "nothing was written" in done.plain
        late = await run.call("resolve", {"edit_id": "edit_1", "action": "accept"})
        assert late.is_error and "already discarded" in late.plain
    assert contents(three) == before


async def test_edit_behind_our_back_refuses_the_whole_change(three):
    async with tether.open_run(three) as run:
        await stage(run)
        (three / "b.py").write_text(B + "y = 1\n")
        before = contents(three)
        done = await run.call("resolve", {"edit_id": "edit_1", "action": "accept"})
        assert done.is_error
        assert "b.py (changed)" in done.plain and "nothing was written" in done.plain
        assert done.data["files"] == ["b.py"]
    assert contents(three) == before  # a.py was not rewritten either


async def test_same_size_same_mtime_change_is_detected(three):
    import os

    async with tether.open_run(three) as run:
        await stage(run)
        st = (three / "a.py").stat()
        (three / "a.py").write_text(A.replace("items", "ITEMS"))  # same size
        os.utime(three / "a.py", ns=(st.st_atime_ns, st.st_mtime_ns))  # and the same mtime
        done = await run.call("resolve", {"edit_id": "edit_1", "action": "accept"})
        assert done.is_error and "a.py (changed)" in done.plain
    assert (three / "b.py").read_text() == B


async def test_deleted_file_refuses(three):
    async with tether.open_run(three) as run:
        await stage(run)
        (three / "a.py").unlink()
        done = await run.call("resolve", {"edit_id": "edit_1", "action": "accept"})
        assert done.is_error and "a.py (deleted)" in done.plain
    assert not (three / "a.py").exists()
    assert (three / "b.py").read_text() == B


async def test_failure_on_second_write_restores_everything(three, monkeypatch):
    before = contents(three)
    real = tether.atomic._replace
    seen: list[str] = []

    def flaky(src, dst):
        # fail when the second file's new content is moved into place
        if str(src).endswith(".tether-new"):
            seen.append(Path(dst).name)
            if len(seen) == 2:
                raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(tether.atomic, "_replace", flaky)
    async with tether.open_run(three) as run:
        await stage(run)
        done = await run.call("resolve", {"edit_id": "edit_1", "action": "accept"})
        assert_model_error(done, "No space left on device", "no file was changed")
    assert seen == ["a.py", "b.py"]
    assert contents(three) == before
    assert sorted(p.name for p in three.iterdir()) == ["a.py", "b.py", "c.py"]


async def test_unknown_edit_id(three):
    async with tether.open_run(three) as run:
        await stage(run)
        done = await run.call("resolve", {"edit_id": "edit_9", "action": "accept"})
        assert done.is_error and "unknown edit_id 'edit_9'" in done.plain and "edit_1" in done.plain
        bad = await run.call("resolve", {"edit_id": "edit_1", "action": "apply"})
        assert bad.is_error and "accept" in bad.plain


async def test_unbound_metavariable_in_rewrite_is_an_error(three):
    before = contents(three)
    async with tether.open_run(three) as run:
        result = await run.call("ast_edit", {"pattern": "$X.append($Y)", "rewrite": "$X.extend($Z)"})
        assert result.is_error
        assert "$Z" in result.plain and "does not capture" in result.plain
        assert not (await run.call("resolve", {"edit_id": "edit_1", "action": "accept"})).plain.startswith(
            "accepted"
        )
    assert contents(three) == before


async def test_an_unbound_rewrite_of_a_pattern_that_matches_nothing_is_no_match_with_the_reason(three):
    """As ast-grep answers it: nothing matches, so nothing would be written with "$Z" as text; the
    answer says so, and why it would have been refused where the pattern matched."""
    before = contents(three)
    async with tether.open_run(three) as run:
        result = await run.call("ast_edit", {"pattern": "$X.pop($Y)", "rewrite": "$X.remove($Z)"})
        assert not result.is_error, result.plain
        assert result.plain.startswith(
            "no replacements: the pattern matches nothing in '.'; nothing was staged"
        )
        assert "the rewrite uses $Z, which the pattern does not capture" in result.plain
        assert result.data["edit_id"] is None and result.data["unbound"] == ["Z"]
    assert contents(three) == before


async def test_no_match_stages_nothing(three):
    async with tether.open_run(three) as run:
        result = await run.call("ast_edit", {"pattern": "$X.pop($Y)", "rewrite": "$X.remove($Y)"})
        assert not result.is_error and result.data["edit_id"] is None
        assert "nothing was staged" in result.plain


async def test_overlapping_matches_outer_wins(project):
    (project / "a.py").write_text("f(f(1))\n")
    async with tether.open_run(project) as run:
        staged = await run.call("ast_edit", {"pattern": "f($A)", "rewrite": "g($A)"})
        assert staged.data["replacements"] == 1
        await run.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
    assert (project / "a.py").read_text() == "g(f(1))\n"


async def test_code_past_the_pattern_is_kept_unlike_ast_grep(project, sg):
    """ast-grep issue #2856: a one-statement pattern matches a longer block and its rewrite drops the rest."""
    source = "if x:\n    a()\n    b()\nelse:\n    c()\n"
    (project / "ours.py").write_text(source)
    (project / "theirs.py").write_text(source)
    sg("if $C:\n    a()", project / "theirs.py", "python", rewrite="if $C:\n    z()", update=True)
    assert (project / "theirs.py").read_text() == "if x:\n    z()\n"  # b() and the else branch are gone
    async with tether.open_run(project) as run:
        staged = await run.call(
            "ast_edit", {"pattern": "if $C:\n    a()", "rewrite": "if $C:\n    z()", "path": "ours.py"}
        )
        assert staged.data["kept_tails"] == 1 and "kept after the replacement" in staged.plain
        await run.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
    assert (project / "ours.py").read_text() == "if x:\n    z()\n    b()\nelse:\n    c()\n"


async def test_multi_line_capture_is_reindented(project):
    (project / "a.py").write_text("class C:\n    def m(self):\n        run(a,\n            b)\n")
    async with tether.open_run(project) as run:
        staged = await run.call("ast_edit", {"pattern": "run($$$A)", "rewrite": "with lock:\n    run($$$A)"})
        await run.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
    assert (
        (project / "a.py").read_text()
        == "class C:\n    def m(self):\n        with lock:\n            run(a,\n                b)\n"
    )


@pytest.mark.parametrize(
    "args, expected",
    [
        ({"pattern": "$X.append(", "rewrite": "y"}, "does not parse as python code"),
        ({"pattern": "", "rewrite": "y"}, "the pattern is empty"),
        ({"pattern": "$X.append($Y)", "rewrite": "y", "path": "../outside"}, "outside the root"),
        ({"pattern": "$X.append($Y)", "rewrite": "y", "language": "klingon"}, "unknown language 'klingon'"),
        ({"pattern": "$X.append($Y)"}, "missing required argument 'rewrite'"),
    ],
)
async def test_bad_edit_input_stages_nothing(three, args, expected):
    before = contents(three)
    async with tether.open_run(three) as run:
        result = await run.call("ast_edit", args)
        assert_model_error(result, expected)
        assert run.staging.changes == {}
        empty = await run.call("resolve", {"edit_id": "", "action": "accept"})
        assert empty.is_error and "edit_id: must not be empty" in empty.plain
    assert contents(three) == before


async def test_statement_terminator_the_pattern_left_out_is_kept(project, sg):
    """`let $A: $T = $V` matches `let a: number = 1;`; ast-grep's rewrite drops the `;`, tether keeps it."""
    (project / "ours.ts").write_text("let a: number = 1;\n")
    (project / "theirs.ts").write_text("let a: number = 1;\n")
    sg("let $A: $T = $V", project / "theirs.ts", "typescript", rewrite="const $A: $T = $V", update=True)
    assert (project / "theirs.ts").read_text() == "const a: number = 1\n"
    async with tether.open_run(project) as run:
        staged = await run.call(
            "ast_edit", {"pattern": "let $A: $T = $V", "rewrite": "const $A: $T = $V", "path": "ours.ts"}
        )
        assert staged.data["kept_tails"] == 0  # punctuation is not counted as code left behind
        await run.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
    assert (project / "ours.ts").read_text() == "const a: number = 1;\n"


async def test_tab_indented_rewrite_keeps_tabs(project):
    (project / "a.go").write_text(
        "package main\n\nfunc f() error {\n\tif err != nil {\n\t\treturn err\n\t}\n\treturn nil\n}\n"
    )
    async with tether.open_run(project) as run:
        staged = await run.call(
            "ast_edit",
            {"pattern": "if err != nil { $$$B }", "rewrite": "if err != nil {\n\tlog(err)\n\t$$$B\n}"},
        )
        await run.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
    assert (project / "a.go").read_text() == (
        "package main\n\nfunc f() error {\n\tif err != nil {\n\t\tlog(err)\n\t\treturn err\n\t}\n\treturn nil\n}\n"
    )
