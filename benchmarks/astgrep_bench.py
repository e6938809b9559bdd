"""astgrep benchmark: tether's ast_grep beside the ast-grep CLI on real code, in one run.

Run: uv run python benchmarks/astgrep_bench.py [--repeat N] [--corpus NAME ...]

(``--corpus rxjs --corpus gocode --repeat 11``: the small corpora, whose times of tens of milliseconds
need more runs for a stable median on a busy machine; the machine's load is printed before and after.)

Corpora, copied to a temporary folder so both tools see the same files:
- the .py files of the standard library of the interpreter running this script (without site-packages);
- the TypeScript sources (`src/`) of the npm package rxjs 7.8.2 (fetched once with `npm pack`, cached);
- the Go sources Debian's golang-*-dev packages install under /usr/share/gocode/src;
- for the languages the agreement work was about (Solidity, Swift, CSS, Kotlin, TSX; Go above): every file
  of that language in the pinned package the agreement tests use (tests/astgrep/corpora.py: OpenZeppelin,
  expo-modules-core, bootstrap, react-native-screens), not only their 36 KB sample.

For each row it prints the median wall time of the ast-grep CLI (default threads; `ast-grep run -p` for a
pattern, `ast-grep scan --inline-rules` for a rule), of a cold tether search (a fresh run, the worker pool
starting inside the measured call, the walker's cache of folder listings emptied) and of a repeated
search in the same run over unchanged files, the ratios to the targets (cold <= 1.0x, repeated <= 0.05x),
the ratio of CPU times of the cold search and of ast-grep (which moves less with the machine's load than
wall time does), and whether the match sets (file, byte range) are identical.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TETHER_PLUGINS", "astgrep")  # measure this family, not the others' start-up
import tether
import tether.walk
from tether_astgrep.hookspecs import tether_astgrep_parsers

RXJS = "rxjs@7.8.2"
GOCODE = Path("/usr/share/gocode/src")
INSIDE_A_FUNCTION = {"pattern": "print($$$A)", "inside": {"kind": "function_definition", "stopBy": "end"}}
# (corpus, language, pattern or rule)
ROWS = [
    ("stdlib", "python", "print($A)"),
    ("stdlib", "python", "$X.append($Y)"),
    ("stdlib", "python", "def $F($$$ARGS): $$$BODY"),
    ("rxjs", "typescript", "$A.subscribe($$$B)"),
    ("gocode", "go", "if err != nil { $$$B }"),
    ("stdlib", "python", INSIDE_A_FUNCTION),
    ("solidity", "solidity", "function $F($$$A) $$$M { $$$B }"),
    ("swift", "swift", "guard let $A = $B else { $$$C }"),
    ("css", "css", "@media $Q { $$$B }"),
    ("kotlin", "kotlin", "fun $F($$$A) { $$$B }"),
    ("tsx", "tsx", "<$T $$$A />"),
]


def _copy(files, base: Path, dest: Path) -> tuple[int, int]:
    count = size = 0
    for src in files:
        rel = src.relative_to(base)
        if any(p.startswith(".") for p in rel.parts):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
        count += 1
        size += target.stat().st_size
    return count, size


def stdlib_corpus(dest: Path) -> tuple[int, int, str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = [p for p in stdlib.rglob("*.py") if p.relative_to(stdlib).parts[0] != "site-packages"]
    return (*_copy(files, stdlib, dest), f"CPython {sys.version.split()[0]} stdlib .py")


def rxjs_corpus(dest: Path) -> tuple[int, int, str]:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tether-bench"
    cache.mkdir(parents=True, exist_ok=True)
    tgz = cache / "rxjs-7.8.2.tgz"
    if not tgz.exists():
        subprocess.run(
            ["npm", "pack", RXJS, "--pack-destination", str(cache), "--silent"],
            check=True,
            capture_output=True,
        )
    unpacked = Path(tempfile.mkdtemp(prefix="rxjs-", dir=dest.parent))
    with tarfile.open(tgz) as tar:
        tar.extractall(unpacked, filter="data")
    src = unpacked / "package" / "src"
    try:
        return (*_copy(list(src.rglob("*.ts")), src, dest), f"{RXJS} src/ .ts")
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)


def gocode_corpus(dest: Path) -> tuple[int, int, str]:
    return (*_copy(list(GOCODE.rglob("*.go")), GOCODE, dest), f"{GOCODE} .go")


def package_corpus(lang: str):
    """Every file of ``lang`` in the pinned package the agreement tests take their sample from."""

    def make(dest: Path) -> tuple[int, int, str]:
        sys.path[:0] = [str(TESTS), str(TESTS / "astgrep")]
        import attrs
        from corpora import CORPORA as TEST_CORPORA

        corpus = attrs.evolve(TEST_CORPORA[lang], budget=1 << 40)
        files = corpus.copy(shutil.which("npm") or "npm", dest)
        return len(files), sum(f.stat().st_size for f in files), f"{corpus.origin}, every {lang} file"

    return make


TESTS = Path(__file__).resolve().parent.parent / "tests"
CORPORA = {
    "stdlib": stdlib_corpus,
    "rxjs": rxjs_corpus,
    "gocode": gocode_corpus,
    **{lang: package_corpus(lang) for lang in ("solidity", "swift", "css", "kotlin", "tsx")},
}


def sg_binary() -> str:
    beside = Path(sys.executable).parent / "ast-grep"
    return str(beside) if beside.exists() else (shutil.which("ast-grep") or "ast-grep")


def run_sg(query, language: str, corpus: Path) -> tuple[float, float, set]:
    """Wall and CPU seconds (user + system, from the child's own rusage) of one ast-grep run, and its matches."""
    if isinstance(query, dict):
        cmd = [
            sg_binary(),
            "scan",
            "--inline-rules",
            json.dumps({"id": "bench", "language": language, "rule": query}),
        ]
    else:
        cmd = [sg_binary(), "run", "-p", query, "-l", language]
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([*cmd, "--json=stream", str(corpus)], stdout=subprocess.PIPE, stderr=err)
        assert proc.stdout is not None
        with proc.stdout:
            out = proc.stdout.read().decode()
        # wait4: this child's own rusage (RUSAGE_CHILDREN would also count other children reaped meanwhile)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        elapsed = time.perf_counter() - t0
        if proc.returncode not in (0, 1):  # 1: no match; anything else is the CLI failing, not a result
            err.seek(0)
            raise SystemExit(f"{shlex.join(cmd)} failed ({proc.returncode}): {err.read().decode()[-2000:]}")
    found = set()
    for line in out.splitlines():
        m = json.loads(line)
        rel = Path(m["file"]).resolve().relative_to(corpus).as_posix()
        off = m["range"]["byteOffset"]
        found.add((rel, off["start"], off["end"]))
    return elapsed, usage.ru_utime + usage.ru_stime, found


def _args(query, language: str) -> dict:
    return {("rule" if isinstance(query, dict) else "pattern"): query, "language": language}


async def tether_search(run, query, language: str) -> float:
    t0 = time.perf_counter()
    result = await run.call("ast_grep", {**_args(query, language), "max_results": 1})
    elapsed = time.perf_counter() - t0
    assert not result.is_error, result.plain
    return elapsed


async def tether_cold(run, query, language: str) -> tuple[float, float]:
    """Wall and CPU seconds of a run's first search: this process (all threads) and the workers it forked.

    The run's keeper of processes (started with the first worker) is not counted.
    """
    cpu0 = time.process_time()
    elapsed = await tether_search(run, query, language)
    cpu = time.process_time() - cpu0
    for proc in run.resource(tether_astgrep_parsers).worker_procs:  # forked during this search
        times = proc.cpu_times()
        cpu += times.user + times.system
    return elapsed, cpu


async def tether_all_matches(run, corpus: Path, query, language: str) -> set:
    """Every match (the tool shows at most 1000): through the run's resource, as the tool searches."""
    from tether_astgrep.query import compile_query, find_target

    pool = run.resource(tether_astgrep_parsers)
    target = await find_target(pool, ".", language)
    args = _args(query, language)
    compiled = compile_query(pool, args.get("pattern"), target.grammar, args.get("rule"))
    results = await pool.search(compiled, target.grammar, target.files)
    return {(Path(r.path).relative_to(corpus).as_posix(), m[0], m[1]) for r in results for m in r.matches}


def _load() -> str:
    """The machine's load (1, 5, 15 minutes): cold times of tens of milliseconds move with it."""
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--corpus", action="append", choices=sorted(CORPORA), help="only these (default: all)"
    )
    args = parser.parse_args()
    chosen = args.corpus or list(CORPORA)
    with tempfile.TemporaryDirectory(prefix="astgrep-bench-") as tmp:
        corpora: dict[str, Path] = {}
        for name, make in CORPORA.items():
            if name not in chosen:
                continue
            corpora[name] = (Path(tmp) / name).resolve()
            corpora[name].mkdir()
            count, size, what = make(corpora[name])
            print(f"corpus {name}: {count} files, {size / 1e6:.2f} MB ({what})")
        print(f"{len(os.sched_getaffinity(0))} cores; repeat {args.repeat}; {_load()}")
        for name, corpus in corpora.items():  # warm the OS file cache for both tools
            row = next(r for r in ROWS if r[0] == name)
            run_sg(row[2], row[1], corpus)
        print(
            f"{'corpus':7} {'pattern or rule':34} {'ast-grep':>9} {'cold':>8} {'ratio':>6} {'repeat':>8} {'ratio':>6} {'cpu':>7}  matches  same"
        )
        for name, language, query in ROWS:
            if name not in corpora:
                continue
            corpus = corpora[name]
            sg_times, cold_times, warm_times, sg_cpu, cold_cpu = [], [], [], [], []
            sg_found: set = set()
            for _ in range(args.repeat):
                t, cpu, sg_found = run_sg(query, language, corpus)
                sg_times.append(t)
                sg_cpu.append(cpu)
                tether.walk.clear_cache()  # cold: the folder's listing is not kept from the last run
                async with tether.open_run(corpus) as run:
                    t, cpu = await tether_cold(run, query, language)
                    cold_times.append(t)
                    cold_cpu.append(cpu)
                    for _ in range(args.repeat):
                        warm_times.append(await tether_search(run, query, language))
            async with tether.open_run(corpus) as run:
                ours = await tether_all_matches(run, corpus, query, language)
            sg_med, cold, warm = (statistics.median(x) for x in (sg_times, cold_times, warm_times))
            cpu_ratio = statistics.median(cold_cpu) / statistics.median(sg_cpu)
            same = "yes" if ours == sg_found else f"NO (+{len(ours - sg_found)} -{len(sg_found - ours)})"
            shown = ("rule: print inside a def" if isinstance(query, dict) else query)[:34]
            print(
                f"{name:7} {shown:34} {sg_med:8.2f}s {cold:7.2f}s {cold / sg_med:5.2f}x {warm:7.3f}s {warm / sg_med:5.2f}x"
                f" {cpu_ratio:6.2f}x  {len(ours):7}  {same}"
            )
        print(
            "targets: cold <= 1.00x the ast-grep CLI, repeated <= 0.05x; 'same' compares (file, byte range) sets"
        )
        print(
            "cpu: CPU time of the cold search (this process and its workers) over ast-grep's (user + system), medians"
        )
        print(f"at the end: {_load()}")


if __name__ == "__main__":
    asyncio.run(main())
