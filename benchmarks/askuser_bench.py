"""askuser benchmarks: what tether adds to a question's round trip, beside an anchor, in one run.

    uv run python benchmarks/askuser_bench.py

1. Harness port: `run.call("ask_user")` answered at once by an async callable, against a no-op tool
   through the same `run.call` (the core's dispatch) - the difference is what ask_user adds.
   Target: < 100 µs added.
2. Terminal: keystroke to result on a real pseudo-terminal, one long-lived process asking 30
   questions through the terminal port, against a plain Python `readline()` loop on the same kind of
   tty that prints the same JSON. Target: ratio <= 2.0 or < 5 ms added.
3. MCP elicitation: `ask_user` through `tether serve` with the official client answering the
   `elicitation/create` at once, against a plain tool call (`read`) on the same server. One extra
   client round trip is inherent. Target: ratio <= 2.5.
4. Approval by card: a `write` call approved by an immediate callable port, against the same call with
   approval off. Target: < 150 µs added.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import termios
import textwrap
import time
from pathlib import Path

import attrs
import tether
import tether.files
from tether import Tier, Tool, ToolResult, hookimpl
from tether_askuser import Answer


@attrs.frozen
class NoArgs:
    pass


OK = ToolResult.text("ok")


async def noop(ctx, args):
    return OK


class NoopFamily:
    @hookimpl
    def tether_register_tools(self, run, register):
        register(Tool("noop", Tier.READ, "Does nothing.", NoArgs, noop))


QUESTION = {"question": "Which DB?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]}


def us(ns: list[int]) -> float:
    return statistics.median(ns) / 1000


async def harness(root: str, n: int = 5000) -> tuple[float, float]:
    async def human(q):
        return Answer.choose("SQLite")

    # the family is loaded as a plain plugin so the figure does not include other families' hooks
    from tether_askuser import plugin as askuser_plugin

    async with tether.open_run(
        root,
        plugins=[NoopFamily(), askuser_plugin],
        load_entry_points=False,
        options={"ask_user_port": human},
    ) as run:
        for _ in range(500):
            await run.call("ask_user", QUESTION)
            await run.call("noop", {})
        ask, anchor = [], []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            await run.call("ask_user", QUESTION)
            ask.append(time.perf_counter_ns() - t0)
            t0 = time.perf_counter_ns()
            await run.call("noop", {})
            anchor.append(time.perf_counter_ns() - t0)
    return us(ask), us(anchor)


async def approval(root: str, n: int = 2000) -> tuple[float, float]:
    from tether_askuser import plugin as askuser_plugin

    async def human(q):
        return Answer.choose("Allow")

    times = {}
    for on in (True, False):
        options = {"ask_user_port": human, "approval_by_card": on}
        async with tether.open_run(
            root, plugins=[tether.files, askuser_plugin], load_entry_points=False, options=options
        ) as run:
            for _ in range(200):
                await run.call("write", {"path": "w.txt", "content": "x"})
            got = []
            for _ in range(n):
                t0 = time.perf_counter_ns()
                r = await run.call("write", {"path": "w.txt", "content": "x"})
                got.append(time.perf_counter_ns() - t0)
            assert not r.is_error, r.plain
        times[on] = us(got)
    return times[True], times[False]


# -- terminal ----------------------------------------------------------------------------------------

TETHER_CHILD = textwrap.dedent(
    """
    import asyncio, json, sys
    import tether
    from tether_askuser import plugin

    async def main():
        async with tether.open_run(sys.argv[1], plugins=[plugin], load_entry_points=False) as run:
            for _ in range(int(sys.argv[2])):
                r = await run.call("ask_user", json.loads(sys.argv[3]))
                print(json.dumps(r.data), flush=True)

    asyncio.run(main())
    """
)

ANCHOR_CHILD = textwrap.dedent(
    """
    import json, sys
    tty = open("/dev/tty", "r+b", buffering=0)
    labels = [o["label"] for o in json.loads(sys.argv[3])["options"]]
    for _ in range(int(sys.argv[2])):
        tty.write(("Which DB?\\n" + "".join(f"  {i}. {l}\\n" for i, l in enumerate(labels, 1)) + "> ").encode())
        line = tty.readline()
        print(json.dumps({"selected": [labels[int(line) - 1]]}), flush=True)
    """
)


def _take_ctty() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def terminal_round_trips(script: str, root: str, n: int) -> float:
    master, slave = os.openpty()
    path = Path(root) / "child.py"
    path.write_text(script)
    proc = subprocess.Popen(
        [sys.executable, str(path), root, str(n), json.dumps(QUESTION)],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
        start_new_session=True,
        preexec_fn=_take_ctty,
    )
    os.close(slave)
    screen, times = b"", []
    try:
        for _ in range(n):
            deadline = time.monotonic() + 20
            while b"> " not in screen:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no prompt; terminal showed {screen[-500:]!r}")
                if select.select([master], [], [], 0.5)[0]:
                    screen += os.read(master, 65536)
            screen = b""
            t0 = time.perf_counter_ns()
            os.write(master, b"2\n")
            line = proc.stdout.readline()
            times.append(time.perf_counter_ns() - t0)
            assert b"SQLite" in line, line
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        os.close(master)
    return statistics.median(times[3:]) / 1e6


# -- MCP ---------------------------------------------------------------------------------------------


async def mcp_round_trips(root: str, n: int = 100) -> tuple[float, float]:
    import mcp_types as types
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def accept(context, params):
        return types.ElicitResult(action="accept", content={"choice": "SQLite"})

    (Path(root) / "hello.txt").write_text("hello\n")
    env = dict(os.environ, TETHER_PLUGINS="askuser")
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "tether.cli", "serve", "--root", root], env=env
    )
    async with (
        stdio_client(server) as (read, write),
        ClientSession(read, write, elicitation_callback=accept) as session,
    ):
        await session.initialize()
        ask, anchor = [], []
        for i in range(n + 10):
            t0 = time.perf_counter_ns()
            r = await session.call_tool("ask_user", QUESTION)
            t1 = time.perf_counter_ns()
            p = await session.call_tool("read", {"path": "hello.txt"})
            t2 = time.perf_counter_ns()
            assert r.meta["tether/data"]["selected"] == ["SQLite"] and not p.is_error
            if i >= 10:
                ask.append(t1 - t0)
                anchor.append(t2 - t1)
    return statistics.median(ask) / 1e6, statistics.median(anchor) / 1e6


def verdict(ok: bool) -> str:
    return "OK" if ok else "MISSED"


def main() -> None:
    with tempfile.TemporaryDirectory() as root:
        ask_us, noop_us = asyncio.run(harness(root))
        added = ask_us - noop_us
        print(f"harness port: ask_user round trip      {ask_us:8.1f} µs median (n=5000)")
        print(f"  anchor: no-op tool via run.call       {noop_us:8.1f} µs median")
        print(
            f"  added by ask_user {added:6.1f} µs, ratio {ask_us / noop_us:.2f}x   target < 100 µs added: {verdict(added < 100)}"
        )

        on_us, off_us = asyncio.run(approval(root))
        print(f"approval by card: write approved       {on_us:8.1f} µs median (n=2000)")
        print(f"  anchor: same write, approval off      {off_us:8.1f} µs median")
        print(
            f"  added by the card {on_us - off_us:6.1f} µs, ratio {on_us / off_us:.2f}x   target < 150 µs added: {verdict(on_us - off_us < 150)}"
        )

        n = 30
        tty_ms = terminal_round_trips(TETHER_CHILD, root, n)
        raw_ms = terminal_round_trips(ANCHOR_CHILD, root, n)
        ratio = tty_ms / raw_ms
        print(f"terminal: keystroke -> result          {tty_ms:8.2f} ms median (n={n - 3})")
        print(f"  anchor: plain readline() on the tty   {raw_ms:8.2f} ms median")
        print(
            f"  ratio {ratio:.2f}x, added {tty_ms - raw_ms:.2f} ms   target ratio <= 2.0 or < 5 ms added: "
            f"{verdict(ratio <= 2.0 or tty_ms - raw_ms < 5)}"
        )

        mcp_ask, mcp_read = asyncio.run(mcp_round_trips(root))
        ratio = mcp_ask / mcp_read
        print(f"MCP: ask_user via elicitation          {mcp_ask:8.2f} ms median (n=100)")
        print(f"  anchor: plain tool call (read)        {mcp_read:8.2f} ms median")
        print(f"  ratio {ratio:.2f}x   target <= 2.5: {verdict(ratio <= 2.5)}")


if __name__ == "__main__":
    main()
