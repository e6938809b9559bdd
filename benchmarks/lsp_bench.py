"""lsp family benchmark: tether's `lsp` against a raw pygls client, on the same basedpyright.

Run: uv run python benchmarks/lsp_bench.py [--rounds N]

1. Per-request overhead on a warm server: `run.call("lsp", ...)` against the same request sent
   straight through the pygls client of the very same server process (target: <= 2 ms median).
2. Diagnostics on write: time an edit takes with diagnostics, minus the same edit with the lsp family
   blocked, against the server's own publish latency after a didChange (target: added <= latency + 150 ms).
3. Cold start to the first answer: a fresh run's first `lsp definition` against a raw pygls client
   that starts basedpyright, initializes, opens the file and asks (target: <= +10 %).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import tether
import tether.files
from tether.procs import kill_tree

UTIL = 'def greet(name: str) -> str:\n    """Say hello."""\n    return "hi " + name\n\n\nclass Greeter:\n    def hello(self) -> str:\n        return greet("x")\n'
MAIN = 'from pkg import util as u\nfrom pkg.util import greet\n\ngreeting = greet("a")\nvalue: int = u.greet("d")\n'


def project(base: Path) -> Path:
    root = base / "proj"
    files = {
        "pyproject.toml": '[project]\nname = "bench"\nversion = "0"\n\n[tool.basedpyright]\ntypeCheckingMode = "standard"\n',
        "pkg/__init__.py": "",
        "pkg/util.py": UTIL,
        "pkg/main.py": MAIN,
    }
    for i in range(20):  # some bulk so the server has a workspace to index
        files[f"pkg/mod{i}.py"] = f"from pkg.util import greet\n\n\ndef f{i}(x: str) -> str:\n    return greet(x) * {i}\n"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def med(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


async def per_request(root: Path, rounds: int) -> None:
    from lsprotocol import types as lsp

    queries = {
        "definition": ({"action": "definition", "file": "pkg/main.py", "line": 5, "symbol": "greet"}, "textDocument/definition",
                       lambda ident, pos: lsp.DefinitionParams(text_document=ident, position=pos)),
        "references": ({"action": "references", "file": "pkg/util.py", "line": 1, "symbol": "greet"}, "textDocument/references",
                       lambda ident, pos: lsp.ReferenceParams(text_document=ident, position=pos, context=lsp.ReferenceContext(include_declaration=True))),
        "hover": ({"action": "hover", "file": "pkg/main.py", "line": 5, "symbol": "greet"}, "textDocument/hover",
                  lambda ident, pos: lsp.HoverParams(text_document=ident, position=pos)),
    }
    print("1. per-request overhead on a warm basedpyright (same server process for both)")
    async with tether.open_run(root) as run:
        for args, *_ in queries.values():  # warm: server started, files open, analysed
            r = await run.call("lsp", args)
            assert not r.is_error, r.plain
        (conn,) = run.resource("tether_lsp_supervisor").connections.values()
        protocol = conn.client.protocol
        for name, (args, method, make) in queries.items():
            path = root / args["file"]
            line = path.read_text().splitlines()[args["line"] - 1]
            ident = lsp.TextDocumentIdentifier(uri=path.as_uri())
            pos = lsp.Position(line=args["line"] - 1, character=line.index(args["symbol"]))
            raw, ours = [], []
            for _ in range(rounds):
                t0 = time.perf_counter()
                await protocol.send_request_async(method, make(ident, pos))
                raw.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                r = await run.call("lsp", args)
                ours.append(time.perf_counter() - t0)
                assert not r.is_error
            over = med(ours) - med(raw)
            print(f"   {name:<11} raw pygls {med(raw):7.2f} ms   tether lsp {med(ours):7.2f} ms   overhead {over:6.2f} ms"
                  f"   (target <= 2 ms: {over / 2:.2f}x of target)")


async def on_write(root: Path, rounds: int) -> None:
    print("2. diagnostics on write (edit of pkg/main.py adding / removing an error)")
    bad, good = 'value: int = u.greet("d")\n', 'value: int = len(u.greet("d"))\n'

    async def edits(run, n):
        times = []
        for i in range(n):
            old, new = (bad, good) if i % 2 == 0 else (good, bad)
            t0 = time.perf_counter()
            r = await run.call("edit", {"path": "pkg/main.py", "old_string": old, "new_string": new})
            times.append(time.perf_counter() - t0)
            assert not r.is_error, r.plain
        return times

    async with tether.open_run(root, plugins=[tether.files], block=["lsp"]) as run:
        plain = await edits(run, rounds)
    async with tether.open_run(root, plugins=[tether.files]) as run:
        await edits(run, 2)  # warm
        with_diags = await edits(run, rounds)
        # the server's own latency: didChange -> publishDiagnostics of that version, same server
        (conn,) = run.resource("tether_lsp_supervisor").connections.values()
        doc = conn.docs[(root / "pkg/main.py").as_uri()]
        latency = []
        for _ in range(rounds):
            text = doc.text.replace(bad, good) if bad in doc.text else doc.text.replace(good, bad)
            t0 = time.perf_counter()
            conn.set_text(doc, text, save=False)
            items = await conn.diagnostics(doc, 10.0, 10.0)
            latency.append(time.perf_counter() - t0)
            assert items is not None
    added = med(with_diags) - med(plain)
    target = med(latency) + 150
    print(f"   edit without lsp {med(plain):7.1f} ms   edit with diagnostics {med(with_diags):7.1f} ms   added {added:7.1f} ms")
    print(f"   server publish latency {med(latency):7.1f} ms   target: added <= {target:.1f} ms -> {added / target:.2f}x of target")


async def raw_cold(root: Path) -> float:
    from lsprotocol import types as lsp
    from pygls.lsp.client import LanguageClient

    binary = str(Path(sys.executable).parent / "basedpyright-langserver")
    t0 = time.perf_counter()
    client = LanguageClient("raw", "0")
    client.feature("workspace/configuration")(lambda p: [{"diagnosticMode": "workspace"} if (i.section or "").endswith("analysis") else None for i in p.items])
    for m in ("window/logMessage", "textDocument/publishDiagnostics", "window/workDoneProgress/create", "$/progress"):
        client.feature(m)(lambda p: None)
    await client.start_io(binary, "--stdio", cwd=str(root), start_new_session=True)
    drain = asyncio.create_task(client._server.stderr.read())
    try:
        await asyncio.wait_for(client.initialize_async(lsp.InitializeParams(
            process_id=None, root_uri=root.as_uri(), workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name="proj")],
            capabilities=lsp.ClientCapabilities(workspace=lsp.WorkspaceClientCapabilities(configuration=True)))), 60)
        client.initialized(lsp.InitializedParams())
        path = root / "pkg/main.py"
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=lsp.TextDocumentItem(
            uri=path.as_uri(), language_id="python", version=1, text=path.read_text())))
        result = await asyncio.wait_for(client.text_document_definition_async(lsp.DefinitionParams(
            text_document=lsp.TextDocumentIdentifier(uri=path.as_uri()), position=lsp.Position(line=4, character=15))), 60)
        elapsed = time.perf_counter() - t0
        assert result, "raw client got no definition"
        await asyncio.wait_for(client.shutdown_async(None), 10)
        client.exit(None)
        await asyncio.wait_for(client.stop(), 10)
    finally:
        # the anchor's server goes whatever happened (tether's own is killed by its run)
        await asyncio.to_thread(kill_tree, client._server.pid, 1.0)
        drain.cancel()
    return elapsed


async def tether_cold(root: Path) -> float:
    t0 = time.perf_counter()
    async with tether.open_run(root) as run:
        r = await run.call("lsp", {"action": "definition", "file": "pkg/main.py", "line": 5, "symbol": "greet"})
        elapsed = time.perf_counter() - t0
        assert not r.is_error and r.data["locations"], r.plain
    return elapsed


async def cold_start(root: Path, rounds: int) -> None:
    print("3. cold start to the first definition answer")
    raw, ours = [], []
    for _ in range(rounds):
        raw.append(await raw_cold(root))
        ours.append(await tether_cold(root))
    ratio = med(ours) / med(raw)
    print(f"   raw pygls {med(raw):7.1f} ms   tether {med(ours):7.1f} ms   ratio {ratio:.3f} (target <= 1.10)")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200, help="requests per query kind")
    parser.add_argument("--write-rounds", type=int, default=20)
    parser.add_argument("--cold-rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = project(Path(tmp))
        await per_request(root, args.rounds)
        await on_write(root, args.write_rounds)
        await cold_start(root, args.cold_rounds)


if __name__ == "__main__":
    asyncio.run(main())
