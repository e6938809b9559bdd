"""Dispatch and lifecycle: contained failures, approval, bounded output, serialization, no orphans."""

from __future__ import annotations

import asyncio
import time

import attrs
import psutil
import pytest
import tether
from tether import Tier, Tool, ToolError, arg, hookimpl
from tether.procs import alive
from tether.testing import assert_no_traceback


@attrs.frozen
class SizeArgs:
    n: int = arg("how many characters", default=10, minimum=0)


@attrs.frozen
class NoArgs:
    pass


state = {"active": 0, "max": 0}


async def exclusive(ctx, a):
    state["active"] += 1
    state["max"] = max(state["max"], state["active"])
    await asyncio.sleep(0.02)
    state["active"] -= 1
    return "ok"


async def nested(ctx, a):
    inner = await ctx.run.call("nested")
    other = await ctx.run.call("exclusive")
    return f"inner: {inner.plain} | other: {other.plain}"


class Family:
    @hookimpl
    def tether_register_tools(self, run, register):
        register(Tool("big", Tier.READ, "Big output.", SizeArgs, lambda c, a: "x" * a.n))
        register(Tool("crash", Tier.READ, "Crashes.", NoArgs, lambda c, a: {}["missing"]))
        register(Tool("refuse", Tier.READ, "Model error.", NoArgs, self.refuse))
        register(Tool("exclusive", Tier.EXEC, "Not parallel safe.", NoArgs, exclusive, parallel_safe=False))
        register(Tool("nested", Tier.EXEC, "Calls itself.", NoArgs, nested, parallel_safe=False))

    @staticmethod
    def refuse(ctx, a):
        raise ToolError("that cannot work; try the other thing", why="test")


async def test_an_exception_in_a_tool_is_contained_and_logged(caplog):
    async with tether.open_run(".", plugins=[Family()], load_entry_points=False) as run:
        result = await run.call("crash")
    assert result.is_error
    assert "crash failed inside the tool: KeyError: 'missing'" in result.plain
    assert_no_traceback(result.plain, "the result")  # a fault of the tool, contained
    assert any("Traceback" in (r.exc_text or "") for r in caplog.records)


async def test_tool_error_is_the_models_error_with_data():
    async with tether.open_run(".", plugins=[Family()], load_entry_points=False) as run:
        result = await run.call("refuse")
    assert (
        result.is_error
        and result.plain == "that cannot work; try the other thing"
        and result.data == {"why": "test"}
    )


async def test_output_is_bounded_and_the_cut_is_said():
    async with tether.open_run(
        ".", plugins=[Family()], load_entry_points=False, options={"max_output_chars": 1000}
    ) as run:
        result = await run.call("big", {"n": 5000})
    assert len(result.plain) < 1300
    assert "[output cut: showed 1,000 of 5,000 characters. Narrow the request" in result.plain


async def test_approval_hook_refuses_and_can_be_async():
    class Approver:
        @hookimpl
        async def tether_approve(self, run, tool, arguments):
            await asyncio.sleep(0)
            return "big outputs are not allowed here" if tool.name == "big" else None

    async with tether.open_run(".", plugins=[Family(), Approver()], load_entry_points=False) as run:
        refused = await run.call("big", {"n": 1})
        allowed = await run.call("refuse")
    assert refused.is_error and "was not approved: big outputs are not allowed here" in refused.plain
    assert allowed.plain == "that cannot work; try the other thing"


async def test_calls_to_a_tool_that_is_not_parallel_safe_are_serialized():
    state.update(active=0, max=0)
    async with tether.open_run(".", plugins=[Family()], load_entry_points=False) as run:
        await asyncio.gather(*(run.call("exclusive") for _ in range(5)))
    assert state["max"] == 1


def test_the_sync_api_calls_and_closes():
    with tether.open_run_sync(".", plugins=[Family()], load_entry_points=False) as run:
        assert run.call("big", {"n": 3}).plain == "xxx"
        assert [t.name for t in run.tools()] == ["big", "crash", "exclusive", "nested", "refuse"]
    assert run.run._closed and not run._thread.is_alive()  # the run closed and its loop's thread ended
    assert run.call("big", {"n": 3}).plain == "the run is closed"  # an answer, not a wait for ever


async def test_closing_a_run_kills_process_trees_even_when_a_family_hangs(
    plugin_site, monkeypatch, no_leftover_processes
):
    import tether.run as run_module

    monkeypatch.setenv("PROCFAM_HANG_ON_CLOSE", "1")
    monkeypatch.setattr(run_module, "CLOSE_TIMEOUT", 0.5)
    async with tether.open_run(".", options={"procfam": True}) as run:
        from tether_test_procfam import Specs  # on the path of plugin_site

        run.resource(Specs.tether_procfam_resource)
        pid = (await run.call("proc_spawn")).data["pid"]
        await asyncio.sleep(0.3)
        tree = [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
        assert len(tree) == 2
    deadline = time.monotonic() + 5
    while any(alive(p) for p in tree) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not any(alive(p) for p in tree)


async def test_unknown_tool_names_the_tools_on_offer():
    async with tether.open_run(".", plugins=[Family()], load_entry_points=False) as run:
        result = await run.call("bigg")
    assert result.is_error
    assert result.plain.startswith(
        "unknown tool 'bigg'. Tools on surface 'full': big, crash, exclusive, nested, refuse."
    )


async def test_a_tool_that_runs_one_call_at_a_time_calling_itself_is_refused_not_deadlocked():
    async with tether.open_run(".", plugins=[Family()], load_entry_points=False) as run:
        result = await asyncio.wait_for(run.call("nested"), 5)
    assert result.plain == (
        "inner: nested cannot be called from inside a call of nested (it runs one call at a time); "
        "make the call directly instead | other: ok"
    )


def test_tool_error_takes_a_code_and_data_fields():
    from tether import ToolError

    exc = ToolError("no such worker 'w9'; vibe_list shows the workers", code="unknown_worker", worker="w9")
    assert (exc.message, exc.code, exc.data) == (
        "no such worker 'w9'; vibe_list shows the workers",
        "unknown_worker",
        {"error": "unknown_worker", "worker": "w9"},
    )
    assert list(exc.data or {}) == ["error", "worker"]  # the code first in the result's JSON
    passed_on = ToolError("a note first; then the error", **(exc.data or {}))  # another error's data
    assert (passed_on.code, passed_on.data) == ("unknown_worker", {"error": "unknown_worker", "worker": "w9"})
    with pytest.raises(TypeError):  # the one form: keywords, no dict
        ToolError("bad", {"error": "bad_thing"})  # pyright: ignore[reportCallIssue]
    assert ToolError("plain").data is None and ToolError("plain").code is None


async def test_every_call_has_its_own_id_also_across_runs():
    # the diagnostics-on-write hooks pair a write's before and after by its call id, and writes overlap
    seen: list[str] = []

    async def remember(ctx, a):
        seen.append(ctx.call_id)
        await asyncio.sleep(0.01)
        return "ok"

    class Ids:
        @hookimpl
        def tether_register_tools(self, run, register):
            register(Tool("remember", Tier.READ, "Remembers its call id.", NoArgs, remember))

    for _ in range(2):
        async with tether.open_run(".", plugins=[Ids()], load_entry_points=False) as run:
            await asyncio.gather(*(run.call("remember") for _ in range(20)))
    assert len(seen) == 40 and len(set(seen)) == 40
