"""Core benchmarks: cold `tether tools` with every family installed, and dispatch overhead of a no-op tool.

    uv run python benchmarks/core_bench.py

Anchors printed beside our figures, in the same run: a cold `python -c pass` and a cold import of
pluggy+attrs+cattrs (what any pluggy/attrs/cattrs program pays), and a bare `await` of the handler.
Targets: `tether tools` under 200 ms wall; dispatch overhead under 50 µs median.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

import attrs

import tether
from tether import Tier, Tool, ToolResult, hookimpl


def cold(cmd: list[str], n: int = 15) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@attrs.frozen
class NoArgs:
    pass


OK = ToolResult.text("ok")


async def noop(ctx, args):
    return OK


class Bench:
    @hookimpl
    def tether_register_tools(self, run, register):
        register(Tool("noop", Tier.READ, "Does nothing.", NoArgs, noop))


async def dispatch(n: int = 20000) -> tuple[float, float]:
    async with tether.open_run(".", plugins=[Bench()], load_entry_points=False) as run:
        for _ in range(1000):
            await run.call("noop", {})
        per_call, raw = [], []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            await run.call("noop", {})
            per_call.append(time.perf_counter_ns() - t0)
            t0 = time.perf_counter_ns()
            await noop(None, None)
            raw.append(time.perf_counter_ns() - t0)
    return statistics.median(per_call) / 1000, statistics.median(raw) / 1000


def main() -> None:
    py = sys.executable
    # A normal install has bytecode for every module; the workspace's own sources get theirs on first
    # import unless PYTHONDONTWRITEBYTECODE is set. Compile them once so we time start-up, not compile.
    root = Path(__file__).resolve().parent.parent
    sources = [str(root / "core" / "src"), *(str(p) for p in sorted((root / "plugins").glob("*/src")))]
    subprocess.run([py, "-m", "compileall", "-q", *sources], check=True)
    bare = cold([py, "-c", "pass"])
    libs = cold([py, "-c", "import pluggy, attrs, cattrs"])
    tools = cold([py, "-m", "tether.cli", "tools"])
    print(f"cold python -c pass:                 {bare * 1000:7.1f} ms (median of 15)")
    print(f"cold import pluggy+attrs+cattrs:     {libs * 1000:7.1f} ms")
    print(f"cold `tether tools` (all families):  {tools * 1000:7.1f} ms   target < 200 ms: {'OK' if tools < 0.2 else 'MISSED'}")
    call_us, raw_us = asyncio.run(dispatch())
    print(f"run.call no-op tool:                 {call_us:7.1f} µs median (handler alone {raw_us:.2f} µs)")
    print(f"dispatch overhead:                   {call_us - raw_us:7.1f} µs   target < 50 µs: {'OK' if call_us - raw_us < 50 else 'MISSED'}")


if __name__ == "__main__":
    main()
