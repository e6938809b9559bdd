"""Diagnostics on write on a big TypeScript project and a big Go tree, beside lsp_big_bench.py's Django rows.

Run: uv run python benchmarks/lsp_big_ts_go_bench.py [--rounds N] [--cli-rounds N] [--only ts|go]
(npm on PATH for the download, the repository's node_modules for typescript-language-server and tsc;
gopls, go and Debian's golang-golang-x-tools-dev with the -dev packages .ci/run installs)

1. TypeScript, Cloudflare's SDK 7.3.0 from npm (src/: 1,908 .ts files; its tsconfig's program, the files
   index.ts reaches: 1,201): `edit` of internal/headers.ts adding a required parameter to buildHeaders
   (imported by 88 files), then its revert, N times in one run (the first write includes tsserver's project
   load); the median of the breaking writes with the broken callers reported in other files, against
   `tsc --noEmit -p .` over the project on the broken tree (tsc cannot check fewer files: the checked ones
   import the whole program). Target: <= 10 s.
2. Go, golang.org/x/tools from Debian (1,072 .go files, 185 packages, its requirements vendored from
   Debian's -dev packages): `edit` of analysisutil.Format's signature (18 calls in 6 files of other
   packages), then its revert, N times; against `go vet -gcflags=-e ./go/analysis/passes/...`, the
   packages that can import that internal package, on the broken tree (build cache warm). Target: <= 10 s.
3. Peak memory (VmHWM) of the servers' processes over those writes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tether
import tether.files

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_projects  # pyright: ignore[reportMissingImports] - tests/ is put on sys.path just above
from lsp_big_bench import peak_mb  # pyright: ignore[reportMissingImports] - benchmarks/, just above

HEADERS = "internal/headers.ts"
BUILD_HEADERS = (
    "export const buildHeaders = (newHeaders: HeadersLike[]): NullableHeaders => {",
    "export const buildHeaders = (newHeaders: HeadersLike[], strict: boolean): NullableHeaders => {",
)
UTIL = "go/analysis/passes/internal/analysisutil/util.go"
FORMAT = (
    "func Format(fset *token.FileSet, x ast.Expr) string {",
    "func Format(fset *token.FileSet, x ast.Expr, extra int) string {",
)
NODE_BIN = Path(__file__).resolve().parents[1] / "node_modules" / ".bin"


def errors_elsewhere(r, written: str) -> tuple[int, int]:
    """(errors, files) the write's answer reports outside the written file."""
    found = [
        d for d in (r.data or {}).get("diagnostics", []) if d["severity"] == "error" and d["file"] != written
    ]
    return len(found), len({d["file"] for d in found})


async def writes(
    root: Path, rel: str, change: tuple[str, str], rounds: int
) -> tuple[list[float], list, list, int]:
    times, found, notes = [], [], []
    async with tether.open_run(root, plugins=[tether.files]) as run:
        for _ in range(rounds):
            t0 = time.perf_counter()
            r = await run.call("edit", {"path": rel, "old_string": change[0], "new_string": change[1]})
            times.append(time.perf_counter() - t0)
            assert not r.is_error, r.plain
            found.append(errors_elsewhere(r, rel))
            notes = [
                line[:300]
                for line in r.plain.splitlines()
                if "checked" in line or "incomplete" in line or "pending" in line or "compared" in line
            ]
            r = await run.call("edit", {"path": rel, "old_string": change[1], "new_string": change[0]})
            assert not r.is_error, r.plain
        return times, found, notes, peak_mb(run)


def checker_seconds(command: list[str], root: Path, pattern: str, stream: str) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    spent = time.perf_counter() - t0
    lines = [m for m in re.findall(pattern, getattr(done, stream), re.M)]
    return spent, len(lines), len(set(lines))


def row(name: str, times: list[float], found: list, notes: list[str]) -> None:
    print(
        f"   breaking write of {name}, median of {len(times)}: {statistics.median(times):6.1f} s "
        f"(each: {', '.join(f'{t:.1f}' for t in times)}); errors (files) reported in other files: {found}"
    )
    for line in notes:
        print(f"   {line}")


async def typescript(rounds: int, cli_rounds: int, tmp: Path) -> None:
    npm = shutil.which("npm")
    assert npm, "npm is not on PATH"
    os.environ["PATH"] = f"{NODE_BIN}{os.pathsep}{os.environ['PATH']}"
    root = real_projects.cloudflare_copy(real_projects.cloudflare_pristine(npm), tmp / "cloudflare")
    print(
        f"1. Cloudflare 7.3.0 (TypeScript), {sum(1 for _ in root.rglob('*.ts'))} .ts files; load {os.getloadavg()[0]:.1f}"
    )
    times, found, notes, mem = await writes(root, HEADERS, BUILD_HEADERS, rounds)
    row("buildHeaders (typescript-language-server)", times, found, notes)
    path = root / HEADERS
    path.write_text(path.read_text().replace(*BUILD_HEADERS))
    pattern = r"^((?!internal/headers\.ts)[^(\n]+)\(\d+,\d+\): error TS2554"
    cli = [
        checker_seconds(
            [str(NODE_BIN / "tsc"), "--noEmit", "--pretty", "false", "-p", "."], root, pattern, "stdout"
        )
        for _ in range(cli_rounds)
    ]
    path.write_text(path.read_text().replace(BUILD_HEADERS[1], BUILD_HEADERS[0]))
    c = statistics.median(t for t, _, _ in cli)
    print(
        f"   tsc --noEmit over the project, median of {cli_rounds}: {c:6.1f} s (errors (files) in other files: "
        f"{cli[0][1]} ({cli[0][2]})); ratio {statistics.median(times) / c:.2f} (target <= 10 s)"
    )
    print(f"   typescript-language-server + tsserver peak memory: {mem} MB")


async def go(rounds: int, cli_rounds: int, tmp: Path) -> None:
    root = real_projects.debian_go_module(real_projects.XTOOLS_SOURCE, tmp / "tools")
    print(
        f"2. golang.org/x/tools (Debian), {sum(1 for _ in root.rglob('*.go'))} .go files; load {os.getloadavg()[0]:.1f}"
    )
    times, found, notes, mem = await writes(root, UTIL, FORMAT, rounds)
    row("analysisutil.Format (gopls)", times, found, notes)
    path = root / UTIL
    path.write_text(path.read_text().replace(*FORMAT))
    pattern = r"^(?:vet: )?(\S+\.go):\d+:\d+: not enough arguments in call to analysisutil\.Format"
    vet = ["go", "vet", "-gcflags=-e", "./go/analysis/passes/..."]
    cold = checker_seconds(vet, root, pattern, "stderr")
    cli = [checker_seconds(vet, root, pattern, "stderr") for _ in range(cli_rounds)]
    path.write_text(path.read_text().replace(FORMAT[1], FORMAT[0]))
    c = statistics.median(t for t, _, _ in cli)
    print(
        f"   go vet over the packages that can import it, median of {cli_rounds}: {c:6.1f} s, first {cold[0]:.1f} s "
        f"(errors (files): {cli[0][1]} ({cli[0][2]})); ratio {statistics.median(times) / c:.2f} (target <= 10 s)"
    )
    print(f"   gopls peak memory: {mem} MB")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5, help="breaking writes (each followed by its revert)")
    parser.add_argument("--cli-rounds", type=int, default=5)
    parser.add_argument("--only", choices=["ts", "go"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        if args.only in (None, "ts"):
            await typescript(args.rounds, args.cli_rounds, Path(tmp))
        if args.only in (None, "go"):
            await go(args.rounds, args.cli_rounds, Path(tmp))


if __name__ == "__main__":
    asyncio.run(main())
