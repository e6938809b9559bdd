"""clangd on a real project: cJSON 1.7.15 (Debian's source package) with its compile_commands.json.

clangd checks only open documents: a changed prototype in cJSON.h is reported in the files that
include it because tether opens them before the header is written. The write tests run under CPU load.
"""

from __future__ import annotations

import json

import pytest
import tether
import tether.files
from support import edit, require_binary
from tether_lsp import dependents, watching

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


@pytest.mark.usefixtures("cpu_stress")
async def test_a_header_prototype_change_reports_its_broken_users_in_files_never_opened(cjson_root):
    expected = broken(cjson_root)
    assert len(expected) == 6
    text = (cjson_root / "cJSON.h").read_text()
    async with tether.open_run(cjson_root, plugins=[tether.files]) as run:
        # previewed first (a dry run: clangd given the unsaved header, its includers opened): the same six
        r = await run.call("write", {"path": "cJSON.h", "content": text.replace(*PROTOTYPE), "dry_run": True})
        preview = r.data["preview"]
        previewed = {(d["file"], d["line"]) for d in preview["introduced"] if d["severity"] == "error"}
        assert previewed == expected and preview["unchecked"] == [], r.plain
        assert (cjson_root / "cJSON.h").read_text() == text
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
        # a clean change previews clean
        r = await run.call(
            "write", {"path": "cJSON.h", "content": text + "\n/* a note */\n", "dry_run": True}
        )
        assert r.data["preview"]["introduced"] == [] and r.data["preview"]["unchecked"] == [], r.plain
        # a previewed rename of the prototype: staged with the files that call it, clean, nothing written
        line = next(n for n, t in enumerate(text.splitlines(), 1) if PROTOTYPE[0] in t)
        rename = {
            "line": line,
            "symbol": "cJSON_CreateString",
            "new_name": "cJSON_MakeString",
            "preview": True,
        }
        r = await run.call("lsp_rename", {"file": "cJSON.h", **rename})
        assert not r.is_error and r.data["edit_id"], r.plain
        edits = {f["file"]: f["edits"] for f in r.data["files"]}
        assert {"cJSON.h", "cJSON.c", "cJSON_Utils.c"} <= edits.keys(), (edits, r.plain)
        assert r.data["preview"]["introduced"] == [] and r.data["preview"]["unchecked"] == [], r.plain
        assert (cjson_root / "cJSON.h").read_text() == text
        assert "cJSON_MakeString" not in (cjson_root / "cJSON.c").read_text()
        done = await run.call("resolve", {"edit_id": r.data["edit_id"], "action": "discard"})
        assert not done.is_error, done.plain


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


USERS = 22  # more than dependents.OPEN_CAP (20)


@pytest.fixture
def many_includers(tmp_path):
    """A C project whose header lib.h is included by USERS small sources, one source over 2 MB and one
    that is not UTF-8 text, all in its compile_commands.json."""
    (tmp_path / "lib.h").write_text("int lib_value(int x);\n")
    sources = {
        f"u{n:02}.c": f'#include "lib.h"\nint use_{n}(void) {{ return lib_value({n}); }}\n'
        for n in range(USERS)
    }
    sources["big.c"] = (
        '#include "lib.h"\n' + "/* padding */\n" * 200_000 + "int big(void) { return lib_value(1); }\n"
    )
    for name, text in sources.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "latin.c").write_bytes(
        b'#include "lib.h"\n/* caf\xe9 */\nint latin(void) { return lib_value(2); }\n'
    )
    entries = [
        {"directory": str(tmp_path), "file": name, "arguments": ["cc", "-c", name]}
        for name in [*sources, "latin.c"]
    ]
    (tmp_path / "compile_commands.json").write_text(json.dumps(entries))
    return tmp_path


async def test_a_header_write_names_the_includers_it_did_not_check(many_includers):
    assert (many_includers / "big.c").stat().st_size > 2_000_000
    async with tether.open_run(many_includers, plugins=[tether.files]) as run:
        r = await edit(run, "lib.h", "int x);", "int x, int y);")
        errors = {d["file"] for d in r.data["diagnostics"] if d["severity"] == "error"}
        # sorted, latin.c comes first: it takes one of the 20 slots, so 19 are checked and 3 are not
        assert errors == {f"u{n:02}.c" for n in range(19)}, r.plain
        assert (
            "3 more file(s) include lib.h and were not checked (clangd checks open files only, and 20 were "
            "opened); run lsp diagnostics on them or build"
        ) in r.plain
        assert (
            "1 file(s) include lib.h and were not checked: clangd could not be given them (not UTF-8 text or "
            "not readable): latin.c"
        ) in r.plain
        assert (
            "1 file(s) over 2 MB were not read, so whether they include lib.h is not known and they were not "
            "checked: big.c; build to check them"
        ) in r.plain
        assert "first 20000 source files" not in r.plain, r.plain


async def test_a_header_write_says_the_search_for_includers_stopped_at_the_scan_cap(
    many_includers, monkeypatch
):
    monkeypatch.setattr(watching, "SCAN_CAP", 5)
    monkeypatch.setattr(dependents, "SCAN_CAP", 5)
    async with tether.open_run(many_includers, plugins=[tether.files]) as run:
        r = await edit(run, "lib.h", "int x);", "int x, int y);")
        assert (
            "files that include lib.h were looked for in the first 5 source files only: the rest of the tree "
            "was not checked; build to check it"
        ) in r.plain


async def test_a_header_preview_on_a_clangd_that_reads_headers_from_disk_says_its_includers_are_not_checked(
    cjson_root, monkeypatch
):
    """A clangd without --use-dirty-headers parses an includer with the header on disk: a preview of the header
    cannot see what it breaks there, and says so instead of answering "nothing would be introduced"."""
    import tether_lsp.servers

    async def knows_none(run, server, binary):
        return ()

    monkeypatch.setattr(tether_lsp.servers, "supported_args", knows_none)
    text = (cjson_root / "cJSON.h").read_text()
    async with tether.open_run(cjson_root, plugins=[tether.files]) as run:
        r = await run.call("write", {"path": "cJSON.h", "content": text.replace(*PROTOTYPE), "dry_run": True})
        preview = r.data["preview"]
        assert preview["introduced"] == [], r.plain
        unchecked = {u["file"]: u["why"] for u in preview["unchecked"]}
        assert set(unchecked) == {"cJSON.c", "cJSON_Utils.c"}, r.plain
        assert "does not know --use-dirty-headers" in unchecked["cJSON.c"], r.plain
        assert "nothing would be introduced" not in r.plain, r.plain
        assert (cjson_root / "cJSON.h").read_text() == text
