"""A preview's cost against the write's own diagnostics wait on the same change, on click with basedpyright.

Run: uv run python benchmarks/preview_bench.py [--rounds N]

click 8.5.1 (the tests' pinned sdist), one run, the server warm (its first analysis over). N times: a dry run
of `write` of src/click/utils.py with echo's `message` losing its default (two callers break in files never
opened), end to end (overlay, the round, the delta, the overlays put back; its answer does not wait for the
server's round after the putting back, which holds the servers in the background); that putting back alone
(from the preview's answer until the servers are free again); then the same change written with `write`
(its diagnostics: the baseline and the round after the write), and the revert (not counted). Medians of N,
and the ratio preview / write. Target: <= 1.2x.
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

UTILS = "src/click/utils.py"


async def bench(rounds: int) -> None:
    root = Path(shutil.copytree(real_projects.click_pristine(), Path(tempfile.mkdtemp()) / "click"))
    text = (root / UTILS).read_text()
    broken = text.replace("    message: object = None,", "    message: object,")
    async with tether.open_run(root, plugins=[tether.files], options={"diagnostics_timeout": 90}) as run:
        sup = run.resource(tether_lsp_supervisor)
        r = await run.call("lsp", {"action": "symbols", "file": UTILS})
        assert not r.is_error, r.plain
        (conn,) = sup.connections.values()
        while conn.first_end is None:  # the first analysis of click over
            await conn.next_event(1.0)
        previews, backs, writes = [], [], []
        for i in range(rounds):
            t = time.monotonic()
            p = await run.call("write", {"path": UTILS, "content": broken, "dry_run": True})
            previews.append(time.monotonic() - t)
            t = time.monotonic()
            await sup.putting_back
            backs.append(time.monotonic() - t)
            t = time.monotonic()
            w = await run.call("write", {"path": UTILS, "content": broken})
            writes.append(time.monotonic() - t)
            shown = {(d["file"], d["line"]) for d in p.data["preview"]["introduced"]}
            wrote = {(d["file"], d["line"]) for d in w.data["diagnostics"]}
            print(
                f"round {i + 1}: preview {previews[-1]:.2f} s (put back {backs[-1]:.2f} s), write {writes[-1]:.2f} s; "
                f"previewed {len(shown)}, written {len(wrote)}, same: {shown == wrote}"
            )
            await run.call("write", {"path": UTILS, "content": text})
    pm, bm, wm = statistics.median(previews), statistics.median(backs), statistics.median(writes)
    print(f"{'click, echo loses a default':32} {'median s':>9}")
    print(f"{'preview end to end':32} {pm:9.2f}")
    print(f"{'  putting back alone':32} {bm:9.2f}")
    print(f"{'write (its diagnostics wait)':32} {wm:9.2f}")
    print(f"{'ratio preview / write':32} {pm / wm:9.2f}x (target <= 1.2x)")
    print(f"{'ratio (preview + put back) / write':32} {(pm + bm) / wm:9.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(bench(parser.parse_args().rounds))


if __name__ == "__main__":
    main()
