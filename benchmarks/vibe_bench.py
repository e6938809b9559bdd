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

On click 8.5.1's sources (the PyPI sdist the tests pin) made a git repository, with one uncommitted
change and one untracked file (so the start point carries them):

4. Spawn to first output: from the `vibe_spawn` call to the worker's first line (it prints its own
   clock as it starts), with a worktree (isolation worktree) against without (isolation none), in
   turn. Target (issue): ratio <= 1.3 and <= 300 ms added.
5. Merge: `vibe_merge apply` of a worker's 20-file change against `git apply` of the same diff in a
   checkout at the same state, with the vibe family alone (no language server: the diagnostics a
   merge answers with are the lsp family's cost, measured in lsp_bench.py). The same 20 files are
   reset between rounds.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import tether

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import real_projects  # pyright: ignore[reportMissingImports] - tests/ is put on sys.path just above

ROUNDS = 30
WT_ROUNDS = 15

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


CLOCK = textwrap.dedent(
    """
    import glob, sys, time
    print(time.time(), flush=True)
    brief = sys.stdin.read()
    if brief.startswith("edit"):
        for name in (sorted(glob.glob("src/click/*.py")) + sorted(glob.glob("tests/*.py")))[:20]:
            with open(name, "a") as fh:
                fh.write("# edited by a worker\\n")
    """
)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


async def worktree_rows() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(shutil.copytree(real_projects.click_pristine(), Path(tmp) / "click"))
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "-c", "user.name=b", "-c", "user.email=b@example.org", "commit", "-q", "-m", "click 8.5.1")
        with open(root / "README.md", "a") as fh:
            fh.write("an uncommitted line\n")
        (root / "notes.txt").write_text("untracked\n")
        (Path(tmp) / "clock.py").write_text(CLOCK)
        cmd = [sys.executable, str(Path(tmp) / "clock.py")]
        files = len(git(root, "ls-files").splitlines())
        options = {"vibe": {"fast": cmd, "max_workers": 4}}
        from tether_vibe import plugin

        # the vibe family alone: a merge's diagnostics (a language server on click) are not what is timed
        run_kw = {"modes": {"vibe"}, "options": options, "load_entry_points": False, "plugins": [plugin]}
        async with tether.open_run(root, **run_kw) as run:

            async def first_output(isolation: str) -> float:
                t = time.time()
                w = await run.call("vibe_spawn", {"brief": "x", "label": "b", "isolation": isolation})
                done = await run.call("vibe_wait", {"worker_id": w.data["worker_id"], "timeout_seconds": 60})
                assert done.data["status"] == "done", done.plain
                if isolation == "worktree":
                    await run.call("vibe_merge", {"worker_id": w.data["worker_id"], "action": "discard"})
                return float(done.data["result"].split()[0]) - t

            await first_output("none")
            await first_output("worktree")  # warm up both
            plain, isolated = [], []
            for _ in range(WT_ROUNDS):
                plain.append(await first_output("none"))
                isolated.append(await first_output("worktree"))

            ours, anchor = [], []
            checkout = Path(tmp) / "anchor"
            git(root, "worktree", "add", "-q", "--detach", str(checkout))
            for _ in range(WT_ROUNDS):
                w = await run.call("vibe_spawn", {"brief": "edit", "label": "edit", "isolation": "worktree"})
                wid = w.data["worker_id"]
                done = await run.call("vibe_wait", {"worker_id": wid, "timeout_seconds": 60})
                assert len(done.data["changes"]) == 20, done.plain
                t = time.perf_counter()
                merged = await run.call("vibe_merge", {"worker_id": wid, "action": "apply"})
                ours.append(time.perf_counter() - t)
                assert not merged.is_error and len(merged.data["applied"]) == 20, merged.plain
                diff = subprocess.run(
                    ["git", "diff", "--binary", "HEAD", "--", "src/click", "tests"],
                    cwd=root,
                    capture_output=True,
                    check=True,
                ).stdout
                (Path(tmp) / "change.diff").write_bytes(diff)
                t = time.perf_counter()
                subprocess.run(["git", "apply", str(Path(tmp) / "change.diff")], cwd=checkout, check=True)
                anchor.append(time.perf_counter() - t)
                git(checkout, "checkout", "-q", "--", "src/click", "tests")
                git(root, "checkout", "-q", "--", "src/click", "tests")
            git(root, "worktree", "remove", "--force", str(checkout))

    print(f"on click 8.5.1 made a git repository ({files} files; {WT_ROUNDS} rounds; medians)")
    a, b = median_ms(isolated), median_ms(plain)
    met = "met" if a / b <= 1.3 and a - b <= 300 else "MISSED"
    line(
        "spawn -> first output",
        a,
        b,
        f"anchor: isolation none; +{a - b:.0f} ms; target <= 1.3x and <= 300 ms: {met}",
    )
    line(
        "vibe_merge apply, 20 files", median_ms(ours), median_ms(anchor), "anchor: git apply of the same diff"
    )


if __name__ == "__main__":
    asyncio.run(main())
    asyncio.run(worktree_rows())
