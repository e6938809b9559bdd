"""A test family: a resource that starts real processes, a slow tool with progress, tools of every tier."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import attrs
import pluggy
from tether import Tier, Tool, ToolResult, arg, hookimpl

hookspec = pluggy.HookspecMarker("tether")


class Specs:
    @staticmethod
    @hookspec(firstresult=True)
    def tether_procfam_resource(run):
        """The family's resource: a handle or None."""


class Resource:
    def __init__(self, source: str) -> None:
        self.source = source
        self.closed = False

    async def aclose(self) -> None:
        if os.environ.get("PROCFAM_HANG_ON_CLOSE"):
            await asyncio.sleep(3600)  # a family whose shutdown hangs: the run must still reap its processes
        self.closed = True


@attrs.frozen
class NoArgs:
    pass


@attrs.frozen
class SlowArgs:
    steps: int = arg("how many steps", default=3, minimum=1, maximum=50)


async def spawn(ctx, args: NoArgs) -> ToolResult:
    # a child that starts a grandchild: the whole tree must go when the run closes
    code = "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)"
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    ctx.run.track_process(proc)
    return ToolResult.text(f"started {proc.pid}", {"pid": proc.pid})


async def slow(ctx, args: SlowArgs) -> ToolResult:
    for i in range(args.steps):
        await ctx.progress(i + 1, args.steps, f"step {i + 1}")
        await asyncio.sleep(0.05)
    return ToolResult.text(f"done after {args.steps} steps", {"steps": args.steps})


async def source(ctx, args: NoArgs) -> str:
    return ctx.run.resource(Specs.tether_procfam_resource).source


@attrs.frozen
class ProcfamOptions:
    procfam: bool = arg("turn the test family on", default=False)


@hookimpl
def tether_addoptions(register):
    register(ProcfamOptions)


@hookimpl
def tether_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(Specs)


@hookimpl
def tether_procfam_resource(run):
    if not (run.options.of(ProcfamOptions).procfam or os.environ.get("PROCFAM_ON")):
        return None
    return Resource("default")


@hookimpl
def tether_register_tools(run, register):
    if run.resource(Specs.tether_procfam_resource) is None:
        register.unavailable("procfam is off for this run (set the run option procfam)")
        return
    register(Tool("proc_spawn", Tier.EXEC, "Start a process tree.", NoArgs, spawn))
    register(Tool("proc_slow", Tier.READ, "Work slowly, with progress.", SlowArgs, slow))
    register(Tool("proc_source", Tier.READ, "Which resource implementation serves.", NoArgs, source))
    register(Tool("proc_write", Tier.WRITE, "A write-tier tool.", NoArgs, lambda c, a: "wrote"))
