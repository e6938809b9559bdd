"""Third-party grammars through `tether_astgrep_grammars`, with the PyPI tree-sitter-python wheel."""

from __future__ import annotations

import types
from pathlib import Path

import tether
import tree_sitter_python  # a test dependency (tests/pyproject.toml): CI must run these, never skip them
from tether.testing import assert_model_error
from tether_astgrep.grammars import Grammar, Rung
from tether_astgrep.hookspecs import tether_astgrep_parsers


class WheelGrammars:
    """Replaces the built-in python grammar and adds 'starlark' (Python syntax) for .star/.bzl files."""

    @tether.hookimpl
    def tether_astgrep_grammars(self, run):
        ladder = (Rung("statement"),)
        return [
            Grammar("python", (".py",), tree_sitter_python.language, ladder, expando="µ"),
            Grammar("starlark", (".star", ".bzl"), tree_sitter_python.language, ladder, expando="µ"),
        ]


async def test_a_wheel_grammar_replaces_and_adds_languages(project: Path):
    (project / "BUILD.star").write_text('cc_library(name = "a", srcs = ["a.c"])\nprint("x")\n')
    (project / "a.py").write_text("print(1)\n")
    async with tether.open_run(project, plugins=[WheelGrammars()]) as run:
        pool = run.resource(tether_astgrep_parsers)
        registry = pool.registry()
        assert registry.by_id["python"].language is tree_sitter_python.language
        assert registry.by_id["starlark"].extensions == (".star", ".bzl")
        assert "java" in registry.by_id  # the built-ins are still there
        star = await run.call("ast_grep", {"pattern": "cc_library(name = $N, $$$REST)", "path": "BUILD.star"})
        assert not star.is_error, star.plain
        assert [(m["captures"]["N"], m["captures"]["REST"]) for m in star.data["matches"]] == [
            ('"a"', 'srcs = ["a.c"]')
        ]
        assert star.data["language"] == "starlark"
        py = await run.call("ast_grep", {"pattern": "print($A)", "language": "python", "path": "a.py"})
        assert py.data["total"] == 1
        assert pool._can_fork_out(registry.by_id["starlark"])  # the wheel's language() pickles for workers


class LambdaGrammar:
    @tether.hookimpl
    def tether_astgrep_grammars(self, run):
        return [
            Grammar(
                "pyl", (".pyl",), lambda: tree_sitter_python.language(), (Rung("statement"),), expando="µ"
            )
        ]


async def test_an_unpicklable_loader_searches_in_the_run_process(project: Path):
    padding = "# " + "x" * 40_000 + "\n"
    for i in range(40):  # large enough for workers, which a lambda cannot reach
        (project / f"m{i}.pyl").write_text(padding + "".join(f"f({j})\n" for j in range(20)))
    async with tether.open_run(project, plugins=[LambdaGrammar()]) as run:
        result = await run.call("ast_grep", {"pattern": "f($A)", "max_results": 1})
        assert not result.is_error, result.plain
        assert result.data["total"] == 40 * 20
        assert run.resource(tether_astgrep_parsers)._pool is None


async def test_the_unknown_language_error_lists_every_language_that_works(project: Path):
    """The run's grammars (built-in and a plugin's) and every other grammar of the pack."""
    from tether_astgrep.grammars import pack_ids

    (project / "a.toml").write_text('name = "x"\n')
    (project / "b.zig").write_text("const x = 1;\n")
    async with tether.open_run(project, plugins=[WheelGrammars()]) as run:
        result = await run.call("ast_grep", {"pattern": "f($A)", "language": "klingon"})
        registry = run.resource(tether_astgrep_parsers).registry()
        assert result.is_error and result.data["error"] == "unknown_language", result.plain
        assert_model_error(result)
        assert "\n" not in result.plain.strip()
        listed, pack = result.data["languages"], result.data["pack_languages"]
        assert set(listed) == set(registry.by_id) and "starlark" in listed and "lua" in listed
        assert set(listed) | set(pack) == set(registry.by_id) | set(pack_ids()) and not set(listed) & set(
            pack
        )
        for name in ("starlark", "lua", "zig", "toml", "markdown", "verilog"):
            assert f" {name}," in result.plain or result.plain.rstrip().endswith(name), name
        # what the error offers works: two pack grammars asked for by id
        toml = await run.call("ast_grep", {"pattern": "name = $V", "language": "toml", "path": "a.toml"})
        zig = await run.call("ast_grep", {"pattern": "const x = $V;", "language": "zig", "path": "b.zig"})
        assert [m["captures"]["V"] for m in (*toml.data["matches"], *zig.data["matches"])] == ['"x"', "1"], (
            toml.plain,
            zig.plain,
        )


README = Path(__file__).parents[2] / "plugins" / "astgrep" / "README.md"


def _readme_plugin() -> types.ModuleType:
    """The grammar plugin of the README's "Writing a grammar plugin", as written there."""
    text = README.read_text()
    start = text.index("```python\n# lua_grammar.py") + len("```python\n")
    module = types.ModuleType("lua_grammar")
    exec(compile(text[start : text.index("```", start)], str(README), "exec"), module.__dict__)
    return module


async def test_the_readme_grammar_plugin_works_as_written(project: Path):
    import tree_sitter_lua  # a test dependency, as tree-sitter-python

    (project / "a.lua").write_text('local t = {\n  ["a b"] = 1,\n}\nif v == nil then\n  print(v)\nend\n')
    async with tether.open_run(project, plugins=[_readme_plugin()]) as run:
        lua = run.resource(tether_astgrep_parsers).registry().by_id["lua"]
        assert lua.language is tree_sitter_lua.language  # the plugin's grammar replaced the built-in one
        found = {}
        # an expression, a statement, and a table field (a member: no statement, no expression)
        for pattern in ("$A == nil", "print($A)", "[$K] = $V"):
            result = await run.call("ast_grep", {"pattern": pattern})
            assert not result.is_error, result.plain
            found[pattern] = [(m["text"], m["captures"]) for m in result.data["matches"]]
    assert found == {
        "$A == nil": [("v == nil", {"A": "v"})],
        "print($A)": [("print(v)", {"A": "v"})],
        "[$K] = $V": [('["a b"] = 1', {"K": '"a b"', "V": "1"})],
    }
