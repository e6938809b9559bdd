"""clangd on a real project: cJSON 1.7.15 (Debian's source package) with its compile_commands.json.

clangd checks only open documents: a changed prototype in cJSON.h is reported in the files that
include it because tether opens them before the header is written. The write tests run under CPU load.
"""

from __future__ import annotations

import pytest
import tether
import tether.files
from support import require_binary

PROTOTYPE = (
    "CJSON_PUBLIC(cJSON *) cJSON_CreateString(const char *string);",
    "CJSON_PUBLIC(cJSON *) cJSON_CreateString(const char *string, int flags);",
)


@pytest.fixture(autouse=True)
def clangd():
    require_binary("clangd")


def broken(root) -> set[tuple[str, int]]:
    """(file, line) of each use of cJSON_CreateString in the two sources: 5 calls and the definition."""
    out = set()
    for name in ("cJSON.c", "cJSON_Utils.c"):
        for n, line in enumerate((root / name).read_text().splitlines(), 1):
            if "cJSON_CreateString(" in line:
                out.add((name, n))
    return out


async def edit(run, path, old, new):
    r = await run.call("edit", {"path": path, "old_string": old, "new_string": new})
    assert not r.is_error, r.plain
    return r


@pytest.mark.usefixtures("cpu_stress")
async def test_a_header_prototype_change_reports_its_broken_users_in_files_never_opened(cjson_root):
    expected = broken(cjson_root)
    assert len(expected) == 6
    async with tether.open_run(cjson_root, plugins=[tether.files]) as run:
        r = await edit(run, "cJSON.h", *PROTOTYPE)
        errors = {(d["file"], d["line"]) for d in r.data["diagnostics"] if d["severity"] == "error"}
        assert errors == expected, r.plain
        # one line per diagnostic, paths relative to the root
        report = r.plain.split("\n", 1)[1]
        assert str(cjson_root) not in report and "\n\n" not in report, report
        assert (
            "cJSON.c:2137:51: error [typecheck_call_too_few_args]: Too few arguments to function call, expected 2, "
            "have 1; note: 'cJSON_CreateString' declared here (cJSON.h:200:23)"
        ) in report
        r = await edit(run, "cJSON.h", PROTOTYPE[1], PROTOTYPE[0])
        assert r.data.get("diagnostics", []) == [], r.plain
        assert "no errors any more in 2 other file(s): cJSON.c, cJSON_Utils.c" in r.plain


async def test_project_diagnostics_say_clangd_has_no_checker_and_name_no_other_language(cjson_root):
    async with tether.open_run(cjson_root) as run:
        r = await run.call("lsp", {"action": "diagnostics", "file": "*"})
        assert r.is_error and r.data["error"] == "no_checker", r.plain
        assert r.plain == (
            "clangd has no project checker: ask for the diagnostics of one file at a time "
            "(file: 'path/to/file'), or build the project"
        )
        r = await run.call("lsp", {"action": "diagnostics", "file": "cJSON.c"})
        assert not r.is_error and r.plain.startswith("no errors or warnings in cJSON.c"), r.plain


async def test_workspace_symbols_at_clangds_own_limit_say_they_may_be_cut(cjson_root):
    async with tether.open_run(cjson_root) as run:
        r = await run.call("lsp", {"action": "diagnostics", "file": "cJSON.c"})  # clangd started, indexing
        r = await run.call("lsp", {"action": "symbols", "query": "cJSON"})
        assert not r.is_error, r.plain
        assert r.data["total"] == 100 and r.data["may_be_cut"], r.plain
        assert (
            "[may be cut: clangd returns at most 100 symbols per query; use a more specific query]" in r.plain
        )
        r = await run.call("lsp", {"action": "symbols", "query": "cJSON_CreateString"})
        assert not r.data["may_be_cut"], r.plain
        assert ("cJSON.c", 2446) in {(s["file"], s["line"]) for s in r.data["symbols"]}, r.plain
