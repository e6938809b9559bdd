"""serve benchmarks: what `tether serve` adds to a tool call, beside the direct call, in one run.

    uv run python benchmarks/serve_bench.py [N]

1. A `read` call's round trip through `tether serve` with the official SDK client, over stdio and
   over Streamable HTTP (127.0.0.1), in both protocol revisions, against the same call made directly
   with `run.call` in process (the anchor). Medians and ratios to the anchor.
2. `ask_user` answered at once by the client: through multi round-trip requests (2026-07-28: an
   InputRequiredResult, then the retry) against through `elicitation/create` (2025-11-25), both over
   stdio. Each is also shown against a plain `read` on the same connection.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mcp_types as types
import tether
import tether.files
from mcp import Client
from mcp.client.stdio import StdioServerParameters

READ = {"path": "hello.txt"}
QUESTION = {"question": "Which DB?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]}
ENV = dict(
    os.environ, TETHER_PLUGINS="askuser"
)  # the files tools and askuser only: no other family's start-up


def ms(ns: list[int]) -> float:
    return statistics.median(ns) / 1e6


async def timed(call, n: int) -> float:
    for _ in range(max(10, n // 10)):
        await call()
    got = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        await call()
        got.append(time.perf_counter_ns() - t0)
    return ms(got)


async def direct(root: str, n: int) -> float:
    async with tether.open_run(root, plugins=[tether.files], load_entry_points=False) as run:

        async def call():
            assert not (await run.call("read", READ)).is_error

        return await timed(call, n)


async def accept(context, params):
    return types.ElicitResult(action="accept", content={"choice": "SQLite"})


async def through(server, mode: str, n: int, tool: str = "read", args=READ) -> float:
    async with Client(server, mode=mode, elicitation_callback=accept) as client:

        async def call():
            assert not (await client.call_tool(tool, args)).is_error

        return await timed(call, n)


def stdio(root: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "tether.cli", "serve", "--root", root], env=ENV
    )


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        (Path(root) / "hello.txt").write_text("hello\n")
        anchor = await direct(root, n)
        rows = [("direct run.call (anchor)", anchor)]
        for mode, revision in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
            rows.append((f"stdio {revision}", await through(stdio(root), mode, n)))
        http = subprocess.Popen(
            [sys.executable, "-m", "tether.cli", "serve", "--root", root, "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        try:
            url = re.search(r"at (http://\S+/mcp)", http.stderr.readline()).group(1)
            for mode, revision in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
                rows.append((f"HTTP {revision}", await through(url, mode, n)))
        finally:
            http.send_signal(signal.SIGTERM)
            http.wait(30)
            http.stderr.close()
        print(f"1. read round trip, median of {n} (ms; ratio to the anchor)")
        for name, t in rows:
            print(f"   {name:<28} {t:8.3f}   x{t / anchor:7.1f}")

        asks = {}
        for mode, how in (("legacy", "elicitation/create"), ("auto", "MRTR (InputRequiredResult + retry)")):
            plain = await through(stdio(root), mode, n)
            asked = await through(stdio(root), mode, n, "ask_user", QUESTION)
            asks[mode] = (how, asked, plain)
        print(f"2. ask_user answered at once, over stdio, median of {n} (ms)")
        for how, asked, plain in asks.values():
            print(
                f"   {how:<36} {asked:8.3f}   (a plain read on the same server: {plain:.3f}; x{asked / plain:.1f})"
            )
        print(f"   MRTR / elicitation/create: x{asks['auto'][1] / asks['legacy'][1]:.2f}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))
