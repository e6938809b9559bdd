"""Project walker benchmark: `tether.walk` on both of its paths, beside its anchors, in one run.

Run: uv run python benchmarks/walk_bench.py [--repeat N]

Corpus: the .py files of the interpreter's standard library (as astgrep_bench uses), copied twice to
a temporary folder: once as a git work tree (every file added; the walker takes `git ls-files`), once
as a plain folder (the walker takes the ignore crate). Anchors: `git ls-files` alone (the process the
fast path starts) and `os.walk` with a stat of every file (the floor of any Python walk that reports
sizes and mtimes, with no ignore rules at all). Medians of N runs, and ratios to `os.walk`.

A second corpus has ignore rules, where the git fast path is meant to pay off (issue 16 measured
24 ms against 113 ms): the same files with a `.gitignore` in every folder (`test_*.py`, re-included
by `!test_support.py`) and an ignored `build/` folder at the root holding another copy of them.
Both paths must answer the same files (checked) before they are timed side by side.
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


def git_tree(folder: Path) -> None:
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=folder, check=True)
    subprocess.run([*git, "add", "-A"], cwd=folder, check=True)


def with_ignore_rules(plain: Path, dest: Path) -> None:
    """``plain`` copied to ``dest`` with a .gitignore in every folder and an ignored build/ copy."""
    shutil.copytree(plain, dest)
    for folder in [dest, *(p for p in dest.rglob("*") if p.is_dir())]:
        (folder / ".gitignore").write_text("test_*.py\n!test_support.py\n")
    (dest / ".gitignore").write_text("build/\ntest_*.py\n!test_support.py\n")
    shutil.copytree(plain, dest / "build")


def relative(root: Path) -> list[str]:
    return sorted(os.path.relpath(f.path, root) for f in walk(root).files)


def rows(plain: Path, repo: Path, repeat: int) -> None:
    floor = median_ms(lambda: os_walk(plain), repeat)
    ls_files = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    timed = [
        ("os.walk + stat (anchor, no ignore rules)", floor),
        (
            "git ls-files alone (anchor)",
            median_ms(lambda: subprocess.run(ls_files, cwd=repo, capture_output=True, check=True), repeat),
        ),
        ("tether.walk, git work tree (git ls-files)", median_ms(lambda: walk(repo), repeat)),
        ("tether.walk, plain folder (ignore crate)", median_ms(lambda: walk(plain), repeat)),
    ]
    for label, ms in timed:
        print(f"{label:44} {ms:8.1f} ms   {ms / floor:5.2f}x os.walk")
    git_ms, crate_ms = timed[2][1], timed[3][1]
    print(f"{'git fast path against the ignore crate':44} {git_ms / crate_ms:8.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    repeat = parser.parse_args().repeat
    with tempfile.TemporaryDirectory() as tmp:
        plain, repo = Path(tmp) / "plain", Path(tmp) / "repo"
        count, size, label = stdlib_corpus(plain)
        shutil.copytree(plain, repo)
        git_tree(repo)
        assert walk(repo).via == "git" and walk(plain).via == "ignore"
        assert len(walk(repo).files) == len(walk(plain).files) == count
        print(f"corpus: {count} files, {size / 2**20:.1f} MiB ({label}); median of {repeat}")
        rows(plain, repo, repeat)
        ruled, ruled_repo = Path(tmp) / "ruled", Path(tmp) / "ruled-repo"
        with_ignore_rules(plain, ruled)
        shutil.copytree(ruled, ruled_repo)
        git_tree(ruled_repo)
        assert walk(ruled_repo).via == "git" and walk(ruled).via == "ignore"
        kept = relative(ruled)
        assert kept == relative(ruled_repo), "the two paths disagree on the files"
        folders = sum(1 for p in ruled.rglob(".gitignore"))
        print(
            f"\ncorpus with ignore rules: {folders} .gitignore files, build/ ignored, "
            f"{len(kept)} of {count * 2} files kept; median of {repeat}"
        )
        rows(ruled, ruled_repo, repeat)


if __name__ == "__main__":
    main()
