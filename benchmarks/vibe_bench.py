"""vibe benchmarks: what the command roster adds to a worker's round trip, beside an anchor, in one run.

    uv run python benchmarks/vibe_bench.py

No target is set for this family by its issue; these figures show the roster's own cost.

1. Round trip: `vibe_spawn` then `vibe_wait` on a worker that reads its briefing and prints a result,
   against the anchor `subprocess.run(cmd, input=briefing)` of the same command (start, feed, read,
   reap). The difference is the roster: process group, pipes pumped in tasks, the leftover-group check
   when the worker exits, and two tool calls. Target (ours): ratio <= 1.5.
2. Spawn latency: how long `vibe_spawn` takes to return (the worker goes on in the background),
   against the anchor of the round trip in 1. Target (ours): spawn < 50 % of a round trip.
3. Kill: `vibe_kill` of a worker that has one child, until both are gone, against the anchor
   `os.killpg` + waiting for the leader. Target (ours): < 100 ms.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import tether

ROUNDS = 30

WORKER = textwrap.dedent(
    """
    import subprocess, sys, time
    brief = sys.stdin.read()
    if "child" in brief:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        time.sleep(300)
    print("done:", len(brief))
    """
)


def median_ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def line(name: str, ours: float, anchor: float, target: str) -> None:
    print(
        f"{name:<28} tether {ours:8.2f} ms   anchor {anchor:8.2f} ms   ratio {ours / anchor:5.2f}   {target}"
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "worker.py").write_text(WORKER)
        cmd = [sys.executable, str(root / "worker.py")]
        brief = "Refactor the parser.\n" * 50
        options = {"vibe": {"fast": cmd, "max_workers": 4}}
        async with tether.open_run(root, modes={"vibe"}, options=options) as run:
            # warm up both sides (page cache, the interpreter's first start)
            subprocess.run(
                cmd, input=brief.encode(), capture_output=True, check=True
            )  # the anchor is plain blocking code, nothing else runs meanwhile
            w = await run.call("vibe_spawn", {"brief": brief, "label": "warm"})
            await run.call("vibe_wait", {"worker_id": w.data["worker_id"], "timeout_seconds": 60})

            anchor, ours, spawn = [], [], []
            for _ in range(ROUNDS):  # interleaved, so drift hits both sides alike
                t = time.perf_counter()
                out = subprocess.run(cmd, input=brief.encode(), capture_output=True, check=True)  # as above
                anchor.append(time.perf_counter() - t)
                assert out.stdout.startswith(b"done:")

                t = time.perf_counter()
                w = await run.call("vibe_spawn", {"brief": brief, "label": "bench"})
                spawn.append(time.perf_counter() - t)
                done = await run.call("vibe_wait", {"worker_id": w.data["worker_id"], "timeout_seconds": 60})
                ours.append(time.perf_counter() - t)
                assert done.data["status"] == "done", done.plain

            kill_anchor, kill_ours = [], []
            for _ in range(10):
                proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, start_new_session=True)  # as above
                proc.stdin.write(b"child\n")
                proc.stdin.close()
                await asyncio.sleep(0.3)
                t = time.perf_counter()
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
                kill_anchor.append(time.perf_counter() - t)

                w = await run.call("vibe_spawn", {"brief": "child\n", "label": "to kill"})
                await asyncio.sleep(0.3)
                t = time.perf_counter()
                killed = await run.call("vibe_kill", {"worker_id": w.data["worker_id"]})
                kill_ours.append(time.perf_counter() - t)
                assert killed.data["status"] == "killed", killed.plain

    print(f"vibe benchmarks ({ROUNDS} round trips, 10 kills; medians)")
    rt_ours, rt_anchor = median_ms(ours), median_ms(anchor)
    line(
        "spawn + wait round trip",
        rt_ours,
        rt_anchor,
        f"target ratio <= 1.5: {'met' if rt_ours / rt_anchor <= 1.5 else 'MISSED'}",
    )
    sp = median_ms(spawn)
    line(
        "vibe_spawn returns",
        sp,
        rt_anchor,
        f"target < 50% of a round trip: {'met' if sp < 0.5 * rt_anchor else 'MISSED'}",
    )
    k_ours, k_anchor = median_ms(kill_ours), median_ms(kill_anchor)
    line("kill worker + child", k_ours, k_anchor, f"target < 100 ms: {'met' if k_ours < 100 else 'MISSED'}")


if __name__ == "__main__":
    asyncio.run(main())
