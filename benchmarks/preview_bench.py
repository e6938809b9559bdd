"""A preview's cost against the write's own diagnostics wait on the same change, on click and pflag.

Run: uv run python benchmarks/preview_bench.py [--rounds N]

click 8.5.1 (the tests' pinned sdist) with basedpyright and spf13/pflag (Debian's sources) with gopls, one
run each, the server warm (a write and its revert first, not counted). N times, the same change each time
(click: src/click/utils.py's echo loses its `message` default, two callers break in files never opened;
pflag: getFlagType takes one more parameter, 36 calls in 35 other files break):
- a dry run of `write`, end to end (overlay, the round, the delta; the overlays stay in place for the write
  that may make them true), then discarded: the putting back alone (the overlays put back and the server's
  round after it, which the next use of the servers waits for);
- a dry run again, then the write of the same contents (the accepted change: the preview's overlays are
  committed, the write answers the preview's round);
- the write alone, no preview before it (its diagnostics: the baseline and the round after the write).
Each write is reverted after (not counted). Medians of N, and the ratios to the write alone. Target: a
preview <= 1.2x the write; the accepted change (preview + its write) is reported beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import tether
import tether.files

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import real_projects  # pyright: ignore[reportMissingImports] - tests/ is put on sys.path just above
from tether_lsp.hookspecs import tether_lsp_supervisor

try:
    from tether_lsp.preview import discard_kept
except ImportError:  # an older tree (PYTHONPATH=its sources): a preview is put back at once, nothing kept
    discard_kept = None


def click_root() -> Path:
    return Path(shutil.copytree(real_projects.click_pristine(), Path(tempfile.mkdtemp()) / "click"))


def pflag_root() -> Path:
    return real_projects.pflag_copy(Path(tempfile.mkdtemp()) / "pflag")


# (a fresh copy, the file, the text replaced, its replacement, what it breaks)
PROJECTS = {
    "click": (
        click_root,
        "src/click/utils.py",
        "    message: object = None,",
        "    message: object,",
        "echo loses a default",
    ),
    "pflag": (
        pflag_root,
        "flag.go",
        "func (f *FlagSet) getFlagType(name string, ftype string, convFunc",
        "func (f *FlagSet) getFlagType(name string, ftype string, extra int, convFunc",
        "getFlagType takes one more",
    ),
}


async def bench(project: str, rounds: int) -> None:
    make, rel, old, new, what = PROJECTS[project]
    root = make()
    text = (root / rel).read_text()
    broken = text.replace(old, new)
    assert broken != text
    async with tether.open_run(root, plugins=[tether.files], options={"diagnostics_timeout": 90}) as run:
        sup = run.resource(tether_lsp_supervisor)
        r = await run.call("lsp", {"action": "symbols", "file": rel})
        assert not r.is_error, r.plain
        (conn,) = sup.connections.values()
        while conn.first_end is None and conn.server.id == "basedpyright":  # click's first analysis over
            await conn.next_event(1.0)
        for _ in range(2):  # warm: a write and its revert, not counted
            await run.call("write", {"path": rel, "content": broken})
            await run.call("write", {"path": rel, "content": text})
        previews, backs, accepted, writes = [], [], [], []
        for i in range(rounds):
            t = time.monotonic()
            p = await run.call("write", {"path": rel, "content": broken, "dry_run": True})
            previews.append(time.monotonic() - t)
            t = time.monotonic()
            if discard_kept is not None:
                discard_kept(sup)  # what any other use of the servers does first
            if sup.putting_back is not None:
                await sup.putting_back
            backs.append(time.monotonic() - t)
            await run.call("write", {"path": rel, "content": broken, "dry_run": True})
            t = time.monotonic()
            a = await run.call("write", {"path": rel, "content": broken})
            accepted.append(time.monotonic() - t)
            await run.call("write", {"path": rel, "content": text})
            t = time.monotonic()
            w = await run.call("write", {"path": rel, "content": broken})
            writes.append(time.monotonic() - t)
            await run.call("write", {"path": rel, "content": text})
            shown = {(d["file"], d["line"]) for d in p.data["preview"]["introduced"]}
            after = {(d["file"], d["line"]) for d in a.data["diagnostics"]}
            wrote = {(d["file"], d["line"]) for d in w.data["diagnostics"]}
            print(
                f"{project} round {i + 1}: preview {previews[-1]:.2f} s (put back {backs[-1]:.2f} s), its write "
                f"{accepted[-1]:.2f} s, write alone {writes[-1]:.2f} s; previewed {len(shown)}, written {len(wrote)}, "
                f"same: {shown == after == wrote}"
            )
    pm, bm, am, wm = (statistics.median(x) for x in (previews, backs, accepted, writes))
    print(f"{project + ', ' + what:40} {'median s':>9}")
    print(f"{'preview end to end':40} {pm:9.2f}")
    print(f"{'  putting back alone (discarded)':40} {bm:9.2f}")
    print(f"{'  the write after it (accepted)':40} {am:9.3f}")
    print(f"{'write alone (its diagnostics wait)':40} {wm:9.2f}")
    print(f"{'ratio preview / write':40} {pm / wm:9.2f}x (target <= 1.2x)")
    print(f"{'ratio (preview + its write) / write':40} {(pm + am) / wm:9.2f}x")
    print(f"{'ratio (preview + put back) / write':40} {(pm + bm) / wm:9.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--project", choices=[*PROJECTS, "all"], default="all")
    args = parser.parse_args()
    for project in PROJECTS if args.project == "all" else [args.project]:
        asyncio.run(bench(project, args.rounds))


if __name__ == "__main__":
    main()
