"""Project walker benchmark: `tether.walk` on both of its paths, beside its anchors, in one run.

Run: uv run python benchmarks/walk_bench.py [--repeat N]

Corpus: the .py files of the interpreter's standard library (as astgrep_bench uses), copied twice to
a temporary folder: once as a git work tree (every file added; the walker takes `git ls-files`), once
as a plain folder (the walker takes the ignore crate). Anchors: `git ls-files` alone (the process the
fast path starts) and `os.walk` with a stat of every file (the floor of any Python walk that reports
sizes and mtimes, with no ignore rules at all). Medians of N runs, and ratios to `os.walk`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from astgrep_bench import stdlib_corpus
from tether.walk import walk


def median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def os_walk(root: Path) -> int:
    n = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            os.stat(os.path.join(folder, name))
            n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    repeat = parser.parse_args().repeat
    with tempfile.TemporaryDirectory() as tmp:
        plain, repo = Path(tmp) / "plain", Path(tmp) / "repo"
        count, size, label = stdlib_corpus(plain)
        shutil.copytree(plain, repo)
        git = ["git", "-c", "user.name=b", "-c", "user.email=b@example.com"]
        subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
        subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
        assert walk(repo).via == "git" and walk(plain).via == "ignore"
        assert len(walk(repo).files) == len(walk(plain).files) == count
        print(f"corpus: {count} files, {size / 2**20:.1f} MiB ({label}); median of {repeat}")
        floor = median_ms(lambda: os_walk(plain), repeat)
        rows = [
            ("os.walk + stat (anchor, no ignore rules)", floor),
            (
                "git ls-files alone (anchor)",
                median_ms(
                    lambda: subprocess.run(
                        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                        cwd=repo,
                        capture_output=True,
                        check=True,
                    ),
                    repeat,
                ),
            ),
            ("tether.walk, git work tree (git ls-files)", median_ms(lambda: walk(repo), repeat)),
            ("tether.walk, plain folder (ignore crate)", median_ms(lambda: walk(plain), repeat)),
        ]
        for label, ms in rows:
            print(f"{label:44} {ms:8.1f} ms   {ms / floor:5.2f}x os.walk")


if __name__ == "__main__":
    main()
