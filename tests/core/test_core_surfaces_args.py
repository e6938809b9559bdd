"""Tiers decide surfaces; arguments are structured strictly and every problem is one line."""

from __future__ import annotations

import asyncio
import functools
from typing import Literal

import attrs
import pytest
import tether
import tether.files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tether import Tier, Tool, ToolResult, arg, hookimpl
from tether.testing import assert_model_error, assert_no_traceback


@attrs.frozen
class NavArgs:
    file: str = arg("file", min_length=1)
    line: int = arg("1-based line", minimum=1, maximum=100000)
    symbol: str | None = arg("symbol", default=None)
    exact: bool = arg("exact", default=False)
    action: Literal["definition", "hover"] = arg("action", default="hover")
    lines: list[int] = arg("lines", factory=list)


def nav(ctx, a: NavArgs) -> ToolResult:
    return ToolResult.text("ok", attrs.asdict(a))


class Family:
    @hookimpl
    def tether_register_tools(self, run, register):
        register(Tool("nav", Tier.READ, "Navigate.", NavArgs, nav, family="fam"))
        register(Tool("mutate", Tier.WRITE, "Mutate.", NavArgs, nav, family="fam"))
        register(Tool("execute", Tier.EXEC, "Execute.", NavArgs, nav, family="fam"))


@pytest.mark.parametrize("surface", ["plan", "readonly"])
async def test_write_and_exec_tools_are_absent_from_read_only_surfaces_and_refused_by_name(surface):
    async with tether.open_run(".", surface=surface, plugins=[Family()], load_entry_points=False) as run:
        schema_names = [t["name"] for t in run.tool_listing()["tools"]]
        assert schema_names == ["nav"]
        for name in ("mutate", "execute"):
            result = await run.call(name, {"file": "a", "line": 1})
            assert result.is_error
            assert f"unknown tool '{name}'" in result.plain and "Tools on surface" in result.plain


async def test_full_surface_sees_every_tier():
    async with tether.open_run(".", plugins=[Family()], load_entry_points=False) as run:
        assert {t.name for t in run.tools()} == {"nav", "mutate", "execute"}


class Harness:
    @hookimpl
    def tether_tool_tier(self, run, tool):
        return Tier.READ if tool.name == "mutate" else None

    @hookimpl
    def tether_register_surfaces(self, run):
        return [tether.Surface("review", {"read", "exec"})]


class OldHarness:  # the deprecated name of the surfaces hook, still served for one release
    @hookimpl
    def tether_tool_tier(self, run, tool):
        return Tier.READ if tool.name == "mutate" else None

    @hookimpl
    def tether_add_surfaces(self, run):
        return [tether.Surface("review", {"read", "exec"})]


async def test_the_old_surfaces_hook_works_with_a_deprecation_warning():
    with pytest.warns(
        DeprecationWarning,
        match="implements tether_add_surfaces, which is deprecated: implement tether_register_surfaces",
    ):
        async with tether.open_run(
            ".", surface="review", plugins=[Family(), OldHarness()], load_entry_points=False
        ) as run:
            assert {t.name for t in run.tools()} == {"nav", "mutate", "execute"}


async def test_harness_overrides_a_tier_and_defines_a_surface():
    async with tether.open_run(
        ".", surface="plan", plugins=[Family(), Harness()], load_entry_points=False
    ) as run:
        assert {t.name for t in run.tools()} == {"nav", "mutate"}
    async with tether.open_run(
        ".", surface="review", plugins=[Family(), Harness()], load_entry_points=False
    ) as run:
        assert {t.name for t in run.tools()} == {"nav", "mutate", "execute"}


async def test_schema_is_derived_from_the_attrs_class():
    schema = Tool("nav", Tier.READ, "", NavArgs, nav).input_schema
    assert schema["required"] == ["file", "line"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["line"] == {
        "description": "1-based line",
        "type": "integer",
        "minimum": 1,
        "maximum": 100000,
    }
    assert schema["properties"]["action"]["enum"] == ["definition", "hover"]
    assert schema["properties"]["lines"]["items"] == {"type": "integer"}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"file": "a", "line": "ten"}, "line: expected integer, got string 'ten'"),
        ({"file": "a", "line": 3.7}, "line: expected integer, got number 3.7"),
        (
            {"file": "a", "line": 1, "exact": "false"},
            "exact: expected boolean (true or false), got string 'false'",
        ),
        ({"line": 1}, "missing required argument 'file'"),
        (
            {"file": "a", "line": 1, "colum": 4},
            "unknown argument 'colum'; allowed: file, line, symbol, exact, action, lines",
        ),
        ({"file": "a", "line": 0}, "line: must be at least 1, got 0"),
        ({"file": "a", "line": 10**6}, "line: must be at most 100000, got 1000000"),
        ({"file": "", "line": 1}, "file: must not be empty"),
        (
            {"file": "a", "line": 1, "action": "rename"},
            'action: expected one of "definition", "hover", got string \'rename\'',
        ),
        ({"file": "a", "line": 1, "lines": "1,2"}, "lines: expected array, got string '1,2'"),
        ({"file": "a", "line": 1, "lines": [1, "x"]}, "lines[1]: expected integer, got string 'x'"),
    ],
)
async def test_bad_arguments_give_one_line_per_problem(arguments, expected):
    async with tether.open_run(".", plugins=[Family()], load_entry_points=False) as run:
        result = await run.call("nav", arguments)
    assert_model_error(result)
    assert result.plain == f"invalid arguments for nav: {expected}"


async def test_whole_number_floats_are_integers_and_good_arguments_pass():
    async with tether.open_run(".", plugins=[Family()], load_entry_points=False) as run:
        result = await run.call("nav", {"file": "a", "line": 3.0, "lines": [1, 2]})
    assert not result.is_error and result.data["line"] == 3 and result.data["lines"] == [1, 2]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@functools.cache
def _every_tool_names() -> list[str]:
    """All tools every installed family offers on a run that has the resources it can have here (listed once)."""

    async def collect():
        async with tether.open_run(".", plugins=[tether.files], conversation_id="c", modes={"vibe"}) as run:
            return [(t.name, sorted(t.input_schema.get("properties", {}))) for t in run.tools()]

    return asyncio.run(collect())


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_random_json_at_every_tool_gives_an_answer_not_a_traceback(tmp_path, data):
    tools = _every_tool_names()
    name, keys = data.draw(st.sampled_from(tools))
    keyed = st.fixed_dictionaries({}, optional={k: json_values for k in keys}) if keys else st.just({})
    arguments = data.draw(st.one_of(json_values, keyed))

    async def one():
        async with tether.open_run(
            tmp_path, plugins=[tether.files], conversation_id="c", modes={"vibe"}
        ) as run:
            return await asyncio.wait_for(run.call(name, arguments), 60)

    result = asyncio.run(one())
    assert isinstance(result, ToolResult)
    assert_no_traceback(result.plain, "the result")
    if result.is_error:
        assert result.plain.strip(), "an error must say something"
