"""Third-party grammars through `tether_astgrep_grammars`, with the PyPI tree-sitter-python wheel."""

from __future__ import annotations

from pathlib import Path

import tether
import tree_sitter_python  # a test dependency (tests/pyproject.toml): CI must run these, never skip them
from tether_astgrep.grammars import Grammar, Rung


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
        pool = run.resource("tether_astgrep_parsers")
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
        assert run.resource("tether_astgrep_parsers")._pool is None
