"""Fixtures of the eval tests: fake tools and plugins to call back into, and shared runs with real kernels."""

from __future__ import annotations

import asyncio

import attrs
import pytest
import tether
from support import assert_no_new_children, children
from tether import Diagnostic, Surface, Tier, Tool, ToolError, arg, hookimpl


@attrs.frozen
class EchoArgs:
    text: str = arg("what to echo")


@attrs.frozen
class SlowArgs:
    seconds: float = arg("how long to take")


@attrs.frozen
class WriteArgs:
    path: str = arg("file to write, relative to the root")
    content: str = arg("the new content")


async def _echo(ctx, args: EchoArgs):
    return tether.ToolResult.text(f"echo: {args.text}", {"echoed": args.text})


async def _slow(ctx, args: SlowArgs):
    await asyncio.sleep(args.seconds)
    return f"slept {args.seconds}"


async def _write(ctx, args: WriteArgs):
    target = ctx.run.resolve_path(args.path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(args.content)
    return f"wrote {ctx.run.relpath(target)}"


async def _fail(ctx, args: EchoArgs):
    raise ToolError(f"fail tool refuses {args.text!r}: give it something else")


class FakeTools:
    """A read tool, a slow tool, a file-writing tool with diagnostics, a failing and a refused tool."""

    __name__ = "eval_test_tools"

    @hookimpl
    def tether_register_tools(self, run, register):
        register(Tool("echo", Tier.READ, "echo text", EchoArgs, _echo))
        register(Tool("slow", Tier.READ, "sleep then answer", SlowArgs, _slow))
        register(Tool("fail", Tier.READ, "always fails", EchoArgs, _fail))
        register(Tool("danger", Tier.READ, "refused by approval", EchoArgs, _echo))
        register(
            Tool(
                "write_file",
                Tier.WRITE,
                "write a file",
                WriteArgs,
                _write,
                parallel_safe=False,
                touches=lambda a: [a.path],
            )
        )

    @hookimpl
    def tether_approve(self, run, tool, arguments):
        return "the test harness never allows 'danger'" if tool.name == "danger" else None

    @hookimpl
    def tether_diagnostics_after_write(self, run, paths):
        # a checker that flags every line containing TODO as an error
        out = {}
        for p in paths:
            text = (run.root / p).read_text()
            out[p] = [
                Diagnostic(p, i, 1, "error", "TODO left in the code", code="todo", source="fake")
                for i, line in enumerate(text.splitlines(), 1)
                if "TODO" in line
            ]
        return out

    @hookimpl
    def tether_register_surfaces(self, run):
        return [Surface("exec_no_write", {Tier.READ, Tier.EXEC})]


@pytest.fixture(scope="session")
def fake_tools():
    return FakeTools()


@pytest.fixture(scope="module")
def module_children():
    """For module-scoped runs: no process started by the module may outlive it."""
    before = children()
    yield
    assert_no_new_children(before)
