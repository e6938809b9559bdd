"""basedpyright on a real project: click 8.5.1's sdist (src/ layout, pyright include = ["src", "tests/typing"]).

Each test runs on its own copy with a fresh run (a cold server), the diagnostics-on-write and first-query
tests under CPU load: what is said must hold on a busy machine.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import tether
import tether.files
from support import edit, introduced
from tether_lsp import readiness

MAKE_STR = (
    "    return str(value)\n\n\ndef _make_default",
    "    return len(str(value))\n\n\ndef _make_default",
)
ECHO = (
    "    message: object = None,\n    file: t.IO[t.Any] | None = None,",
    "    message: object,\n    file: t.IO[t.Any] | None = None,",
)


@pytest.mark.usefixtures("cpu_stress")
async def test_the_first_write_of_a_fresh_run_reports_no_old_error_of_another_file(click_root):
    async with tether.open_run(click_root, plugins=[tether.files]) as run:
        r = await edit(
            run,
            "src/click/utils.py",
            "def make_str(value: t.Any) -> str:",
            "def make_str(value: t.Any) -> str:  # c",
        )
        assert introduced(r) == [], r.plain
        assert "introduced" not in r.plain


@pytest.mark.usefixtures("cpu_stress")
async def test_a_break_is_reported_by_the_write_that_made_it_and_its_fix_reports_nothing(click_root):
    async with tether.open_run(click_root, plugins=[tether.files]) as run:
        # another open document makes basedpyright publish the previous version's list first, labelled new
        r = await run.call("lsp", {"action": "symbols", "file": "src/click/core.py"})
        assert not r.is_error, r.plain
        r = await edit(run, "src/click/utils.py", *MAKE_STR)
        assert ("src/click/utils.py", 59, "reportReturnType") in introduced(r), r.plain
        assert 'Type "int" is not assignable to return type "str"' in r.plain
        r = await edit(run, "src/click/utils.py", MAKE_STR[1], MAKE_STR[0])
        assert introduced(r) == [], r.plain
        r = await edit(run, "src/click/utils.py", *MAKE_STR)
        assert ("src/click/utils.py", 59, "reportReturnType") in introduced(r), r.plain


@pytest.mark.usefixtures("cpu_stress")
async def test_a_signature_change_reports_every_broken_caller_also_in_never_opened_files(click_root):
    async with tether.open_run(click_root, plugins=[tether.files]) as run:
        r = await edit(run, "src/click/utils.py", *ECHO)
        got = introduced(r)
        assert ("src/click/termui.py", 1024, "reportCallIssue") in got, r.plain
        assert ("src/click/core.py", 1591, "reportCallIssue") in got, r.plain
        assert {f for f, *_ in got} == {"src/click/termui.py", "src/click/core.py"}, r.plain
        r = await edit(run, "src/click/utils.py", ECHO[1], ECHO[0])
        assert introduced(r) == [] and "also changed" not in r.plain, r.plain


@pytest.mark.usefixtures("cpu_stress")
async def test_the_first_references_of_a_fresh_run_are_complete_or_say_they_may_not_be(click_root):
    async with tether.open_run(click_root) as run:
        r = await run.call(
            "lsp", {"action": "references", "file": "src/click/utils.py", "line": 240, "symbol": "echo"}
        )
        assert not r.is_error, r.plain
        assert r.data["total"] >= 30 or r.data["ready"] is False, r.plain
        if r.data["ready"] is False:
            assert r.plain.endswith("this answer may be incomplete; ask again in a few seconds"), r.plain
        (conn,) = run.resource("tether_lsp_supervisor").connections.values()
        assert await readiness.wait_ready(conn, 90) is None
        again = await run.call(
            "lsp", {"action": "references", "file": "src/click/utils.py", "line": 240, "symbol": "echo"}
        )
        # never an incomplete answer without the note; once ready, no note (a note that is always on fails)
        assert again.data["total"] == r.data["total"] or r.data["ready"] is False
        assert again.data["ready"] is True and "ask again" not in again.plain, again.plain


@pytest.mark.timeout(300)  # basedpyright's first round of click, then click's test_commands.py
async def test_a_rename_covers_the_callers_outside_the_servers_program_and_clicks_suite_passes(
    click_root, tmp_path, monkeypatch
):
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

    async with tether.open_run(click_root, plugins=[tether.files], options={"lsp_ready_wait": 120}) as run:
        r = await run.call(
            "lsp",
            {
                "action": "references",
                "file": "src/click/core.py",
                "line": 147,
                "symbol": "iter_params_for_processing",
            },
        )
        assert not r.is_error, r.plain
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
