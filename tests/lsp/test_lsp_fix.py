"""lsp_fix against real servers: ruff's quick fix (its edit) with the error it introduced elsewhere, gopls's
organize imports (its edit) and extract variable (its command, answered with workspace/applyEdit),
clangd's include fix on cJSON, and every refusal in one line with nothing written."""

from __future__ import annotations

from typing import Any

import tether
from support import require_binary
from tether_lsp.hookspecs import tether_lsp_supervisor

BOTH = {"lsp_servers": ["basedpyright", "ruff"]}
EXTRA = "import os\n\nVALUE = 1\n"
USER = "from pkg.extra import os\n\nprint(os.sep)\n"
REMOVE = "Ruff (F401): Remove unused import: `os`"
AT_OS = {"file": "pkg/extra.py", "line": 1, "symbol": "os"}


def data(r) -> dict[str, Any]:
    assert r.data is not None, r.plain
    return r.data


def snapshot(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


async def test_ruffs_fix_is_applied_with_the_error_it_introduced_and_every_bad_pick_is_one_line(py_root):
    (py_root / "pkg/extra.py").write_text(EXTRA)
    (py_root / "pkg/user.py").write_text(USER)  # uses the import ruff calls unused: its removal breaks this
    async with tether.open_run(py_root, options=BOTH) as run:
        before = snapshot(py_root)
        refusals = [
            (
                AT_OS | {"number": 1},
                "no code actions were listed for 'os' at pkg/extra.py:1 in this run; ask `lsp`",
            ),
        ]
        for args, expected in refusals:  # before any list: refused in one line, nothing started for it
            r = await run.call("lsp_fix", args)
            assert r.is_error and r.plain.startswith(expected) and "\n" not in r.plain, r.plain

        r = await run.call("lsp", {"action": "code_actions", **AT_OS})
        assert not r.is_error, r.plain
        titles = [a["title"] for a in data(r)["actions"]]
        assert REMOVE in titles and all(a["applicable"] for a in data(r)["actions"]), r.plain
        assert "lsp_fix applies 1, 2, " in r.plain, r.plain
        n = titles.index(REMOVE) + 1
        refusals = [
            (
                AT_OS | {"number": len(titles) + 1},
                f"there is no code action {len(titles) + 1} for 'os' at pkg/extra.py:1: the list has {len(titles)} (1. ",
            ),
            (
                AT_OS | {"title": "Remove it"},
                "'Remove it' is not among the code actions listed for 'os' at pkg/extra.py:1 (1. ",
            ),
            (AT_OS | {"title": REMOVE, "number": n}, "give either title"),
            (AT_OS, "give either title"),
            (
                AT_OS | {"line": 3, "symbol": "VALUE", "number": 1},
                "no code actions were listed for 'VALUE' at pkg/extra.py:3",
            ),
        ]
        for args, expected in refusals:
            r = await run.call("lsp_fix", args)
            assert r.is_error and r.plain.startswith(expected) and "\n" not in r.plain, (args, r.plain)
        assert (
            f"{n}. {REMOVE} (ruff)" in (await run.call("lsp_fix", AT_OS | {"title": "x"})).plain
        )  # the list named
        assert snapshot(py_root) == before

        # the title as a model may copy it, its spaces changed, is the same title
        r = await run.call("lsp_fix", AT_OS | {"title": " " + REMOVE.replace(": ", ":  ")})
        assert not r.is_error, r.plain
        assert r.plain.startswith(
            f"applied '{REMOVE}' (ruff): 1 edit(s) in 1 file(s)\n  pkg/extra.py: 1 edit(s)"
        ), r.plain
        assert (py_root / "pkg/extra.py").read_text() == "\nVALUE = 1\n"  # ruff removes the line only
        # answered as every write: with what it broke, here in the file that imported the removed name
        broken = {(d["file"], d["severity"], d["source"]) for d in data(r)["diagnostics"]}
        assert ("pkg/user.py", "error", "basedpyright") in broken, r.plain
        assert "This write introduced" in r.plain and "pkg/user.py:1:" in r.plain, r.plain

        # the list was of the text before: the same pick again is refused, nothing written
        after = snapshot(py_root)
        r = await run.call("lsp_fix", AT_OS | {"number": n})
        assert r.is_error and "\n" not in r.plain, r.plain
        assert r.plain.startswith(
            "pkg/extra.py changed since its code actions were listed for 'os' at pkg/extra.py:1"
        ), r.plain
        assert snapshot(py_root) == after


async def test_ruffs_fix_on_a_file_of_click_is_refused_once_a_shell_changed_it_then_applied_from_a_new_list(
    click_root,
):
    utils = click_root / "src/click/utils.py"
    pristine = utils.read_text()
    utils.write_text(pristine.replace("import re\n", "import re\nimport shutil\n", 1))
    at = {"file": "src/click/utils.py", "line": 6, "symbol": "shutil"}
    remove = "Ruff (F401): Remove unused import: `shutil`"
    async with tether.open_run(click_root, options={"lsp_servers": ["ruff"]}) as run:
        r = await run.call("lsp", {"action": "code_actions", **at})
        assert not r.is_error and remove in [a["title"] for a in data(r)["actions"]], r.plain
        changed = utils.read_text().replace("import sys\n", "import sys  # a shell's edit\n", 1)
        utils.write_text(changed)  # behind tether's back
        r = await run.call("lsp_fix", at | {"title": remove})
        assert r.is_error and "\n" not in r.plain and data(r)["error"] == "changed_since", r.plain
        assert "ask code_actions there again" in r.plain, r.plain
        assert utils.read_text() == changed

        r = await run.call("lsp", {"action": "code_actions", **at})
        assert not r.is_error, r.plain
        # a restarted server's list is of another process: refused as well
        r = await run.call("lsp", {"action": "reload"})
        assert not r.is_error, r.plain
        r = await run.call("lsp_fix", at | {"title": remove})
        assert r.is_error and "\n" not in r.plain and r.plain.startswith("ruff restarted since it offered"), (
            r.plain
        )
        assert utils.read_text() == changed

        r = await run.call("lsp", {"action": "code_actions", **at})
        assert not r.is_error, r.plain
        r = await run.call("lsp_fix", at | {"title": remove})
        assert not r.is_error, r.plain
        assert utils.read_text() == changed.replace("import shutil\n", "", 1)
        assert "This write introduced" not in r.plain, r.plain


async def test_gopls_organize_imports_edit_and_extract_variable_command_on_pflag(pflag_root):
    bool_go = pflag_root / "bool.go"
    pristine = bool_go.read_text()
    assert 'import "strconv"\n' in pristine
    bool_go.write_text(pristine.replace('import "strconv"\n', 'import (\n\t"os"\n\t"strconv"\n)\n', 1))
    async with tether.open_run(pflag_root) as run:
        at = {"file": "bool.go", "line": 4, "symbol": "os"}
        r = await run.call("lsp", {"action": "code_actions", **at})
        assert not r.is_error and "Organize Imports" in [a["title"] for a in data(r)["actions"]], r.plain
        r = await run.call("lsp_fix", at | {"title": "Organize Imports"})
        assert not r.is_error, r.plain
        assert r.plain.startswith("applied 'Organize Imports' (gopls): "), r.plain
        assert bool_go.read_text() == pristine.replace('import "strconv"\n', 'import (\n\t"strconv"\n)\n', 1)

        # a code action that is a command: gopls executes it and sends the edit back (workspace/applyEdit)
        line = next(
            n for n, x in enumerate(bool_go.read_text().splitlines(), 1) if "strconv.ParseBool(s)" in x
        )
        at = {"file": "bool.go", "line": line, "symbol": "strconv.ParseBool(s)"}
        r = await run.call("lsp", {"action": "code_actions", **at})
        assert not r.is_error, r.plain
        (extract,) = [a for a in data(r)["actions"] if a["title"] == "Extract variable"]
        assert extract["applicable"], r.plain
        r = await run.call("lsp_fix", at | {"title": "Extract variable"})
        assert not r.is_error, r.plain
        assert r.plain.startswith("applied 'Extract variable' (gopls): "), r.plain
        lines = bool_go.read_text().splitlines()
        assert (
            lines[line - 1].strip().endswith(":= strconv.ParseBool(s)")
            and lines[line - 1] != "\tv, err := strconv.ParseBool(s)"
        ), lines[line - 2 : line + 1]
        assert "This write introduced" not in r.plain, r.plain  # a clean refactoring
        # outside a fix the server's applyEdit is refused, as before
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        assert conn.apply_edit is None


async def test_a_read_surface_offers_no_lsp_fix_and_its_code_actions_do_not_speak_of_it(py_root):
    (py_root / "pkg/extra.py").write_text(EXTRA)
    async with tether.open_run(py_root, surface="readonly", options={"lsp_servers": ["ruff"]}) as run:
        assert "lsp_fix" not in {t.name for t in run.tools()}
        r = await run.call("lsp", {"action": "code_actions", **AT_OS})
        assert not r.is_error and REMOVE in [a["title"] for a in data(r)["actions"]], r.plain
        assert "lsp_fix" not in r.plain, r.plain
        r = await run.call("lsp_fix", AT_OS | {"title": REMOVE})
        assert r.is_error and data(r)["error"] == "unknown_tool", r.plain
    assert (py_root / "pkg/extra.py").read_text() == EXTRA


async def test_a_fix_while_the_server_is_not_ready_is_refused_and_writes_nothing(py_root):
    import time

    (py_root / "pkg/extra.py").write_text(EXTRA)
    options = {"lsp_servers": ["ruff"], "lsp_ready_wait": 1, "diagnostics_timeout": 2}
    async with tether.open_run(py_root, options=options) as run:
        r = await run.call("lsp", {"action": "code_actions", **AT_OS})
        assert not r.is_error, r.plain
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        # as a $/progress begin without its end (a server loading its project) would leave it
        conn.progress_tokens.add("load")
        conn.progress_titles["load"] = ("Loading", time.monotonic())
        r = await run.call("lsp_fix", AT_OS | {"title": REMOVE})
        assert r.is_error and data(r)["error"] == "not_ready", r.plain
        assert r.plain.startswith("nothing was applied: ruff still working on 'Loading' ("), r.plain
        assert (py_root / "pkg/extra.py").read_text() == EXTRA
        conn.progress_tokens.discard("load")
        del conn.progress_titles["load"]
        r = await run.call("lsp_fix", AT_OS | {"title": REMOVE})
        assert not r.is_error and data(r)["ready"] is True, r.plain
        assert (py_root / "pkg/extra.py").read_text() == "\nVALUE = 1\n"


COUNT_C = """#include <stddef.h>

int cjson_count(const char *text)
{
    cJSON *json = cJSON_Parse(text);
    int n = cJSON_GetArraySize(json);
    cJSON_Delete(json);
    return n;
}
"""


async def test_clangds_include_fix_on_cjson_makes_a_new_source_compile_and_introduces_nothing(cjson_root):
    require_binary("clangd")
    (cjson_root / "cJSON_Count.c").write_text(COUNT_C)  # uses cJSON's API without including cJSON.h
    async with tether.open_run(cjson_root) as run:
        # cJSON.c open: clangd indexes the header it includes, where the include fix looks the names up
        r = await run.call("lsp", {"action": "diagnostics", "file": "cJSON.c"})
        assert not r.is_error, r.plain
        r = await run.call("lsp", {"action": "diagnostics", "file": "cJSON_Count.c"})
        assert "error [undeclared_var_use]: Use of undeclared identifier 'cJSON'" in r.plain, r.plain
        at = {"file": "cJSON_Count.c", "line": 5, "symbol": "cJSON"}
        r = await run.call("lsp", {"action": "code_actions", **at})
        assert not r.is_error, r.plain
        include = 'Include "cJSON.h" for symbol cJSON'
        offered = {a["title"]: a for a in data(r)["actions"]}
        assert include in offered and offered[include]["applicable"], r.plain
        r = await run.call("lsp_fix", at | {"title": include})
        assert not r.is_error, r.plain
        assert r.plain.startswith(f"applied '{include}' (clangd): 1 edit(s) in 1 file(s)"), r.plain
        assert (cjson_root / "cJSON_Count.c").read_text() == '#include "cJSON.h"\n' + COUNT_C  # its one edit
        assert "This write introduced" not in r.plain and not data(r).get("diagnostics"), r.plain
        # the source now compiles: every error and warning of it is gone
        r = await run.call("lsp", {"action": "diagnostics", "file": "cJSON_Count.c"})
        assert not r.is_error and r.plain.startswith("no errors or warnings in cJSON_Count.c"), r.plain
