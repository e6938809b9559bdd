"""Memory per run: N runs in one process, each on its own small Python project, each using lsp, eval and
ast_grep; PSS (shared pages counted once, split between their sharers) by kind of process, per run.

Run: uv run python benchmarks/memory_bench.py [--runs 1 10 20] [--rounds 5]

For each N: N runs are opened at once, each warmed (its language server, kernel and parser workers started
by a first hover, `1+1` cell and search), then ``--rounds`` rounds in which every run asks hover, definition,
references, an `eval` of `1+1` and an `ast_grep` search at the same time; the p95 of each is printed, with
the errors. Then the PSS of this process and of each of its descendants is read (`/proc/PID/smaps_rollup`
through psutil) and summed by kind:

- tether: this process, less what it held before the first run opened (the interpreter, the imports);
- parser workers: astgrep's forked worker processes (one pool per run);
- keepers: each run's keeper process (`tether.procs`);
- language servers: basedpyright (its Node);
- kernels: ipykernel processes.

"tether's own part" is the first three: the run's heap, its workers and its keeper, not the servers' and
kernels' own. Targets (the issue's): <= 120 MB PSS a run at 20 runs, of which tether's own part <= 30 MB;
p95 <= 200 ms for each request at that load; 0 errors.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil
import tether
import tether.files

RUN_TARGET_MB = 120.0
OWN_TARGET_MB = 30.0
P95_TARGET_MS = 200.0

UTIL = 'def greet(name: str) -> str:\n    """Say hello."""\n    return "hi " + name\n\n\nclass Greeter:\n    def hello(self) -> str:\n        return greet("x")\n'
MAIN = 'from pkg import util as u\nfrom pkg.util import greet\n\ngreeting = greet("a")\nvalue: int = len(u.greet("d"))\n'

REQUESTS = {
    "hover": ("lsp", {"action": "hover", "file": "pkg/main.py", "line": 4, "symbol": "greet"}),
    "definition": ("lsp", {"action": "definition", "file": "pkg/main.py", "line": 4, "symbol": "greet"}),
    "references": ("lsp", {"action": "references", "file": "pkg/util.py", "line": 1, "symbol": "greet"}),
    "eval 1+1": ("eval", {"code": "1+1", "description": "add one and one to check the kernel"}),
    "ast_grep": ("ast_grep", {"pattern": "def $F($$$A): $$$B", "path": "."}),
}


def project(root: Path) -> Path:
    files = {
        "pyproject.toml": '[project]\nname = "bench"\nversion = "0"\n',
        "pkg/__init__.py": "",
        "pkg/util.py": UTIL,
        "pkg/main.py": MAIN,
    }
    for i in range(10):
        files[f"pkg/mod{i}.py"] = (
            f"from pkg.util import greet\n\n\ndef f{i}(x: str) -> str:\n    return greet(x) * {i}\n"
        )
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def pss(p: psutil.Process) -> int:
    try:
        return p.memory_full_info().pss
    except psutil.Error:
        return 0


def kind(p: psutil.Process, own: list[str]) -> str:
    try:
        cmd = p.cmdline()
    except psutil.Error:
        return "gone"
    text = " ".join(cmd)
    if "basedpyright" in text or "langserver" in text:
        return "language servers"
    if "ipykernel" in text or "tether_eval" in text:
        return "kernels"
    if "tether/procs.py" in text:
        return "keepers"
    if cmd == own:
        return "parser workers"  # forked from this process: the same command line
    return "other"


def memory(baseline: int) -> dict[str, int]:
    me = psutil.Process()
    own = me.cmdline()
    sums = {"tether": pss(me) - baseline}
    for child in me.children(recursive=True):
        k = kind(child, own)
        sums[k] = sums.get(k, 0) + pss(child)
    return sums


async def one_round(runs: list, times: dict[str, list[float]], errors: list[str]) -> None:
    async def ask(run, name: str) -> None:
        tool, args = REQUESTS[name]
        start = time.perf_counter()
        r = await run.call(tool, args)
        times[name].append(time.perf_counter() - start)
        if r.is_error:
            errors.append(f"{name}: {r.plain[:200]}")

    await asyncio.gather(*(ask(run, name) for run in runs for name in REQUESTS))


async def measure(n: int, rounds: int, base: Path, baseline: int) -> None:
    async with contextlib.AsyncExitStack() as stack:
        runs = []
        for i in range(n):
            root = project(base / f"n{n}-{i}")
            runs.append(await stack.enter_async_context(tether.open_run(root, plugins=[tether.files])))
        warm_errors: list[str] = []
        await one_round(runs, {k: [] for k in REQUESTS}, warm_errors)  # starts every server and kernel
        times: dict[str, list[float]] = {k: [] for k in REQUESTS}
        errors: list[str] = []
        for _ in range(rounds):
            await one_round(runs, times, errors)
        sums = memory(baseline)
        total = sum(v for k, v in sums.items() if k != "gone")
        own = sums.get("tether", 0) + sums.get("parser workers", 0) + sums.get("keepers", 0)
        mb = 2**20
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"\n{n} run(s) in one process ({rounds} rounds of {len(REQUESTS)} requests a run, load {load})")
        print(f"  {'PSS by kind':34}{'total':>10}{'a run':>10}")
        for k in ("tether", "parser workers", "keepers", "language servers", "kernels", "other"):
            if k in sums:
                print(f"  {k:34}{sums[k] / mb:8.1f} MB{sums[k] / mb / n:8.1f} MB")
        print(
            f"  {'all':34}{total / mb:8.1f} MB{total / mb / n:8.1f} MB  target <= {RUN_TARGET_MB:.0f} MB a run"
        )
        print(
            f"  {'tether own part':34}{own / mb:8.1f} MB{own / mb / n:8.1f} MB  target <= {OWN_TARGET_MB:.0f} MB a run"
        )
        for name, values in times.items():
            p95 = statistics.quantiles(values, n=20)[-1] * 1000 if len(values) > 1 else values[0] * 1000
            med = statistics.median(values) * 1000
            ok = "ok" if p95 <= P95_TARGET_MS else "MISSED"
            print(
                f"  {name:34}median {med:7.1f} ms  p95 {p95:7.1f} ms  (target <= {P95_TARGET_MS:.0f} ms) {ok}"
            )
        print(f"  errors: {len(errors)} (warm-up: {len(warm_errors)})")
        for e in (warm_errors + errors)[:5]:
            print(f"    {e}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, nargs="+", default=[1, 10, 20])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    baseline = pss(psutil.Process())
    print(f"this process before any run: {baseline / 2**20:.1f} MB PSS; {psutil.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="memory-bench-") as tmp:
        for n in args.runs:
            await measure(n, args.rounds, Path(tmp), baseline)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
