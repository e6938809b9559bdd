"""Write-path benchmark: apply_patch over N files (all or nothing, fsynced, journaled) beside `git apply`.

Run: uv run python benchmarks/write_bench.py [--files N] [--repeat R]

Each round lays N small files in a fresh folder and applies one patch changing every file, by
`git apply` (the anchor: no fsync, no all-or-nothing across files) and by tether's apply_patch
(parse, snapshots, the root's write lock, a journal, every new file fsynced before the first
rename, folders fsynced). Medians of R rounds, and the ratio to git.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import tether
import tether.files


def lay(root: Path, n: int) -> None:
    root.mkdir()
    for i in range(n):
        (root / f"f{i}.txt").write_text("a\nb\nc\n")


def patch_for(n: int) -> str:
    return "".join(f"--- a/f{i}.txt\n+++ b/f{i}.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n" for i in range(n))


async def tether_once(root: Path, patch: str) -> float:
    async with tether.open_run(root, plugins=[tether.files], load_entry_points=False) as run:
        t0 = time.perf_counter()
        result = await run.call("apply_patch", {"patch": patch})
        elapsed = time.perf_counter() - t0
    assert not result.is_error, result.plain
    return elapsed


def git_once(root: Path, patch: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(["git", "apply", "-"], cwd=root, input=patch.encode(), check=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    patch = patch_for(args.files)
    git_times, tether_times = [], []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        for r in range(args.repeat):
            lay(Path(tmp) / f"git{r}", args.files)
            git_times.append(git_once(Path(tmp) / f"git{r}", patch))
            lay(Path(tmp) / f"tether{r}", args.files)
            tether_times.append(asyncio.run(tether_once(Path(tmp) / f"tether{r}", patch)))
    g, t = statistics.median(git_times) * 1000, statistics.median(tether_times) * 1000
    print(f"one patch over {args.files} files; median of {args.repeat}")
    print(f"git apply (anchor, no fsync, not all-or-nothing)   {g:8.1f} ms")
    print(f"apply_patch (journaled, fsynced, all or nothing)   {t:8.1f} ms   {t / g:5.2f}x git apply")


if __name__ == "__main__":
    main()
