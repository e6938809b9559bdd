"""Diagnostics on write on a big project: Django 5.1.4's sdist (2,788 .py files), basedpyright.

Run: uv run python benchmarks/lsp_big_bench.py [--rounds N] [--cli-rounds N] [--workspace]

1. A breaking write: `edit` of django/utils/encoding.py adding a required keyword-only parameter to
   force_str (its callers break), then its revert, N times in one run (basedpyright in open-files mode,
   the default above lsp_open_files_above files); the median of the breaking writes, with the broken
   callers reported in other files, against the basedpyright CLI checking the same files (the written
   one and the importers the write checked) on the broken tree (target: <= 10 s).
2. The first `references` of force_str in a fresh run (target: <= 10 s, or said to be incomplete).
3. basedpyright's peak memory (VmHWM of its Node process) over sections 1 and 2 (target: <= 1 GB).
With --workspace: one breaking write in workspace mode (lsp_open_files_above 20000), as before.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tether
import tether.files

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import real_projects  # pyright: ignore[reportMissingImports] - tests/ is put on sys.path just above
from tether_lsp.hookspecs import tether_lsp_supervisor

FORCE_STR = (
    'def force_str(s, encoding="utf-8", strings_only=False, errors="strict"):',
    'def force_str(s, encoding="utf-8", strings_only=False, errors="strict", *, must):',
)
ENCODING = "django/utils/encoding.py"


def peak_mb(run) -> int:
    """The largest VmHWM (peak resident memory) among the processes of the run's basedpyright."""
    best = 0
    for conn in run.resource(tether_lsp_supervisor).connections.values():
        pgid = os.getpgid(conn.pid)
        for pid in os.listdir("/proc"):
            try:
                if pid.isdigit() and os.getpgid(int(pid)) == pgid:
                    status = Path(f"/proc/{pid}/status").read_text()
                    best = max(best, int(status.split("VmHWM:")[1].split()[0]) // 1024)
            except (OSError, IndexError, ValueError):
                continue
    return best


def broken_elsewhere(r) -> int:
    return sum(
        1
        for d in (r.data or {}).get("diagnostics", [])
        if d["severity"] == "error" and '"must"' in d["message"] and d["file"] != ENCODING
    )


def cli_seconds(root: Path, files: list[str]) -> tuple[float, int]:
    cli = Path(sys.executable).parent / "basedpyright"
    t0 = time.perf_counter()
    done = subprocess.run([str(cli), "--outputjson", *files], cwd=root, capture_output=True, text=True)
    spent = time.perf_counter() - t0
    errors = json.loads(done.stdout)["generalDiagnostics"]
    return spent, sum(1 for d in errors if '"must"' in d["message"] and not d["file"].endswith(ENCODING))


async def writes(
    root: Path, rounds: int, options: dict
) -> tuple[list[float], list[int], list[str], int, list[str]]:
    times, found, notes = [], [], []
    async with tether.open_run(root, plugins=[tether.files], options=options) as run:
        for _ in range(rounds):
            t0 = time.perf_counter()
            r = await run.call(
                "edit", {"path": ENCODING, "old_string": FORCE_STR[0], "new_string": FORCE_STR[1]}
            )
            times.append(time.perf_counter() - t0)
            found.append(broken_elsewhere(r))
            notes = [
                line
                for line in r.plain.splitlines()
                if "checked" in line or "incomplete" in line or "pending" in line
            ]
            r = await run.call(
                "edit", {"path": ENCODING, "old_string": FORCE_STR[1], "new_string": FORCE_STR[0]}
            )
            assert not r.is_error, r.plain
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        checked = sorted(run.relpath(d.path) for d in conn.docs.values())
        return times, found, checked, peak_mb(run), notes


async def references(root: Path) -> tuple[float, str, int]:
    async with tether.open_run(root, plugins=[tether.files]) as run:
        t0 = time.perf_counter()
        r = await run.call(
            "lsp", {"action": "references", "file": ENCODING, "line": 53, "symbol": "force_str"}
        )
        spent = time.perf_counter() - t0
        return (
            spent,
            r.plain.splitlines()[0]
            + (" [says incomplete]" if "incomplete" in r.plain or "analysing" in r.plain else ""),
            peak_mb(run),
        )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5, help="breaking writes (each followed by its revert)")
    parser.add_argument("--cli-rounds", type=int, default=5)
    parser.add_argument("--workspace", action="store_true", help="also one breaking write in workspace mode")
    args = parser.parse_args()
    pristine = real_projects.django_pristine()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        root = real_projects.django_copy(pristine, Path(tmp) / "django")
        print(f"Django 5.1.4, {sum(1 for _ in root.rglob('*.py'))} .py files; load {os.getloadavg()[0]:.1f}")
        times, found, checked, mem1, notes = await writes(root, args.rounds, {})
        print(
            f"1. breaking write of force_str (open-files mode), median of {args.rounds}: {statistics.median(times):6.1f} s "
            f"(each: {', '.join(f'{t:.1f}' for t in times)}); broken callers in other files: {found}"
        )
        for line in notes:
            print(f"   {line}")
        tree = root / ENCODING
        tree.write_text(tree.read_text().replace(*FORCE_STR))
        cli = [cli_seconds(root, checked) for _ in range(args.cli_rounds)]
        tree.write_text(tree.read_text().replace(FORCE_STR[1], FORCE_STR[0]))
        c = statistics.median(t for t, _ in cli)
        print(
            f"   basedpyright CLI over the same {len(checked)} files, median of {args.cli_rounds}: {c:6.1f} s "
            f"(broken callers in other files: {cli[0][1]}); ratio {statistics.median(times) / c:.2f} (target <= 10 s)"
        )
        spent, head, mem2 = await references(root)
        print(
            f"2. first references of force_str in a fresh run: {spent:6.1f} s: {head} (target <= 10 s or said)"
        )
        print(f"3. basedpyright peak memory: writes {mem1} MB, references {mem2} MB (target <= 1024 MB)")
        if args.workspace:
            times, found, _, mem, notes = await writes(root, 1, {"lsp_open_files_above": 20000})
            print(
                f"   workspace mode (before), one breaking write: {times[0]:6.1f} s; broken callers: {found}; peak {mem} MB"
            )
            for line in notes:
                print(f"   {line}")


if __name__ == "__main__":
    asyncio.run(main())
