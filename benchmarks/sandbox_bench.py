"""The built-in sandbox against the host, side by side in one process, samples interleaved.

Run: uv run python benchmarks/sandbox_bench.py  (prints medians and each ratio against its target)

Anchor = the same run without the sandbox (run option sandbox=false). Measured: a kernel's start to
ready (Python; JavaScript, whose TCP goes through the relay when sandboxed) (target <= 1.15x), a `1+1`
cell through the eval tool (<= 1.1x), a tool() round trip timed inside the kernel (<= 1.1x), and a
debug launch to the first stop under debugpy (<= 1.1x).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import attrs
import tether
from tether import Tier, Tool, arg
from tether_eval.hookspecs import tether_eval_kernels

STARTS = 9
CELLS = 100
BRIDGE_CALLS = 300
LAUNCHES = 9
D = "benchmark a cell inside the sandbox"
APP = "def add(a, b):\n    c = a + b\n    return c\n\nprint(add(1, 2))\n"


@attrs.frozen
class EchoArgs:
    text: str = arg("what to echo")


class Echo:
    @tether.hookimpl
    def tether_register_tools(self, run, register):
        register(Tool("echo", Tier.READ, "echo text", EchoArgs, lambda ctx, a: a.text, family="bench"))


def _run(root: Path, sandbox: bool):
    return tether.open_run(root, conversation_id="bench", plugins=[Echo()], options={"sandbox": sandbox})


async def kernel_start(root: Path, sandbox: bool, language: str) -> float:
    async with _run(root, sandbox) as run:
        factory = run.resource(tether_eval_kernels)
        started = time.perf_counter()
        await factory.get(language)
        return time.perf_counter() - started


async def cells_and_bridge(root: Path) -> tuple[list[float], list[float], list[float], list[float]]:
    """Both runs open at once, samples alternating between them, in alternating order."""
    code = (
        "import time, json\nts = []\n"
        f"for i in range({BRIDGE_CALLS // 10}):\n"
        "    t = time.perf_counter(); tool('echo', text='x'); ts.append(time.perf_counter() - t)\n"
        "print('TIMES', json.dumps(ts))\n"
    )
    cell = {False: [], True: []}
    calls = {False: [], True: []}
    async with _run(root, False) as host, _run(root, True) as boxed:
        runs = {False: host, True: boxed}
        for run in runs.values():
            await run.call("eval", {"code": "0", "description": D})
        for i in range(CELLS):
            # ABBA: the run that goes second pays for the first's trailing work (measured ~0.4 ms)
            for sandboxed, run in runs.items() if i % 2 else reversed(runs.items()):
                started = time.perf_counter()
                r = await run.call("eval", {"code": "1+1", "description": D})
                cell[sandboxed].append(time.perf_counter() - started)
                assert "2" in r.plain, r.plain
                if i % 10 == 0:
                    r = await run.call("eval", {"code": code, "description": D})
                    line = next(x for x in r.plain.splitlines() if x.startswith("TIMES "))
                    calls[sandboxed] += json.loads(line[6:])
    return cell[False], cell[True], calls[False], calls[True]


async def launch(root: Path, sandbox: bool) -> float:
    async with _run(root, sandbox) as run:
        await run.call("debug", {"action": "breakpoints", "file": "app.py", "lines": [2]})
        started = time.perf_counter()
        r = await run.call("debug", {"action": "launch", "program": "app.py"})
        took = time.perf_counter() - started
        assert r.data["stopped"]["line"] == 2, r.plain
        await run.call("debug", {"action": "terminate"})
        return took


def report(name: str, host: list[float], boxed: list[float], target: float) -> None:
    h, b = statistics.median(host), statistics.median(boxed)
    ratio = b / h
    verdict = "ok" if ratio <= target else "OVER"
    print(
        f"{name:34s} host {h * 1000:8.2f} ms   sandboxed {b * 1000:8.2f} ms   ratio {ratio:5.2f}x "
        f"(target <= {target:.2f}x: {verdict})"
    )


async def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="sandbox-bench-"))
    (root / "pyproject.toml").write_text("[project]\nname = 'bench'\nversion = '0'\n")
    (root / "app.py").write_text(APP)
    for language in ("python", "javascript"):
        host, boxed = [], []
        for _ in range(STARTS):  # interleaved: a busy machine weighs on both sides alike
            host.append(await kernel_start(root, False, language))
            boxed.append(await kernel_start(root, True, language))
        report(f"kernel start -> ready ({language})", host, boxed, 1.15)
    host, boxed, host_calls, boxed_calls = await cells_and_bridge(root)
    report("1+1 cell (python)", host, boxed, 1.10)
    report("tool() round trip (python)", host_calls, boxed_calls, 1.10)
    host, boxed = [], []
    for _ in range(LAUNCHES):
        host.append(await launch(root, False))
        boxed.append(await launch(root, True))
    report("debug launch -> first stop (debugpy)", host, boxed, 1.10)


if __name__ == "__main__":
    print(f"python {sys.version.split()[0]}; medians")
    asyncio.run(main())
