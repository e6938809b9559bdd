"""Benchmark of the debug family's output buffer (`tether_debug.output.OutputBuffer`) against a plain list.

    uv run python benchmarks/debug_output_bench.py [--rounds N]

Two feeds, each in one run beside the anchor (the least a buffer can do: append every chunk to a
list, join once at the read):
- an endless line: 400 chunks of 64 KB without a newline on stdout (a progress bar, a dump), then
  its newline, then one read;
- ordinary output: 20,000 lines of 80 characters in chunks of 10 lines, stdout and stderr alternating.
Medians of the time and of the peak memory while feeding (tracemalloc, in a pass of its own), the
ratio to the anchor and the time per MB fed. The anchor keeps everything and does nothing per line;
the buffer splits lines and keeps at most OUTPUT_KEEP characters of whole lines and LINE_KEEP of a
stream's unfinished line (before that bound, a 26 MB line held 26 MB and took 4.8 s: it was rebuilt
on every chunk). Targets: <= 5 ms a MB on both feeds (linear: the JSON of the adapter's output
events costs more than that to decode); peak memory on the endless line < 1 MB + 2 x LINE_KEEP.
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from collections.abc import Callable, Iterable

from tether_debug.output import LINE_KEEP, OutputBuffer


def endless() -> list[tuple[str, str]]:
    chunk = "x" * 65_536
    return [(chunk, "stdout")] * 400 + [("\n", "stdout")]


def ordinary() -> list[tuple[str, str]]:
    block = ("y" * 79 + "\n") * 10
    return [(block, "stdout" if i % 2 else "stderr") for i in range(2_000)]


def anchor(feed: Iterable[tuple[str, str]]) -> int:
    parts = []
    for text, _ in feed:
        parts.append(text)
    return len("".join(parts))


def buffered(feed: Iterable[tuple[str, str]]) -> int:
    out = OutputBuffer()
    for text, stream in feed:
        out.add(text, stream)
    return len(out.take()[0])


def measure(side: Callable[[list[tuple[str, str]]], int], feed: list[tuple[str, str]]) -> tuple[float, int]:
    """The time of one pass, and the peak memory of another (tracemalloc slows allocation down)."""
    started = time.perf_counter()
    side(feed)
    elapsed = time.perf_counter() - started
    tracemalloc.start()
    side(feed)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed, peak


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds
    for name, make in (("endless line", endless), ("ordinary", ordinary)):
        feed = make()
        times: dict[str, list[float]] = {"anchor": [], "tether": []}
        peaks: dict[str, list[int]] = {"anchor": [], "tether": []}
        for i in range(rounds):
            sides = [("anchor", anchor), ("tether", buffered)]
            for label, side in sides if i % 2 == 0 else sides[::-1]:  # alternate which goes first
                elapsed, peak = measure(side, feed)
                times[label].append(elapsed)
                peaks[label].append(peak)
        t = {k: statistics.median(v) for k, v in times.items()}
        m = {k: statistics.median(v) for k, v in peaks.items()}
        ratio = t["tether"] / t["anchor"]
        per_mb = t["tether"] * 1000 / (sum(len(text) for text, _ in feed) / 1e6)
        line = (
            f"{name:13} anchor {t['anchor'] * 1000:7.1f} ms {m['anchor'] / 1e6:6.1f} MB  "
            f"tether {t['tether'] * 1000:7.1f} ms {m['tether'] / 1e6:6.1f} MB  ratio {ratio:6.2f}  "
            f"{per_mb:5.2f} ms a MB, target <= 5: {'met' if per_mb <= 5 else 'NOT met'}"
        )
        if name == "endless line":
            bound = 1_000_000 + 2 * LINE_KEEP
            line += f"; memory < {bound / 1e6:.1f} MB: {'met' if m['tether'] < bound else 'NOT met'}"
        print(line)


if __name__ == "__main__":
    main()
