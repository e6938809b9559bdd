"""Arguments nested deeper than Python's recursion limit, or too large, are refused at the edge with one
line, before anything walks them: structuring, the schema's checks, a tool's own code."""

from __future__ import annotations

import tether
import tether.files
from tether.run import MAX_ARGUMENT_DEPTH, MAX_ARGUMENT_ITEMS
from tether.testing import assert_model_error


def deep(levels: int, leaf: object = "x") -> object:
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


def deep_object(levels: int) -> object:
    value: object = "x"
    for _ in range(levels):
        value = {"k": value}
    return value


async def test_every_argument_of_every_tool_nested_thousands_deep_is_one_line(tmp_path):
    async with tether.open_run(
        tmp_path, plugins=[tether.files], modes=["vibe"], options={"vibe_fast": "cat"}
    ) as run:
        tools = run.tools()
        assert {"ast_grep", "read", "write"} <= {t.name for t in tools}
        for tool in tools:
            for name in [*tool.input_schema.get("properties", {}), "unknown_one"]:
                for value in (deep(5000), deep_object(5000)):
                    r = await run.call(tool.name, {name: value})
                    assert_model_error(r, f"invalid arguments for {tool.name}: {name}", "nested deeper than")
                    assert "\n" not in r.plain and len(r.plain) < 600, r.plain


async def test_nesting_within_the_limit_reaches_the_tools_own_checks(tmp_path):
    async with tether.open_run(tmp_path, plugins=[tether.files]) as run:
        r = await run.call("read", {"path": deep(MAX_ARGUMENT_DEPTH - 1)})
    assert_model_error(r, "invalid arguments for read: path: expected string")
    assert "nested deeper" not in r.plain


async def test_too_many_values_are_refused_before_structuring(tmp_path):
    async with tether.open_run(tmp_path, plugins=[tether.files]) as run:
        r = await run.call("read", {"path": list(range(MAX_ARGUMENT_ITEMS + 1))})
        assert_model_error(r, "invalid arguments for read: the arguments are too large")
        r = await run.call("read", {"path": "x" * (70 * 1024 * 1024)})
        assert_model_error(r, "invalid arguments for read: the arguments are too large")


def test_the_sync_api_answers_deep_arguments_too(tmp_path):
    with tether.open_run_sync(tmp_path, plugins=[tether.files]) as run:
        r = run.call("write", {"path": "a.py", "content": deep(100_000)})
    assert_model_error(r, "invalid arguments for write: content", "nested deeper than")
    assert not (tmp_path / "a.py").exists()
