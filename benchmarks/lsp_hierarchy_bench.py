"""lsp family benchmark: `callers` against the raw call-hierarchy requests, and the readiness check per call.

Run: uv run python benchmarks/lsp_hierarchy_bench.py [--rounds N]

callers: `lsp` action callers of `FlagSet.VarP` on spf13/pflag (gopls, 141 callers, 50 shown) and of
`cJSON_AddItemToObject` on cJSON (clangd, 4 callers), against `textDocument/prepareCallHierarchy` +
`callHierarchy/incomingCalls` sent on the same server process (tether's own connection, so both sides
ask one warm server), and against the same call reusing nothing of the call before (its server's binary
looked for on PATH and every folder of the tree listed again, as before tether reused them); rounds
rotate which side goes first. Target: tether <= 1.1x raw + 2 ms.

readiness: `readiness.record` (the server's state when asked) plus `readiness.notes` (the lines of the
answer), per call, on a live ready connection and on one reporting progress. Target: <= 0.2 ms.
pflag comes from Debian's golang-github-spf13-pflag-dev, cJSON from Debian's source package.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import tether
from raw_lsp import med
from tether_lsp import readiness

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import real_projects  # pyright: ignore[reportMissingImports] - tests/ is put on sys.path just above
from tether_lsp.hookspecs import tether_lsp_supervisor


def cjson_root(base: Path) -> Path:
    archive = real_projects.debian_source("cjson", "cjson_1.7.15.orig.tar.gz", real_projects.CJSON_SHA256)
    root = Path(shutil.copytree(real_projects.unpacked(archive, "cJSON-1.7.15"), base / "cjson"))
    commands = [
        {"directory": str(root), "file": str(root / n), "arguments": ["cc", "-std=c89", f"-I{root}", "-c", n]}
        for n in ("cJSON.c", "cJSON_Utils.c")
    ]
    (root / "compile_commands.json").write_text(json.dumps(commands))
    return root


async def raw_callers(conn: Any, path: Path, line: int, char: int) -> int:
    lsp = conn.lsp
    params = lsp.CallHierarchyPrepareParams(
        text_document=lsp.TextDocumentIdentifier(uri=path.as_uri()), position=lsp.Position(line, char)
    )
    items = await conn.request("textDocument/prepareCallHierarchy", params, 60)
    calls = await conn.request(
        "callHierarchy/incomingCalls", lsp.CallHierarchyIncomingCallsParams(item=items[0]), 60
    )
    return len(calls)


async def callers_rows(name: str, root: Path, ask: dict[str, Any], server: str, rounds: int) -> None:
    async with tether.open_run(root) as run:
        r = await run.call("lsp", ask)  # starts the server, opens the file
        sup = run.resource(tether_lsp_supervisor)
        (conn,) = [c for c in sup.connections.values() if c.server.id == server]
        assert await readiness.wait_ready(conn, 300) is None
        r = await run.call("lsp", ask)
        data = r.data or {}
        assert not r.is_error and data["ready"], r.plain
        path = root / ask["file"]
        text = path.read_text().splitlines()[ask["line"] - 1]
        char = text.index(ask["symbol"])
        total = await raw_callers(conn, path, ask["line"] - 1, char)
        assert total == data["total"], (total, r.plain)
        times: dict[str, list[float]] = {"raw": [], "tether": [], "reusing nothing": []}
        sides = list(times)
        for n in range(rounds):
            for side in sides[n % 3 :] + sides[: n % 3]:  # each side goes first in a third of the rounds
                found = dict(sup._found)
                if side == "reusing nothing":
                    # as before the reuse: the binary looked for on PATH and every folder listed again
                    sup._found.clear()
                    conn.watcher._listings = {}
                t0 = time.perf_counter()
                if side == "raw":
                    await raw_callers(conn, path, ask["line"] - 1, char)
                else:
                    await run.call("lsp", ask)
                times[side].append(time.perf_counter() - t0)
                sup._found.update(found)
        a, b, c = (med(times[side]) for side in sides)
        target = "holds" if b <= 1.1 * a + 2.0 else "DOES NOT hold"
        print(
            f"  callers {name} ({total} callers): raw {a:7.2f} ms   tether {b:7.2f} ms   ratio {b / a:.3f}   "
            f"extra {b - a:+.2f} ms   (target <= 1.1x + 2 ms: {target})\n"
            f"    the same tether reusing nothing (binary looked up, every folder listed): {c:7.2f} ms   "
            f"extra {c - a:+.2f} ms"
        )


async def readiness_rows(root: Path, iterations: int) -> None:
    async with tether.open_run(root) as run:
        await run.call("lsp", {"action": "hover", "file": "flag.go", "line": 843, "symbol": "VarP"})
        sup = run.resource(tether_lsp_supervisor)
        (conn,) = sup.connections.values()
        assert await readiness.wait_ready(conn, 300) is None

        def per_call() -> float:
            t0 = time.perf_counter()
            for _ in range(iterations):
                token = readiness.ASKED.set({})
                readiness.record(conn)
                readiness.notes()
                readiness.ASKED.reset(token)
            return (time.perf_counter() - t0) / iterations * 1000

        ready = min(per_call() for _ in range(5))
        conn.progress_titles["bench"] = ("Loading packages", time.monotonic())
        conn.progress_tokens.add("bench")
        busy = min(per_call() for _ in range(5))
        conn.progress_tokens.discard("bench")
        conn.progress_titles.pop("bench")
        for state, ms in (("ready", ready), ("in progress", busy)):
            target = "holds" if ms <= 0.2 else "DOES NOT hold"
            print(
                f"  readiness check, server {state}: {ms * 1000:6.2f} us per call   (target <= 0.2 ms: {target})"
            )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        pflag = real_projects.pflag_copy(base / "pflag")
        cjson = cjson_root(base)
        print(
            f"callers against raw prepareCallHierarchy + incomingCalls on the same server ({args.rounds} rounds each)"
        )
        await callers_rows(
            "FlagSet.VarP on pflag, gopls",
            pflag,
            {"action": "callers", "file": "flag.go", "line": 843, "symbol": "VarP"},
            "gopls",
            args.rounds,
        )
        await callers_rows(
            "cJSON_AddItemToObject on cJSON, clangd",
            cjson,
            {"action": "callers", "file": "cJSON.c", "line": 2044, "symbol": "cJSON_AddItemToObject"},
            "clangd",
            args.rounds,
        )
        print("readiness check per call (record + notes; best of 5 runs of 10000)")
        await readiness_rows(pflag, 10000)


if __name__ == "__main__":
    asyncio.run(main())
