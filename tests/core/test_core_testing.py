"""The test kit for families (`tether.testing`): each assertion fails where it must."""

from __future__ import annotations

import subprocess
import sys

import pytest
import tether
from tether.testing import (
    assert_light_entry_point,
    assert_model_error,
    assert_no_new_children,
    assert_no_traceback,
    children,
)


def test_assert_model_error_refuses_a_traceback_or_a_fault_of_the_tool():
    assert_model_error(
        tether.ToolResult.error("line: expected integer, got string 'ten'"), "expected integer"
    )
    with pytest.raises(AssertionError, match="expected an error result"):
        assert_model_error(tether.ToolResult.text("fine"))
    with pytest.raises(AssertionError, match="fault of the tool"):
        assert_model_error(
            tether.ToolResult.error('Traceback (most recent call last):\n  File "x.py", line 1')
        )
    with pytest.raises(AssertionError, match="fault of the tool"):
        assert_model_error(tether.ToolResult.error("grep failed inside the tool: KeyError: 'x'"))
    with pytest.raises(AssertionError, match="'did you mean' not in the error"):
        assert_model_error(tether.ToolResult.error("unknown language"), "did you mean")


def test_assert_no_traceback_names_what_showed_one():
    assert_no_traceback("tether: unknown surface 'nope'\n", "stderr")
    with pytest.raises(AssertionError, match="stderr shows a traceback"):
        assert_no_traceback('Traceback (most recent call last):\n  File "x.py", line 1\n', "stderr")


def test_assert_light_entry_point_names_what_was_loaded():
    assert_light_entry_point("tether", forbidden=("tether.run", "cattrs", "mcp"))
    with pytest.raises(AssertionError, match=r"importing json loaded json\.decoder"):
        assert_light_entry_point("json", forbidden=("json.decoder", "tomllib"))
    with pytest.raises(
        AssertionError, match="loaded cattrs"
    ):  # `then` runs after the import, in the same interpreter
        assert_light_entry_point("tether", forbidden=("cattrs",), then="import cattrs")


async def test_tether_run_loads_only_the_families_named(tether_run, tmp_path):
    async with tether_run(tmp_path, only=["astgrep"]) as run:
        # and the core's resolve, which it registers once a tool of the run can stage (ast_edit)
        assert {t.family for t in run.tools()} == {"astgrep", "core"}
    async with tether_run(tmp_path, only=[]) as run:
        assert run.tools() == []


def test_leftover_processes_are_named():
    before = children()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(AssertionError, match=f"processes left behind: {proc.pid} "):
            assert_no_new_children(before, timeout=0.2)
    finally:
        proc.kill()
        proc.wait()
    assert_no_new_children(before)
