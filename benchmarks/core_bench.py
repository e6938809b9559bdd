"""Core benchmarks: cold `tether tools` with every family installed, and dispatch overhead of a no-op tool.

    uv run python benchmarks/core_bench.py                 # this tree
    uv run python benchmarks/core_bench.py --before REV    # this tree beside the sources of git REV

Anchors printed beside our figures, in the same run: a cold `python -c pass` and a cold import of
pluggy+attrs+cattrs (what any pluggy/attrs/cattrs program pays), a bare `await` of the handler, and
with ``--before`` the same measurements of an older revision's sources (``git archive`` of core/src
and plugins/*/src, put first on PYTHONPATH; the installed environment is the same for both). Cold
runs of the trees alternate, and so do the dispatch rounds, so load on a busy machine falls on all
alike. Cold starts are given as wall time and as CPU time (user + system of the child process), which
swings less with the machine's load. With ``--before``, it also says whether `tether tools --json`
of each older tree is byte-identical to this tree's.
Targets: `tether tools` under 200 ms wall, and at most 2.0x the cold import of pluggy+attrs+cattrs
measured in the same run; dispatch overhead under 50 µs median.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
LIBS_RATIO = 2.0  # `tether tools` cold against a cold import of pluggy+attrs+cattrs
COLD_RUNS = 15
DISPATCH_ROUNDS = 5


@attrs.frozen
class NoArgs:
    pass


async def dispatch(n: int = 20000) -> tuple[float, float]:
    """Median µs of `run.call` on a no-op tool, and of awaiting the handler alone."""
    import tether
    from tether import Tier, Tool, ToolResult, hookimpl

    ok = ToolResult.text("ok")

    async def noop(ctx, args):
        return ok

    class Bench:
        @hookimpl
        def tether_register_tools(self, run, register):
            register(Tool("noop", Tier.READ, "Does nothing.", NoArgs, noop))

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


def sources(tree: Path) -> list[str]:
    return [str(tree / "core" / "src"), *(str(p) for p in sorted((tree / "plugins").glob("*/src")))]


def export(rev: str, into: Path) -> Path:
    """The core and family sources of ``rev``, compiled (a normal install has bytecode)."""
    archive = subprocess.run(
        ["git", "archive", rev, "core/src", "plugins"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as t:
        t.extractall(into, filter="data")
    subprocess.run([sys.executable, "-m", "compileall", "-q", *sources(into)], check=True)
    return into


def env_for(tree: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(sources(tree))
    return env


def once(cmd: list[str], env: dict[str, str], cwd: Path = ROOT) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run of ``cmd``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, for its resource usage
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return wall, usage.ru_utime + usage.ru_stime


def cold(
    cmds: dict[str, tuple[list[str], dict[str, str]]], n: int = COLD_RUNS, busy: Path | None = None
) -> dict[str, tuple[float, float]]:
    """Median wall and CPU time of each command, the commands alternating run by run. A key ending in
    " busy" runs in ``busy``, a project that gets a new file before each run, as an agent's
    project does: `python -m` puts that working folder first on sys.path."""
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
    for i in range(n):
        for key, (cmd, env) in cmds.items():
            if busy is not None and key.endswith(" busy"):
                (busy / f"edit_{key.replace(' ', '_')}_{i}.py").write_text("x = 1\n")
                times[key].append(once(cmd, env, busy))
            else:
                times[key].append(once(cmd, env))
    return {
        k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in times.items()
    }


def dispatch_in(tree: Path | None) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--dispatch-only"],
        env=env_for(tree),
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    call_us, raw_us = json.loads(out.stdout)
    return call_us, raw_us


def listing(tree: Path | None) -> bytes:
    """What `tether tools --json` prints for the benchmark's root with ``tree``'s sources."""
    return subprocess.run(
        [sys.executable, "-m", "tether.cli", "tools", "--json"],
        env=env_for(tree),
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--before",
        metavar="REV",
        action="append",
        default=[],
        help="also measure the sources of this git revision, side by side (repeatable)",
    )
    parser.add_argument("--dispatch-only", action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.dispatch_only:
        print(json.dumps(asyncio.run(dispatch())))
        return
    py = sys.executable
    subprocess.run([py, "-m", "compileall", "-q", *sources(ROOT)], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        trees: dict[str, Path | None] = {rev: export(rev, Path(tmp) / rev) for rev in ns.before}
        trees["this tree"] = None
        cmds = {
            "bare": ([py, "-c", "pass"], env_for(None)),
            "libs": ([py, "-c", "import pluggy, attrs, cattrs"], env_for(None)),
            **{name: ([py, "-m", "tether.cli", "tools"], env_for(tree)) for name, tree in trees.items()},
            **{
                f"{name} busy": ([py, "-m", "tether.cli", "tools"], env_for(tree))
                for name, tree in trees.items()
            },
        }
        busy = Path(tmp) / "busy project"
        busy.mkdir()
        t = cold(cmds, busy=busy)
        rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
        for _ in range(DISPATCH_ROUNDS):
            for name, tree in trees.items():
                rounds[name].append(dispatch_in(tree))
        calls = {
            name: (statistics.median(c for c, _ in v), statistics.median(r for _, r in v))
            for name, v in rounds.items()
        }
        listings = {name: listing(tree) for name, tree in trees.items()}
    print(f"cold python -c pass:                 {t['bare'][0] * 1000:7.1f} ms (median of {COLD_RUNS})")
    print(f"cold import pluggy+attrs+cattrs:     {t['libs'][0] * 1000:7.1f} ms")
    first = next(iter(trees))
    print(
        f"{'':36}"
        + "".join(f"{name:>16}" for name in trees)
        + (f"{'ratio to ' + first:>20}" if len(trees) > 1 else "")
    )
    rows = {
        "cold `tether tools` (all families)": ({n: t[n][0] * 1000 for n in trees}, "ms"),
        "  CPU time of it (user+system)": ({n: t[n][1] * 1000 for n in trees}, "ms"),
        "  in a project just edited": ({n: t[f"{n} busy"][0] * 1000 for n in trees}, "ms"),
        "  CPU time of that": ({n: t[f"{n} busy"][1] * 1000 for n in trees}, "ms"),
        "  ratio to pluggy+attrs+cattrs": ({n: t[n][0] / t["libs"][0] for n in trees}, "x"),
        f"run.call no-op tool, median of {DISPATCH_ROUNDS}": ({n: c for n, (c, _) in calls.items()}, "µs"),
        "dispatch overhead (minus handler)": ({n: c - r for n, (c, r) in calls.items()}, "µs"),
    }
    for label, (values, unit) in rows.items():
        digits = 2 if unit == "x" else 1
        line = f"{label:36}" + "".join(f"{v:13.{digits}f} {unit:2}" for v in values.values())
        if len(trees) > 1:
            line += f"{values['this tree'] / values[first]:20.2f}"
        print(line)
    for name in ns.before:
        same = listings[name] == listings["this tree"]
        print(f"`tether tools --json` of {name} and this tree: {'byte-identical' if same else 'different'}")
    tools_ms = t["this tree"][0] * 1000
    ratio = t["this tree"][0] / t["libs"][0]
    overhead = calls["this tree"][0] - calls["this tree"][1]
    print(
        f"targets (this tree): `tether tools` < 200 ms: {'OK' if tools_ms < 200 else 'MISSED'}; "
        f"<= {LIBS_RATIO}x pluggy+attrs+cattrs: {ratio:.2f}x {'OK' if ratio <= LIBS_RATIO else 'MISSED'}; "
        f"dispatch overhead < 50 µs: {'OK' if overhead < 50 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
