"""Rewrites that never break the parse, kept tails named by file:line, and searches that survive deep trees."""

from __future__ import annotations

import pytest
import tether
from tether.testing import assert_model_error

TRY = "try:\n    $$$B\nexcept $E:\n    pass"
WITH = "with contextlib.suppress($E):\n    $$$B"
# the second try has an `else:`: the pattern stops before it, the kept tail no longer fits after a `with`;
# lines reported are those of the rewritten file (each try shrinks by two lines)
CLICK_LIKE = (
    "import os\n\n\ndef a(p):\n    try:\n        os.remove(p)\n    except OSError:\n        pass\n\n\n"
    "def b(p):\n    try:\n        os.remove(p)\n    except OSError:\n        pass\n    else:\n        done()\n"
)


async def test_rewrite_that_breaks_the_parse_is_refused_with_file_and_line(project):
    (project / "c.py").write_text(CLICK_LIKE)
    async with tether.open_run(project) as run:
        result = await run.call("ast_edit", {"pattern": TRY, "rewrite": WITH})
        assert result.is_error, result.plain
        assert result.data["error"] == "breaks_parse"
        assert result.data["errors"] == [{"file": "c.py", "line": 12, "what": "unexpected 'else'"}]
        assert "c.py:12 (unexpected 'else')" in result.plain and "Nothing was staged" in result.plain
        assert "matches at c.py:10 went on past the pattern" in result.plain  # the kept tail, by file:line
        assert_model_error(result, "allow_parse_errors")
        assert run.staging.changes == {}
    assert (project / "c.py").read_text() == CLICK_LIKE


async def test_allow_parse_errors_stages_with_the_warning_in_the_preview(project):
    (project / "c.py").write_text(CLICK_LIKE)
    async with tether.open_run(project) as run:
        staged = await run.call("ast_edit", {"pattern": TRY, "rewrite": WITH, "allow_parse_errors": True})
        assert not staged.is_error, staged.plain
        assert staged.data["replacements"] == 2
        assert staged.data["parse_errors"] == [{"file": "c.py", "line": 12, "what": "unexpected 'else'"}]
        assert staged.data["tails"] == [{"file": "c.py", "line": 10}] and staged.data["kept_tails"] == 1
        assert "WARNING: staged with allow_parse_errors" in staged.plain and "c.py:12" in staged.plain
        await run.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
    assert "    else:\n        done()\n" in (project / "c.py").read_text()  # nothing deleted


async def test_rewrite_of_a_file_that_never_parsed_is_not_refused(project):
    (project / "c.py").write_text("print(1)\ndef broken(:\n")
    async with tether.open_run(project) as run:
        staged = await run.call("ast_edit", {"pattern": "print($A)", "rewrite": "log($A)"})
        assert not staged.is_error, staged.plain
        assert "parse_errors" not in staged.data


async def test_rewrite_that_adds_errors_to_a_broken_file_is_refused_naming_only_the_new_ones(project):
    """A file with a syntax error already (its last line here) may keep it; an error the rewrite adds is refused."""
    broken = CLICK_LIKE + "print(1 2)\n"
    (project / "c.py").write_text(broken)
    async with tether.open_run(project) as run:
        before = await run.call("ast_grep", {"pattern": TRY})
        assert before.data["total"] == 2, before.plain  # the matches are there despite the error
        result = await run.call("ast_edit", {"pattern": TRY, "rewrite": WITH})
        assert result.is_error and result.data["error"] == "breaks_parse", result.plain
        # the old error (now line 14) is not named; tree-sitter's recovery adds one around the next line
        errors = result.data["errors"]
        assert errors[0] == {"file": "c.py", "line": 12, "what": "unexpected 'else'"}, errors
        assert "unexpected '2'" not in str(errors)
        assert "adds syntax errors to 1 file" in result.plain and "Nothing was staged" in result.plain
        # the same file rewritten in a way that adds nothing: staged, its old error left alone
        fine = await run.call("ast_edit", {"pattern": "os.remove($P)", "rewrite": "os.unlink($P)"})
        assert not fine.is_error and "parse_errors" not in fine.data, fine.plain
    assert (project / "c.py").read_text() == broken


async def test_an_error_added_after_hundreds_of_old_ones_is_still_seen(project):
    """Every error is compared, not the first few hundred: the one the rewrite adds comes after 300 old ones."""
    broken = "x = = 1\n" * 300 + "\n\ndef z(p):\n    keep(p)\n    return p\n"
    (project / "c.py").write_text(broken)
    async with tether.open_run(project) as run:
        result = await run.call("ast_edit", {"pattern": "keep($A)", "rewrite": "keep($A $A)"})
        assert result.is_error and result.data["error"] == "breaks_parse", result.plain
        assert result.data["errors"] == [{"file": "c.py", "line": 304, "what": "unexpected 'p'"}], (
            result.plain
        )
        fine = await run.call("ast_edit", {"pattern": "keep($A)", "rewrite": "hold($A)"})
        assert not fine.is_error and "parse_errors" not in fine.data, fine.plain
    assert (project / "c.py").read_text() == broken


async def test_an_old_error_inside_a_capture_moves_with_it(project):
    """`a + lambda: a` is no Python; the rewrite carries it in $$$B to the new place, adding nothing."""
    (project / "c.py").write_text("x = 1\n\n\ndef f(a):\n    return a + lambda: a\n")
    async with tether.open_run(project) as run:
        staged = await run.call(
            "ast_edit", {"pattern": "def $F($$$A):\n    $$$B", "rewrite": "async def $F($$$A):\n    $$$B"}
        )
        assert not staged.is_error and staged.data["replacements"] == 1, staged.plain
        assert "parse_errors" not in staged.data


async def test_rewrite_that_keeps_parsing_is_staged_without_warning(project):
    (project / "c.py").write_text(CLICK_LIKE)
    async with tether.open_run(project) as run:
        staged = await run.call("ast_edit", {"pattern": "os.remove($P)", "rewrite": "os.unlink($P)"})
        assert not staged.is_error and "WARNING" not in staged.plain and staged.data["replacements"] == 2


async def test_a_kept_closing_token_is_a_tail_and_the_break_is_refused(project, sg):
    """Ruby `app.$A env` matches `app.call(env)` up to `env`: the `)` would be kept, and no longer parses."""
    (project / "ours.rb").write_text("def handle(app, env)\n  app.call(env)\nend\n")
    (project / "theirs.rb").write_text("def handle(app, env)\n  app.call(env)\nend\n")
    sg("app.$A env", project / "theirs.rb", "ruby", rewrite="app.$A env2", update=True)
    assert (
        project / "theirs.rb"
    ).read_text() == "def handle(app, env)\n  app.call env2\nend\n"  # ast-grep drops `)`
    async with tether.open_run(project) as run:
        result = await run.call(
            "ast_edit",
            {"pattern": "app.$A env", "rewrite": "app.$A env2", "path": "ours.rb", "language": "ruby"},
        )
        assert result.is_error and result.data["errors"] == [
            {"file": "ours.rb", "line": 2, "what": "unexpected ')'"}
        ]
        assert "matches at ours.rb:2 went on past the pattern" in result.plain
        staged = await run.call(
            "ast_edit",
            {
                "pattern": "app.$A env",
                "rewrite": "app.$A env2",
                "path": "ours.rb",
                "language": "ruby",
                "allow_parse_errors": True,
            },
        )
        assert staged.data["kept_tails"] == 1 and staged.data["tails"] == [{"file": "ours.rb", "line": 2}]


async def test_bytes_the_grammar_could_not_parse_are_never_dropped(project, sg):
    """Kotlin's `$$"..."` is an ERROR node the matcher skips; rewriting that match would drop `$$"`."""
    source = 'fun f() {\n    val s = $$"hello $$name"\n    val t = 1\n}\n'
    (project / "k.kt").write_text(source)
    assert len(sg("val $A = $B", project / "k.kt", "kotlin")) == 2  # ast-grep matches both
    async with tether.open_run(project) as run:
        staged = await run.call(
            "ast_edit", {"pattern": "val $A = $B", "rewrite": "var $A = $B", "language": "kotlin"}
        )
        assert not staged.is_error, staged.plain
        assert staged.data["replacements"] == 1
        assert staged.data["untouched"] == [{"file": "k.kt", "line": 2}]
        assert "left as they were (1)" in staged.plain and "k.kt:2" in staged.plain
        await run.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
    assert (project / "k.kt").read_text() == source.replace("val t", "var t")


async def test_repeated_metavariable_over_deep_trees_matches_like_ast_grep(project, sg):
    terms = "+".join(["a"] * 800)
    path = project / "deep.py"
    path.write_text(f"f({terms}, {terms})\nf({terms}, {terms}+a)\n")
    theirs = [m["range"]["start"]["line"] + 1 for m in sg("f($A, $A)", path, "python")]
    async with tether.open_run(project) as run:
        result = await run.call("ast_grep", {"pattern": "f($A, $A)"})
        assert not result.is_error, result.plain
        assert [m["start"]["line"] for m in result.data["matches"]] == theirs == [1]


@pytest.mark.parametrize("depth", [150, 400])
async def test_deeply_nested_pattern_compiles_and_matches(project, depth):
    (project / "n.py").write_text("x = " + "f(" * depth + "1" + ")" * depth + "\n")
    async with tether.open_run(project) as run:
        result = await run.call("ast_grep", {"pattern": "f(" * depth + "$A" + ")" * depth})
        assert not result.is_error, result.plain
        assert [m["captures"]["A"] for m in result.data["matches"]] == ["1"]


async def test_one_file_that_fails_does_not_fail_the_search(project, monkeypatch):
    """A fault in one file (here injected into the matcher for one file) is named; the rest is searched."""
    from tether_astgrep import engine

    (project / "a.py").write_text("print(1)\n")
    (project / "generated.py").write_text("print(2)\n")
    real = engine.find_spans

    def flaky(tree, data, pattern, query):
        if b"print(2)" in data:
            raise RecursionError("maximum recursion depth exceeded")
        return real(tree, data, pattern, query)

    monkeypatch.setattr(engine, "find_spans", flaky)
    async with tether.open_run(project) as run:
        result = await run.call("ast_grep", {"pattern": "print($A)"})
    assert not result.is_error, result.plain
    assert [m["file"] for m in result.data["matches"]] == ["a.py"]
    assert result.data["skipped"] == {"failed": 1}
    assert "could not search 1 file" in result.plain and "generated.py (RecursionError" in result.plain
