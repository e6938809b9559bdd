"""Answers over their cap keep what matters and say how to see the rest; hover text without HTML entities;
a refused write asks no server for a baseline."""

from __future__ import annotations

import re

import tether
import tether.files
from tether_lsp.hookspecs import tether_lsp_supervisor


async def test_a_big_outline_drops_class_attributes_before_any_class_or_method(click_root):
    classes = re.findall(r"^class (\w+)", (click_root / "src/click/core.py").read_text(), re.MULTILINE)
    assert len(classes) == 11
    async with tether.open_run(click_root) as run:
        r = await run.call("lsp", {"action": "symbols", "file": "src/click/core.py"})
        assert not r.is_error, r.plain
        # what is declared inside functions is never listed (684 symbols with it, 8 of 11 classes cut)
        assert r.data["total"] > 200 and r.data["left_out"] > 0, r.plain
        shown = r.data["symbols"]
        assert not {"ctx", "args", "kwargs"} & {s["name"] for s in shown}, r.plain  # parameters
        assert {s["name"] for s in shown if s["kind"] == "class"} == set(classes), r.plain
        assert f"{r.data['left_out']} class attributes left out to keep every class and function" in r.plain
        # methods of the last class are there too, in line order
        assert max(s["line"] for s in shown) > 3000, r.plain
        assert [s["line"] for s in shown] == sorted(s["line"] for s in shown)


async def test_references_over_the_cap_are_counted_per_file_and_in_file_shows_one_files(click_root):
    async with tether.open_run(click_root) as run:
        args = {"action": "references", "file": "src/click/core.py", "line": 213, "symbol": "Context"}
        r = await run.call("lsp", args)
        assert not r.is_error, r.plain
        total, not_shown = r.data["total"], r.data["not_shown"]
        assert total > 50 and len(r.data["locations"]) == 50, r.plain
        assert sum(not_shown.values()) == total - 50, r.plain
        file, count = next(iter(not_shown.items()))
        assert f"{file} ({count})" in r.plain and "Pass in_file with one of these files" in r.plain, r.plain
        in_file = count + sum(loc["file"] == file for loc in r.data["locations"])
        r = await run.call("lsp", {**args, "in_file": file})
        assert not r.is_error, r.plain
        assert r.data["total"] == in_file and {loc["file"] for loc in r.data["locations"]} == {file}, r.plain
        assert (
            f"{in_file} reference(s) of 'Context' at src/click/core.py:213 in {file} ({total} in all files)"
            in r.plain
        )
        r = await run.call("lsp", {**args, "in_file": "src/click/__init__.py"})  # imports it: 1 there
        assert not r.is_error and {loc["file"] for loc in r.data["locations"]} <= {"src/click/__init__.py"}, (
            r.plain
        )
        r = await run.call("lsp", {**args, "action": "hover", "in_file": file})
        assert r.is_error and r.data["error"] == "bad_argument" and "Leave in_file out" in r.plain


DOCUMENTED = '''\
def spaced(x: int) -> int:
    """Add one & return it.

    Example:
        spaced(1) < spaced(2)
    """
    return x + 1
'''


async def test_hover_shows_docstrings_without_html_entities(tmp_path, samples):
    root = samples.write_tree(
        tmp_path / "doc", {"pyproject.toml": "[project]\nname = 'd'\n", "d.py": DOCUMENTED}
    )
    async with tether.open_run(root) as run:
        r = await run.call("lsp", {"action": "hover", "file": "d.py", "line": 1, "symbol": "spaced"})
        assert not r.is_error, r.plain
        assert "&nbsp;" not in r.plain and "&amp;" not in r.plain and "&lt;" not in r.plain, r.plain
        assert "Add one & return it." in r.plain and "spaced(1) < spaced(2)" in r.plain, r.plain


async def test_a_refused_resolve_asks_no_language_server_for_a_baseline(tmp_path, samples):
    root = samples.write_tree(
        tmp_path / "ag", {"pyproject.toml": "[project]\nname = 'ag'\n", "m.py": "x.append(1)\n"}
    )
    # previews off: the staging starts no server either, and says the file was not checked
    async with tether.open_run(root, plugins=[tether.files], options={"lsp_previews": False}) as run:
        staged = await run.call(
            "ast_edit", {"pattern": "$X.append($Y)", "rewrite": "$X.extend([$Y])", "path": "m.py"}
        )
        assert not staged.is_error, staged.plain
        assert "not checked (previews are off in this run: run option lsp_previews): m.py" in staged.plain
        (root / "m.py").write_text("y.append(2)\n")
        r = await run.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
        assert r.is_error and r.data["error"] == "changed_since_staged", r.plain
        assert "refused edit_1: m.py (changed) changed since the change was staged" in r.plain
        assert run.resource(tether_lsp_supervisor).connections == {}  # no server started for a "before"
        assert (root / "m.py").read_text() == "y.append(2)\n"
        # staged again against the current file, the accept writes and is checked
        staged = await run.call(
            "ast_edit", {"pattern": "$X.append($Y)", "rewrite": "$X.extend([$Y])", "path": "m.py"}
        )
        r = await run.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
        assert not r.is_error and (root / "m.py").read_text() == "y.extend([2])\n", r.plain
        assert run.resource(tether_lsp_supervisor).connections != {}
