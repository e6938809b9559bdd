"""astgrep benchmark: tether's ast_grep beside the ast-grep CLI on the CPython standard library.

Run: uv run python benchmarks/astgrep_bench.py [--repeat N]

Corpus: the .py files of the standard library of the interpreter running this script (without
site-packages), copied to a temporary folder so both tools see the same files. For each pattern it
prints the median wall time of the ast-grep CLI (default threads), of a cold tether search (a fresh
run: the worker pool starts inside the measured call) and of a repeated search in the same run over
unchanged files, the ratios to the targets (cold <= 1.0x, repeated <= 0.25x), and whether the match
sets (file, byte range) are identical.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TETHER_PLUGINS", "astgrep")  # measure this family, not the others' start-up
import tether

PATTERNS = ["print($A)", "$X.append($Y)", "def $F($$$ARGS): $$$BODY"]


def make_corpus(dest: Path) -> tuple[int, int]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    count = size = 0
    for src in stdlib.rglob("*.py"):
        rel = src.relative_to(stdlib)
        if rel.parts[0] == "site-packages" or any(p.startswith(".") for p in rel.parts):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
        count += 1
        size += target.stat().st_size
    return count, size


def sg_binary() -> str:
    beside = Path(sys.executable).parent / "ast-grep"
    return str(beside) if beside.exists() else (shutil.which("ast-grep") or "ast-grep")


def run_sg(pattern: str, corpus: Path) -> tuple[float, set]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sg_binary(), "run", "-p", pattern, "-l", "python", "--json=stream", str(corpus)],
        capture_output=True, text=True, check=False,
    )
    elapsed = time.perf_counter() - t0
    found = set()
    for line in proc.stdout.splitlines():
        m = json.loads(line)
        rel = Path(m["file"]).resolve().relative_to(corpus).as_posix()
        off = m["range"]["byteOffset"]
        found.add((rel, off["start"], off["end"]))
    return elapsed, found


async def tether_search(run, pattern: str) -> float:
    t0 = time.perf_counter()
    result = await run.call("ast_grep", {"pattern": pattern, "language": "python", "max_results": 1})
    elapsed = time.perf_counter() - t0
    assert not result.is_error, result.plain
    return elapsed


async def tether_all_matches(run, corpus: Path, pattern: str) -> set:
    """Every match (the tool shows at most 1000): through the run's resource, as the tool searches."""
    from tether_astgrep.tools import _compile, _target

    pool = run.resource("tether_astgrep_parsers")
    target = await _target(pool, ".", "python")
    results = await pool.search(_compile(pool, pattern, target.grammar), target.grammar, target.files)
    return {(Path(r.path).relative_to(corpus).as_posix(), m[0], m[1]) for r in results for m in r.matches}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="astgrep-bench-") as tmp:
        corpus = Path(tmp).resolve()
        count, size = make_corpus(corpus)
        print(f"corpus: {count} .py files, {size / 1e6:.1f} MB (CPython {sys.version.split()[0]} stdlib); "
              f"{len(os.sched_getaffinity(0))} cores; repeat {args.repeat}")
        run_sg(PATTERNS[0], corpus)  # warm the OS file cache for both tools
        print(f"{'pattern':28} {'ast-grep':>9} {'cold':>8} {'ratio':>6} {'repeat':>8} {'ratio':>6}  matches  same")
        for pattern in PATTERNS:
            sg_times, cold_times, warm_times = [], [], []
            sg_found: set = set()
            for _ in range(args.repeat):
                t, sg_found = run_sg(pattern, corpus)
                sg_times.append(t)
                async with tether.open_run(corpus) as run:
                    cold_times.append(await tether_search(run, pattern))
                    for _ in range(args.repeat):
                        warm_times.append(await tether_search(run, pattern))
            async with tether.open_run(corpus) as run:
                ours = await tether_all_matches(run, corpus, pattern)
            sg_med, cold, warm = (statistics.median(x) for x in (sg_times, cold_times, warm_times))
            same = "yes" if ours == sg_found else f"NO (+{len(ours - sg_found)} -{len(sg_found - ours)})"
            print(f"{pattern:28} {sg_med:8.2f}s {cold:7.2f}s {cold / sg_med:5.2f}x {warm:7.3f}s {warm / sg_med:5.2f}x"
                  f"  {len(ours):7}  {same}")
        print("targets: cold <= 1.00x the ast-grep CLI, repeated <= 0.25x; 'same' compares (file, byte range) sets")


if __name__ == "__main__":
    asyncio.run(main())
