"""callers, callees, supertypes, subtypes on real projects, each with every built-in server that has it.

Each list of callers is checked against the call sites computed without the server: tree-sitter's
(`ast_grep`) calls of the name in the files that import or include its definition's module. The first
question of a fresh run (the CPU-stress ones) is either complete or says `ready: false`; asked again
once the server is ready, it says `ready: true` and no note.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
import tether
import tether.files
from support import require_binary
from tether_lsp import readiness
from tether_lsp.hookspecs import tether_lsp_supervisor

NOTE = re.compile(r".+ still .+: this answer may be incomplete; ask again in a few seconds")


async def until_ready(run, server: str) -> None:
    for conn in run.resource(tether_lsp_supervisor).connections.values():
        if conn.server.id == server:
            assert await readiness.wait_ready(conn, 90) is None, f"{server} never got ready"


def sites(r) -> set[tuple[str, int]]:
    return {(e["sites_file"], n) for e in r.data["entries"] if e["level"] == 1 for n in e["sites"]}


async def calls(run, pattern: str, path: str, language: str, files: set[str] | None = None) -> set:
    """(file, line) of every call tree-sitter finds (``files``: only in these)."""
    return await matches(run, {"pattern": pattern, "language": language}, path, files)


def called(name: str) -> dict:
    """A rule for the called name of a call (with or without type arguments: `operate<T, T>(...)`), matched
    on the identifier alone, so the answer holds every match (a whole call with its callback body is long)."""
    return {
        "kind": "identifier",
        "regex": f"^{name}$",
        "inside": {"kind": "call_expression", "field": "function"},
    }


async def matches(run, query: dict, path: str, files: set[str] | None) -> set[tuple[str, int]]:
    r = await run.call("ast_grep", {**query, "path": path, "max_results": 500})
    assert not r.is_error and len(r.data["matches"]) == r.data["total"] < 500, r.plain
    return {(m["file"], m["start"]["line"]) for m in r.data["matches"] if files is None or m["file"] in files}


def ready_or_noted(r) -> None:
    """An answer that is not known complete says so, in its data and in one line at its end."""
    if r.data["ready"] is False:
        assert NOTE.fullmatch(r.plain.splitlines()[-1]), r.plain
    else:
        assert r.data["ready"] is True and not any(NOTE.fullmatch(x) for x in r.plain.splitlines()), r.plain


@pytest.mark.timeout(300)  # basedpyright's first round of click, then click's test_commands.py
async def test_click_callers_of_echo_symbols_without_a_line_and_a_rename_covering_its_tests(
    click_root, tmp_path, monkeypatch
):
    """One run over click (one cold start of basedpyright): callers against tree-sitter's call sites, symbols
    found without a line, then a rename that also covers tests/ (outside the server's program)."""
    # tests/ is outside [tool.pyright] include: basedpyright does not analyse the call there until it is opened.
    # click is installed in development mode (the .pth of src that an editable install writes) in the
    # environment basedpyright asks (the first python on PATH), as in a clone being worked on: otherwise
    # `import click` in tests/ resolves to whatever click that environment holds (this one's has its own), a
    # module the rename rightly leaves alone and lists
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    (next(env.glob("lib/python3*/site-packages")) / "_click_editable.pth").write_text(
        f"{click_root / 'src'}\n"
    )
    monkeypatch.setenv("PATH", f"{env / 'bin'}{os.pathsep}{os.environ['PATH']}")

    importers = {
        f"src/click/{p.name}"
        for p in (click_root / "src/click").glob("*.py")
        if re.search(r"^from \.utils import .*\becho\b", p.read_text(), re.M)
    }
    ask = {"action": "callers", "file": "src/click/utils.py", "line": 240, "symbol": "echo"}
    async with tether.open_run(click_root, plugins=[tether.files], options={"lsp_ready_wait": 120}) as run:
        first = await run.call("lsp", ask)
        assert not first.is_error, first.plain
        ready_or_noted(first)
        expected = await calls(run, "echo($$$A)", "src/click", "python", importers)
        # and the calls as click.echo(...) in tests/typing (in pyright's include; they import click)
        expected |= await calls(run, "click.echo($$$A)", "tests/typing", "python")
        await until_ready(run, "basedpyright")
        r = await run.call("lsp", ask)
        assert r.data["ready"] is True and not NOTE.search(r.plain), r.plain
        # complete, or said not to be: never an incomplete answer without the note
        assert first.data["ready"] is False or sites(first) == sites(r), first.plain
        assert {"src/click/termui.py", "src/click/core.py", "src/click/exceptions.py"} <= {
            e["file"] for e in r.data["entries"]
        }, r.plain
        # the known difference: none. Every call of echo in an importer is inside a function (click has no
        # module-level call of it), and no importer shadows the name. (With the click another environment
        # holds, those of tests/typing are calls of that click's echo, and not among these.)
        assert sites(r) == expected, (sites(r) ^ expected, r.plain)
        entries = [(e["file"], e["line"]) for e in r.data["entries"]]
        assert entries == sorted(entries), r.plain
        assert (
            r.plain.splitlines()[1] == "src/click/_termui_impl.py:250:9 render_progress - calls at 258, 293"
        )
        # two levels, indented; a function met again is listed once more without its own callers
        deep = await run.call("lsp", {**ask, "depth": 2})
        assert any(x.startswith("  ") for x in deep.plain.splitlines()), deep.plain
        r = await run.call("lsp", {**ask, "action": "supertypes"})
        assert r.is_error and r.data["error"] == "unsupported", r.plain
        assert r.plain.startswith("basedpyright does not answer supertypes (it offers no type hierarchy)"), (
            r.plain
        )
        # without a line: a qualified name through the workspace symbols, exact name and container
        r = await run.call("lsp", {"action": "callers", "symbol": "Context.invoke"})
        assert not r.is_error and r.data["resolved"] == {"file": "src/click/core.py", "line": 861}, r.plain
        head = "'Context.invoke' is at src/click/core.py:861 (method, in the workspace symbols)"
        assert r.plain.splitlines()[0] == head, r.plain
        assert ("src/click/core.py", 930) in sites(r), r.plain
        # a name declared three times in the file: the list, nothing guessed
        r = await run.call("lsp", {"action": "hover", "file": "src/click/core.py", "symbol": "invoke"})
        assert r.is_error and r.data["error"] == "ambiguous_symbol", r.plain
        assert [(m["container"], m["line"]) for m in r.data["matches"]] == [
            ("Context", 861),
            ("Command", 1400),
            ("Group", 2020),
        ], r.plain
        r = await run.call("lsp", {"action": "references", "symbol": "Context.no_such_method"})
        assert r.is_error and r.data["error"] == "symbol_not_found", r.plain
        # the rename: tests/test_commands.py:417 calls it as click.core.iter_params_for_processing(...)
        r = await run.call(
            "lsp",
            {
                "action": "references",
                "file": "src/click/core.py",
                "line": 147,
                "symbol": "iter_params_for_processing",
            },
        )
        assert "outside basedpyright's program" in r.plain and "tests/test_commands.py:417:" in r.plain, (
            r.plain
        )
        files = ("src/click/core.py", "tests/test_commands.py")
        before = {f: (click_root / f).read_text().splitlines() for f in files}
        r = await run.call(
            "lsp_rename",
            {
                "file": "src/click/core.py",
                "line": 147,
                "symbol": "iter_params_for_processing",
                "new_name": "params_in_processing_order",
            },
        )
        assert not r.is_error and r.data["ready"] is True, r.plain
        assert {"file": "tests/test_commands.py", "edits": 1} in r.data["files"], r.plain
        assert "opened first, since they are outside basedpyright's program" in r.plain, r.plain
        # what is left are the two comments that name it, listed, not changed
        assert r.data["not_renamed"] == [
            {"file": "src/click/core.py", "line": 1213},
            {"file": "tests/test_commands.py", "line": 528},
        ], r.plain
    changed = {
        (f, n)
        for f in files
        for n, (old, new) in enumerate(zip(before[f], (click_root / f).read_text().splitlines()), 1)
        if old != new
    }
    assert changed == {
        ("src/click/core.py", 147),
        ("src/click/core.py", 1374),
        ("tests/test_commands.py", 417),
    }
    assert (click_root / "src/click/core.py").read_text().splitlines()[
        146
    ] == "def params_in_processing_order("
    # click's own suite passes after the rename (the call in tests/test_commands.py:417 renamed too)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/test_commands.py"],
        cwd=click_root,
        # only click's own configuration: none of this environment's pytest plugins
        env={**os.environ, "PYTHONPATH": str(click_root / "src"), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


async def test_callers_on_cjson_match_its_calls_and_clangd_says_it_lacks_callees(cjson_root):
    require_binary("clangd")
    where = {"file": "cJSON_Utils.c", "line": 1110, "symbol": "cJSON_AddItemToObject"}
    async with tether.open_run(cjson_root) as run:
        # the cold definition (a fresh run, its first question): the definition in cJSON.c, or said not ready
        r = await run.call("lsp", {"action": "definition", **where})
        assert not r.is_error, r.plain
        ready_or_noted(r)
        if r.data["ready"]:
            assert [(x["file"], x["line"]) for x in r.data["locations"]] == [("cJSON.c", 2044)], r.plain
        await until_ready(run, "clangd")
        r = await run.call("lsp", {"action": "definition", **where})
        assert [(x["file"], x["line"]) for x in r.data["locations"]] == [("cJSON.c", 2044)], r.plain
        assert r.data["ready"] is True, r.plain
        # without a line: declared once in the file
        r = await run.call("lsp", {"action": "definition", "file": "cJSON.c", "symbol": "cJSON_Parse"})
        assert r.data["resolved"] == {"file": "cJSON.c", "line": 1171}, r.plain
        # (clangd answers the definition of a definition with its declaration)
        assert [(x["file"], x["line"]) for x in r.data["locations"]] == [("cJSON.h", 148)], r.plain
        ask = {"action": "callers", "file": "cJSON.c", "line": 2044, "symbol": "cJSON_AddItemToObject"}
        r = await run.call("lsp", ask)
        assert not r.is_error and r.data["ready"] is True, r.plain
        # both sources include cJSON.h, which declares it; no known difference
        expected = await calls(run, "cJSON_AddItemToObject($$$A)", ".", "c", {"cJSON.c", "cJSON_Utils.c"})
        assert sites(r) == expected and len(expected) == 9, (sites(r) ^ expected, r.plain)
        assert (
            r.plain.splitlines()[2] == "cJSON_Utils.c:1096:13 compose_patch - calls at 1110, 1114, 1125, 1131"
        )
        r = await run.call("lsp", {**ask, "action": "callees"})
        assert r.is_error and r.data["error"] == "unsupported", r.plain
        assert r.plain == (
            "clangd does not answer callees (callHierarchy/outgoingCalls is not implemented): this is not an "
            "answer that there are none. Ask definition of each call, or hover instead"
        )


@pytest.mark.usefixtures("cpu_stress")
async def test_callers_of_varp_on_pflag_are_cut_at_50_and_match_its_calls(pflag_root):
    require_binary("gopls")
    ask = {"action": "callers", "file": "flag.go", "line": 843, "symbol": "VarP"}
    async with tether.open_run(pflag_root) as run:
        first = await run.call("lsp", ask)
        assert not first.is_error, first.plain
        ready_or_noted(first)
        await until_ready(run, "gopls")
        r = await run.call("lsp", ask)
        assert r.data["ready"] is True and not NOTE.search(r.plain), r.plain
        assert first.data["ready"] is False or first.data["total"] == r.data["total"], first.plain
        # every file of the package (tests included) is in it: the method's calls on any receiver; the count of
        # the functions that hold one. No known difference (no function value of VarP is called).
        expected = await calls(run, "$X.VarP($$$A)", ".", "go")
        declared = {"any": [{"kind": "function_declaration"}, {"kind": "method_declaration"}]}
        holds = {**declared, "field": "name", "has": {"pattern": "$X.VarP($$$A)", "stopBy": "end"}}
        name = {"any": [{"kind": "identifier"}, {"kind": "field_identifier"}], "inside": holds}
        holders = await matches(run, {"rule": name, "language": "go"}, ".", None)
        assert r.data["total"] == len(holders) and sites(r) <= expected, r.plain
        assert r.data["cut"] and len(r.data["entries"]) == 50, r.plain
        assert r.plain.splitlines()[-1].startswith("[cut at 50 entries: "), r.plain
        r = await run.call("lsp", {**ask, "action": "callees", "depth": 2})
        assert r.plain.splitlines()[:2] == [
            "1 callee(s) of VarP (flag.go:843:19), 2 levels:",
            "flag.go:829:19 VarPF - calls at 844",
        ], r.plain
        assert r.plain.splitlines()[2].startswith("  flag.go:"), r.plain
        r = await run.call("lsp", {**ask, "action": "subtypes"})
        assert r.is_error and r.plain.startswith(
            "gopls does not answer subtypes (it offers no type hierarchy)"
        )
        # without a line: FlagSet.VarP by its qualified name; VarP in flag.go is a method and a function
        r = await run.call("lsp", {"action": "definition", "symbol": "FlagSet.VarP"})
        assert r.data["resolved"] == {"file": "flag.go", "line": 843}, r.plain
        r = await run.call("lsp", {"action": "definition", "file": "flag.go", "symbol": "VarP"})
        assert r.is_error and [(m["container"], m["line"]) for m in r.data["matches"]] == [
            ("FlagSet", 843),
            ("", 910),
        ], r.plain


async def test_callers_on_rxjs_with_tsserver(rxjs_root, with_node_bin):
    ask = {"action": "callers", "file": "src/internal/util/lift.ts", "symbol": "operate"}
    text = (rxjs_root / ask["file"]).read_text().splitlines()
    ask["line"] = next(n for n, x in enumerate(text, 1) if x.startswith("export function operate"))
    async with tether.open_run(rxjs_root) as run:
        r = await run.call("lsp", ask)
        assert not r.is_error, r.plain
        await until_ready(run, "typescript-language-server")
        r = await run.call("lsp", ask)
        assert r.data["ready"] is True, r.plain
        importers = {
            f"src/{p.relative_to(rxjs_root / 'src')}"
            for p in (rxjs_root / "src").rglob("*.ts")
            if re.search(r"import \{[^}]*\boperate\b[^}]*\} from '[./]+util/lift'", p.read_text())
        }
        expected = await matches(run, {"rule": called("operate"), "language": "typescript"}, "src", importers)
        # over the cap: the first 50 shown, and every caller counted (each operator calls operate once)
        assert sites(r) <= expected and r.data["cut"] and len(r.data["entries"]) == 50, r.plain
        assert r.data["total"] == len(expected), (r.data["total"], len(expected), r.plain)


async def test_supertypes_and_subtypes_of_libstdcxx_exceptions_with_clangd(tmp_path):
    """Type hierarchy on real C++: the exception classes of Debian's libstdc++ (g++), seen from a file of
    ours that includes <stdexcept> (clangd 14 answers its own typeHierarchy extension)."""
    require_binary("clangd")
    gxx = require_binary("g++")
    root = tmp_path / "cxx"
    root.mkdir()
    (root / "main.cpp").write_text('#include <stdexcept>\n\nint main() { throw std::logic_error("x"); }\n')
    (root / "compile_flags.txt").write_text("-std=c++17\n")
    assert shutil.which(gxx)
    async with tether.open_run(root) as run:
        ask = {"action": "supertypes", "file": "main.cpp", "line": 3, "symbol": "logic_error"}
        r = await run.call("lsp", ask)
        assert not r.is_error, r.plain
        assert [e["name"] for e in r.data["entries"]] == ["exception"], r.plain
        await until_ready(run, "clangd")
        r = await run.call("lsp", {**ask, "action": "subtypes"})
        assert not r.is_error, r.plain
        names = {e["name"] for e in r.data["entries"]}
        assert {"domain_error", "invalid_argument", "length_error", "out_of_range"} <= names, r.plain
