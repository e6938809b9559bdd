"""Several language servers on one file: basedpyright (types) and ruff's `ruff server` (lint) side by side.

Diagnostics are merged and each names its source; navigation comes from the first server that answers;
a third party's definition can switch a built-in off without redefining its id.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import tether
import tether.files
from tether.hookspecs import hookimpl

BOTH = {"lsp_servers": ["basedpyright", "ruff"]}


def data(r) -> dict[str, Any]:
    """A result's data (every lsp answer has some)."""
    assert r.data is not None, r.plain
    return r.data


# one edit in click's utils.py: an unused local (ruff F841, a warning) and a wrong return type (basedpyright)
MAKE_STR = (
    "    return str(value)\n\n\ndef _make_default",
    "    unused = 1\n    return len(str(value))\n\n\ndef _make_default",
)


def introduced(r):
    return {
        (d["file"], d["line"], d["severity"], d["code"], d["source"]) for d in r.data.get("diagnostics", [])
    }


async def test_basedpyright_and_ruff_both_answer_for_one_file_of_click(click_root):
    async with tether.open_run(click_root, plugins=[tether.files], options=BOTH) as run:
        r = await run.call(
            "edit", {"path": "src/click/utils.py", "old_string": MAKE_STR[0], "new_string": MAKE_STR[1]}
        )
        assert not r.is_error, r.plain
        got = introduced(r)
        assert ("src/click/utils.py", 60, "error", "reportReturnType", "basedpyright") in got, r.plain
        assert ("src/click/utils.py", 59, "warning", "F841", "Ruff") in got, r.plain
        assert {source for *_, source in got} == {"basedpyright", "Ruff"}, (
            r.plain
        )  # nothing old reported as new
        assert (
            "src/click/utils.py:59:5: warning [F841]: Local variable `unused` is assigned to but never used; "
            "help: Remove assignment to unused variable `unused` (Ruff)" in r.plain
        )

        r = await run.call("lsp", {"action": "diagnostics", "file": "src/click/utils.py"})
        assert not r.is_error, r.plain
        assert data(r)["servers"] == ["basedpyright", "ruff"]
        mine = {(d["line"], d["code"], d["source"]) for d in data(r)["diagnostics"]}
        assert {(60, "reportReturnType", "basedpyright"), (59, "F841", "Ruff")} <= mine, r.plain

        # navigation: basedpyright is asked first and answers; ruff offers no definitions
        r = await run.call(
            "lsp", {"action": "definition", "file": "src/click/core.py", "line": 2091, "symbol": "make_str"}
        )
        assert not r.is_error and data(r)["locations"][0] == {
            "file": "src/click/utils.py",
            "line": 52,
            "column": 5,
            "text": "def make_str(value: t.Any) -> str:",
        }, r.plain

        # the fix removes both servers' findings, and claims nothing new
        r = await run.call(
            "edit", {"path": "src/click/utils.py", "old_string": MAKE_STR[1], "new_string": MAKE_STR[0]}
        )
        assert not r.is_error and introduced(r) == set() and "introduced" not in r.plain, r.plain
        r = await run.call("lsp", {"action": "status"})
        assert sorted(x["server"] for x in data(r)["running"]) == ["basedpyright", "ruff"]


async def test_navigation_passes_over_a_server_without_an_answer_to_the_next(py_root):
    # ruff first: it has no hover for a name (only for noqa codes) and no definitions; basedpyright answers
    async with tether.open_run(py_root, options={"lsp_servers": ["ruff", "basedpyright"]}) as run:
        r = await run.call("lsp", {"action": "hover", "file": "pkg/util.py", "line": 8, "symbol": "greet"})
        assert not r.is_error and "def greet(name: str) -> str" in r.plain, r.plain
        r = await run.call(
            "lsp", {"action": "definition", "file": "pkg/main.py", "line": 7, "symbol": "greet"}
        )
        assert not r.is_error and data(r)["locations"][0]["file"] == "pkg/util.py", r.plain
        r = await run.call(
            "lsp", {"action": "references", "file": "pkg/util.py", "line": 1, "symbol": "greet"}
        )
        assert not r.is_error and data(r)["total"] >= 5, r.plain


async def test_ruffs_project_checker_reports_lint_findings_as_warnings_and_syntax_errors_as_errors(
    tmp_path, samples
):
    # click sets `fix = true` for ruff: the checker must never edit the tree
    root = samples.write_tree(
        tmp_path / "lint",
        {
            "pyproject.toml": '[project]\nname = "lint"\nversion = "0"\n\n[tool.ruff]\nfix = true\n',
            "a.py": "import os\n\nx = 1\n",
            "broken.py": "def f(:\n    pass\n",
        },
    )
    async with tether.open_run(root, options={"lsp_servers": ["ruff"]}) as run:
        r = await run.call("lsp", {"action": "diagnostics", "file": "*"})
        assert not r.is_error, r.plain
        found = {
            (d["file"], d["line"], d["severity"], d["code"], d["source"]) for d in data(r)["diagnostics"]
        }
        assert ("a.py", 1, "warning", "F401", "ruff") in found, r.plain
        assert any(f == "broken.py" and sev == "error" for f, _, sev, *_ in found), r.plain
        assert (
            "1 warning(s)" in r.plain
            and "a.py:1:8: warning [F401]: `os` imported but unused (ruff)" in r.plain
        )
    assert (root / "a.py").read_text() == "import os\n\nx = 1\n"  # not fixed behind the model's back


class TyReplacingBasedpyright:
    """A third party's type checker that switches the built-in basedpyright off, without redefining it."""

    @hookimpl
    def tether_lsp_servers(self, run):
        from tether_lsp.servers import ServerDef

        return [
            ServerDef(
                id="ty-instead",
                languages=("python",),
                extensions=(".py",),
                root_markers=("pyproject.toml",),
                command=("ty", "server"),
                ready="initialize",
                replaces=("basedpyright",),
            )
        ]


async def test_a_definition_can_switch_a_built_in_off_and_lsp_servers_brings_it_back(py_root):
    async with tether.open_run(py_root, plugins=[TyReplacingBasedpyright()]) as run:
        r = await run.call("lsp", {"action": "status"})
        bp = next(s for s in data(r)["servers"] if s["id"] == "basedpyright")
        assert not bp["enabled"] and bp["replaced_by"] == "ty-instead", r.plain
        assert "basedpyright (python): switched off: ty-instead replaces it" in r.plain
        r = await run.call("lsp", {"action": "hover", "file": "pkg/util.py", "line": 8, "symbol": "greet"})
        assert not r.is_error, r.plain
        r = await run.call("lsp", {"action": "status"})
        assert [x["server"] for x in data(r)["running"]] == ["ty-instead"]
    options = {"lsp_servers": ["basedpyright", "ty-instead"]}
    async with tether.open_run(py_root, plugins=[TyReplacingBasedpyright()], options=options) as run:
        r = await run.call("lsp", {"action": "status"})
        assert all(s["enabled"] for s in data(r)["servers"] if s["id"] in options["lsp_servers"]), r.plain


async def test_code_actions_of_every_server_are_merged_in_the_servers_order_each_with_its_server(py_root):
    (py_root / "pkg/extra.py").write_text(
        'import os\n\nfrom pkg.util import greet\n\nvalue: int = greet("x")\n'
    )
    for order in (["basedpyright", "ruff"], ["ruff", "basedpyright"]):
        async with tether.open_run(py_root, options={"lsp_servers": order}) as run:
            r = await run.call(
                "lsp", {"action": "code_actions", "file": "pkg/extra.py", "line": 1, "symbol": "os"}
            )
            assert not r.is_error, r.plain
            actions = [(a["server"], a["title"]) for a in data(r)["actions"]]
            # basedpyright's ignore comment and ruff's fix for the same unused import, both offered
            assert ("basedpyright", "Add `# pyright: ignore[reportUnusedImport]`") in actions, r.plain
            assert ("ruff", "Ruff (F401): Remove unused import: `os`") in actions, r.plain
            servers = [server for server, _ in actions]
            assert servers == sorted(servers, key=order.index), r.plain  # the first server's come first
            assert "Remove unused import: `os` [quickfix] (ruff)" in r.plain
            assert "Add `# pyright: ignore[reportUnusedImport]` [quickfix] (basedpyright)" in r.plain


async def test_workspace_symbols_follow_the_order_of_lsp_servers(py_root):
    # ty and basedpyright both search the workspace; ty places a class at its `class` keyword (column 1),
    # basedpyright at its name (column 7): the one row shown is the first server's
    for order, column in ((["ty", "basedpyright"], 1), (["basedpyright", "ty"], 7)):
        async with tether.open_run(py_root, options={"lsp_servers": order}) as run:
            # no server running yet: the first one of lsp_servers is started, not the first definition
            r = await run.call("lsp", {"action": "symbols", "query": "Greeter"})
            assert not r.is_error and data(r)["servers"] == order[:1], r.plain
            r = await run.call("lsp", {"action": "status"})
            assert [x["server"] for x in data(r)["running"]] == order[:1], r.plain

            r = await run.call("lsp", {"action": "diagnostics", "file": "pkg/util.py"})  # starts both
            assert not r.is_error, r.plain
            r = await run.call("lsp", {"action": "symbols", "query": "Greeter"})
            assert not r.is_error and data(r)["servers"] == order, r.plain
            greeters = [
                (s["file"], s["line"], s["column"]) for s in data(r)["symbols"] if s["name"] == "Greeter"
            ]
            assert greeters == [("pkg/util.py", 6, column)], r.plain


async def test_code_actions_are_bounded_and_one_servers_crash_waits_for_the_others(py_root, monkeypatch):
    """The actions are capped (the rest counted), a failed server's error is one bounded line, and an
    unexpected error of one server is raised only once the other server's request is done: nothing of
    the call is left running behind its answer."""
    from tether.tools import ToolError
    from tether_lsp import code_actions
    from tether_lsp.supervisor import Supervisor

    (py_root / "pkg/extra.py").write_text(
        'import os\n\nfrom pkg.util import greet\n\nvalue: int = greet("x")\n'
    )
    ask = {"action": "code_actions", "file": "pkg/extra.py", "line": 1, "symbol": "os"}
    on = Supervisor._on
    ruff_fails: list[BaseException] = []
    finished: list[str] = []

    async def spy(self, avail, path, fn):
        if avail.server.id == "ruff" and ruff_fails:
            raise ruff_fails[0]
        answer = await on(self, avail, path, fn)
        finished.append(avail.server.id)
        return answer

    monkeypatch.setattr(Supervisor, "_on", spy)
    monkeypatch.setattr(code_actions, "CODE_ACTIONS_CAP", 2)
    async with tether.open_run(py_root, options=BOTH) as run:
        r = await run.call("lsp", ask)
        assert not r.is_error, r.plain
        total = data(r)["total"]
        assert total > 2 and len(data(r)["actions"]) == 2 and data(r)["not_shown"] == total - 2, r.plain
        assert f"[{total - 2} more not shown (showing 2 of {total})" in r.plain, r.plain
        assert r.plain.count("\n") < 6, r.plain

        ruff_fails.append(ToolError("ruff broke: " + "x" * 5000 + "\nsecond line of a long report"))
        r = await run.call("lsp", ask)
        assert not r.is_error, r.plain
        (none,) = [line for line in r.plain.splitlines() if line.startswith("none from ruff: ")]
        assert len(none) < 300 and none.endswith("..."), none
        assert "second line" not in r.plain, r.plain

        ruff_fails[0] = RuntimeError("an unexpected failure")
        finished.clear()
        r = await run.call("lsp", ask)
        assert r.is_error, r.plain
        assert finished == ["basedpyright"], "basedpyright's request was still running behind the answer"


@pytest.mark.usefixtures("cpu_stress")
async def test_code_actions_asked_while_a_server_is_still_analysing_the_project_say_so(click_root):
    """With lsp_ready_wait 0 a query does not wait for basedpyright's first round of click: the code
    actions it gets then may be incomplete, and the answer says so, beside ruff's actions and when no
    server offered any."""
    (click_root / "src/click/_probe.py").write_text("import os\n\nVALUE = 1\n")
    still = re.compile(
        r"basedpyright still (analysing the project|working on '.*') \(\d+ s( since it started)?\): this answer "
        r"may be incomplete; ask again in a few seconds"
    )
    unused = {"action": "code_actions", "file": "src/click/_probe.py", "line": 1, "symbol": "os"}
    async with tether.open_run(click_root, options={**BOTH, "lsp_ready_wait": 0}) as run:
        r = await run.call("lsp", unused)
        assert not r.is_error, r.plain
        assert ("ruff", "Ruff (F401): Remove unused import: `os`") in {
            (a["server"], a["title"]) for a in data(r)["actions"]
        }, r.plain
        assert [x for x in r.plain.splitlines() if still.fullmatch(x)], r.plain
        assert "ruff still" not in r.plain and r.data["ready"] is False, r.plain
    clean = {"action": "code_actions", "file": "src/click/_probe.py", "line": 3, "symbol": "VALUE"}
    options = {"lsp_servers": ["basedpyright"], "lsp_ready_wait": 0}
    async with tether.open_run(click_root, options=options) as run:
        r = await run.call("lsp", clean)
        assert not r.is_error, r.plain
        head, note = r.plain.splitlines()
        assert head == "no code actions offered for 'VALUE' at src/click/_probe.py:3" and still.fullmatch(
            note
        ), r.plain
