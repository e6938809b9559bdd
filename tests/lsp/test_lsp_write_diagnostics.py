"""Diagnostics on write through the host's file tools: only what the write introduced, bounded, in time."""

from __future__ import annotations

import time

import tether
import tether.files
from tether_lsp.hookspecs import tether_lsp_supervisor

ERR = 'Type "str" is not assignable to declared type "int"'


def introduced(r):
    return [(d["file"], d["line"], d["severity"], d["code"]) for d in (r.data or {}).get("diagnostics", [])]


async def edit(run, path, old, new):
    r = await run.call("edit", {"path": path, "old_string": old, "new_string": new})
    assert not r.is_error, r.plain
    return r


async def test_only_the_new_error_is_reported_when_the_file_already_had_one(py_root):
    async with tether.open_run(py_root, plugins=[tether.files]) as run:
        r = await edit(
            run,
            "pkg/main.py",
            'value: int = u.greet("d")\n',
            'value: int = u.greet("d")\ncount: int = len(3)\n',
        )
        assert introduced(r) == [("pkg/main.py", 8, "error", "reportArgumentType")]
        assert "This write introduced 1 error(s), 0 warning(s):" in r.plain
        assert "pkg/main.py:8:" in r.plain and ":7:" not in r.plain


async def test_a_moved_error_is_not_reported_again_but_the_same_message_a_second_time_is(py_root):
    async with tether.open_run(py_root, plugins=[tether.files]) as run:
        r = await edit(run, "pkg/main.py", "from pkg import util as u\n", "from pkg import util as u\n\n\n")
        assert introduced(r) == [] and "introduced" not in r.plain  # the old error moved to line 9
        r = await edit(
            run,
            "pkg/main.py",
            'value: int = u.greet("d")\n',
            'value: int = u.greet("d")\nvalue2: int = u.greet("e")\n',
        )
        assert introduced(r) == [("pkg/main.py", 10, "error", "reportAssignmentType")]
        assert ERR in r.data["diagnostics"][0]["message"]


async def test_an_error_there_before_the_run_never_counts_as_introduced_one_of_the_runs_own_does(py_root):
    """The rule: a diagnostic in a file when the run first saw it is never "introduced" by a later write
    (the agent did not break that); one the run introduced, fixed and brought back is reported again."""
    async with tether.open_run(py_root, plugins=[tether.files]) as run:
        r = await edit(run, "pkg/main.py", 'value: int = u.greet("d")', 'value: str = u.greet("d")')
        assert introduced(r) == []
        r = await run.call("lsp", {"action": "diagnostics", "file": "pkg/main.py"})
        assert r.data["diagnostics"] == []
        # back as the run first saw it: the error was there before the run, not the agent's doing
        r = await edit(run, "pkg/main.py", 'value: str = u.greet("d")', 'value: int = u.greet("d")')
        assert introduced(r) == [], r.plain
        own = 'value: int = u.greet("d")\nother: bytes = u.greet("e")'
        r = await edit(run, "pkg/main.py", 'value: int = u.greet("d")', own)
        assert introduced(r) == [("pkg/main.py", 8, "error", "reportAssignmentType")], r.plain
        r = await edit(run, "pkg/main.py", own, 'value: int = u.greet("d")')
        assert introduced(r) == [], r.plain
        r = await edit(run, "pkg/main.py", 'value: int = u.greet("d")', own)
        assert introduced(r) == [("pkg/main.py", 8, "error", "reportAssignmentType")], r.plain


async def test_new_errors_in_dependent_files_are_reported_even_never_opened_ones(py_root):
    async with tether.open_run(py_root, plugins=[tether.files]) as run:
        r = await edit(
            run, "pkg/util.py", "def greet(name: str) -> str:", "def greet(name: str, times: int) -> str:"
        )
        got = introduced(r)
        files = {f for f, *_ in got}
        assert {"pkg/main.py", "pkg/other.py"} <= files, r.plain
        assert all(sev == "error" and code == "reportCallIssue" for _, _, sev, code in got)
        assert ("pkg/other.py", 3, "error", "reportCallIssue") in got
        # the pre-existing error of main.py is not among them
        assert ("pkg/main.py", 7, "error", "reportAssignmentType") not in got


async def test_a_new_file_with_an_error_and_a_clean_write(py_root):
    async with tether.open_run(py_root, plugins=[tether.files]) as run:
        r = await run.call(
            "write",
            {"path": "pkg/fresh.py", "content": "from pkg.util import greet\n\nn: int = greet('x')\n"},
        )
        assert introduced(r) == [("pkg/fresh.py", 3, "error", "reportAssignmentType")]
        r = await run.call(
            "write",
            {"path": "pkg/fresh.py", "content": "from pkg.util import greet\n\ns: str = greet('x')\n"},
        )
        assert introduced(r) == [] and not r.is_error


async def test_a_capped_wait_says_diagnostics_still_pending(py_root):
    async with tether.open_run(py_root, plugins=[tether.files], options={"diagnostics_timeout": 0.05}) as run:
        t0 = time.monotonic()
        r = await edit(
            run,
            "pkg/main.py",
            'value: int = u.greet("d")\n',
            'value: int = u.greet("d")\ncount: int = len(3)\n',
        )
        assert "diagnostics incomplete: still pending for pkg/main.py after 0.05 s" in r.plain
        assert time.monotonic() - t0 < 1.0 + 3  # cold start of the baseline is not waited for either


async def test_a_file_no_server_handles_is_written_without_noise(py_root):
    async with tether.open_run(py_root, plugins=[tether.files]) as run:
        r = await run.call("write", {"path": "notes.md", "content": "# notes\n"})
        assert not r.is_error and r.plain.count("\n") == 0
        assert run.resource(tether_lsp_supervisor).connections == {}


async def test_a_pull_server_ty_reports_a_dependent_open_files_new_error(py_root):
    # ty answers only textDocument/diagnostic (pull): the other open documents are asked again
    async with tether.open_run(py_root, plugins=[tether.files], options={"lsp_servers": ["ty"]}) as run:
        r = await run.call("lsp", {"action": "diagnostics", "file": "pkg/other.py"})
        assert r.data["diagnostics"] == [], r.plain
        r = await edit(
            run, "pkg/util.py", "def greet(name: str) -> str:", "def greet(name: str, times: int) -> str:"
        )
        got = introduced(r)
        assert ("pkg/other.py", 3, "error", "missing-argument") in got, r.plain
        assert ("pkg/util.py", 8, "error", "missing-argument") in got


async def test_a_diagnostic_without_a_code_next_to_coded_ones_does_not_hide_a_new_error(py_root):
    # a syntax error has no code; sorting such keys with coded ones once failed and the write looked clean
    (py_root / "bad.py").write_text('x: int = "s"\ndef f(:\n')
    async with tether.open_run(py_root, plugins=[tether.files]) as run:
        r = await run.call("lsp", {"action": "diagnostics", "file": "bad.py"})
        assert {d["code"] for d in r.data["diagnostics"]} >= {None, "reportAssignmentType"}, r.plain
        r = await run.call("write", {"path": "ok.py", "content": 'y: int = "no"\n'})
        assert introduced(r) == [("ok.py", 1, "error", "reportAssignmentType")], r.plain


async def test_a_references_search_is_not_taken_for_a_round_of_analysis(py_root):
    # basedpyright reports each references search as work-done progress; on a token of the server's own it
    # read as an analysis round ("a begin after the change, nothing in progress"), so a write whose round had
    # not begun yet could end its wait on a references query running beside it
    async with tether.open_run(py_root) as run:
        args = {"action": "references", "file": "pkg/util.py", "line": 1, "symbol": "greet"}
        r = await run.call("lsp", args)
        assert not r.is_error, r.plain
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        begins = conn.begins
        for _ in range(3):
            r = await run.call("lsp", args)
            assert not r.is_error and r.data["total"] >= 5, r.plain
        assert conn.begins == begins, f"{conn.begins - begins} progress begins counted for 3 references"


async def test_in_open_files_mode_a_write_checks_the_importers_itself_and_says_how_many_it_did_not(py_root):
    # lsp_open_files_above 0: the mode of a big program (Django), on the sample project
    options = {"lsp_open_files_above": 0, "lsp_importers_checked": 1, "diagnostics_timeout": 120}
    async with tether.open_run(py_root, plugins=[tether.files], options=options) as run:
        r = await edit(
            run, "pkg/util.py", "def greet(name: str) -> str:", "def greet(name: str, times: int) -> str:"
        )
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        assert conn.open_files and not conn.publishes_program
        got = introduced(r)
        # main.py imports greet and uses it most: the nearest importer, the one checked
        assert {f for f, *_ in got} == {"pkg/util.py", "pkg/main.py"}, r.plain  # other.py not checked
        assert ("pkg/main.py", 7, "error", "reportAssignmentType") not in got  # there before the write
        assert "checked 1 file(s) importing pkg/util.py; 1 more import it and were not checked" in r.plain
        r = await edit(
            run, "pkg/util.py", "def greet(name: str, times: int) -> str:", "def greet(name: str) -> str:"
        )
        # (main.py's old error, hidden by the broken call, is back: the registry's rule, as in workspace mode)
        assert all(code != "reportCallIssue" for *_, code in introduced(r)), r.plain
        assert "incomplete" not in r.plain and "not compared" not in r.plain, r.plain
