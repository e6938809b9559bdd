"""lsp family benchmark: tether's `lsp` against a raw pygls client, on the same basedpyright.

Run: uv run python benchmarks/lsp_bench.py [--rounds N]

1. Per-request overhead on a warm server: `run.call("lsp", ...)` against the same request sent
   straight through the pygls client of the very same server process (target: <= 2 ms median).
2. Diagnostics on write, on click 8.5.1 (the PyPI sdist): the time an `edit` of src/click/utils.py
   takes with its diagnostics, against basedpyright's own complete republish measured with a raw
   pygls client on another copy: didChange until the work-done round begun after it has ended
   (target: ratio <= 1.2).
3. Cold start to the first COMPLETE `references` of `echo` on click: a fresh run against a raw pygls
   client that starts basedpyright, opens the file, waits for its first round and asks (target: <= 1.1).
4. Diagnostics on write, TypeScript, on rxjs 7.8.2's sources (npm): an `edit` of
   src/internal/operators/map.ts (broken / fixed in turn) with its diagnostics, against a raw pygls client
   of typescript-language-server: didChange until the server's publish of the new state of that file
   (the raw client knows which list to wait for; tether also asks tsserver for the 42 files importing it,
   which the server never checks).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import tether
import tether.files
from raw_lsp import initialize, med
from tether.procs import kill_tree

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import real_projects  # pyright: ignore[reportMissingImports] - tests/ is put on sys.path just above
from tether_lsp.hookspecs import tether_lsp_supervisor

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
        files[f"pkg/mod{i}.py"] = (
            f"from pkg.util import greet\n\n\ndef f{i}(x: str) -> str:\n    return greet(x) * {i}\n"
        )
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def server_process(client) -> asyncio.subprocess.Process:
    """The process pygls started for ``client`` (None only before start_io)."""
    if client._server is None:
        raise RuntimeError("the language server was not started")
    return client._server


async def per_request(root: Path, rounds: int) -> None:
    from lsprotocol import types as lsp

    queries = {
        "definition": (
            {"action": "definition", "file": "pkg/main.py", "line": 5, "symbol": "greet"},
            "textDocument/definition",
            lambda ident, pos: lsp.DefinitionParams(text_document=ident, position=pos),
        ),
        "references": (
            {"action": "references", "file": "pkg/util.py", "line": 1, "symbol": "greet"},
            "textDocument/references",
            lambda ident, pos: lsp.ReferenceParams(
                text_document=ident, position=pos, context=lsp.ReferenceContext(include_declaration=True)
            ),
        ),
        "hover": (
            {"action": "hover", "file": "pkg/main.py", "line": 5, "symbol": "greet"},
            "textDocument/hover",
            lambda ident, pos: lsp.HoverParams(text_document=ident, position=pos),
        ),
    }
    print("1. per-request overhead on a warm basedpyright (same server process for both)")
    async with tether.open_run(root) as run:
        for args, *_ in queries.values():  # warm: server started, files open, analysed
            r = await run.call("lsp", args)
            assert not r.is_error, r.plain
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
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
            print(
                f"   {name:<11} raw pygls {med(raw):7.2f} ms   tether lsp {med(ours):7.2f} ms   overhead {over:6.2f} ms"
                f"   (target <= 2 ms: {over / 2:.2f}x of target)"
            )


def click_project(base: Path) -> Path:
    """A copy of click 8.5.1's sdist from PyPI (the tests' pinned, checked, cached download)."""
    import shutil

    return Path(shutil.copytree(real_projects.click_pristine(), base / "click-8.5.1"))


class Raw:
    """basedpyright driven straight through pygls, no tether: the anchor of sections 2 and 3."""

    def __init__(self, root: Path) -> None:
        from pygls.lsp.client import LanguageClient

        self.root = root
        self.client = LanguageClient("raw", "0")
        self.begins = 0
        self.active: set[str] = set()
        self.published: dict[str, list] = {}
        self.changed = asyncio.Event()
        c = self.client
        settings = {
            "basedpyright": {"analysis": {"diagnosticMode": "workspace"}},
            "basedpyright.analysis": {"diagnosticMode": "workspace"},
        }
        c.feature("workspace/configuration")(lambda p: [settings.get(i.section or "") for i in p.items])
        c.feature("window/workDoneProgress/create")(lambda p: None)
        c.feature("window/logMessage")(lambda p: None)
        c.feature("textDocument/publishDiagnostics")(lambda p: self._publish(p))
        c.feature("$/progress")(lambda p: self._progress(p))

    def _publish(self, p) -> None:
        self.published[p.uri] = list(p.diagnostics)

    def _progress(self, p) -> None:
        kind = p.value.get("kind") if isinstance(p.value, dict) else getattr(p.value, "kind", None)
        if kind == "begin":
            self.begins += 1
            self.active.add(str(p.token))
        elif kind == "end":
            self.active.discard(str(p.token))
            self.changed.set()

    async def round_after(self, begins: int, timeout: float = 120) -> None:
        """Until a work-done round begun after ``begins`` has ended: basedpyright's complete republish."""
        deadline = time.monotonic() + timeout
        while self.begins <= begins or self.active:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), deadline - time.monotonic())

    async def start(self) -> None:
        from lsprotocol import types as lsp

        binary = str(Path(sys.executable).parent / "basedpyright-langserver")
        await self.client.start_io(binary, "--stdio", cwd=str(self.root), start_new_session=True)
        stderr = server_process(self.client).stderr
        if stderr is None:
            raise RuntimeError("basedpyright-langserver was started without a stderr pipe")
        self.drain = asyncio.create_task(stderr.read())
        caps = lsp.ClientCapabilities(
            workspace=lsp.WorkspaceClientCapabilities(configuration=True),
            window=lsp.WindowClientCapabilities(work_done_progress=True),
        )
        await initialize(self.client, self.root, caps)

    def open(self, rel: str) -> str:
        from lsprotocol import types as lsp

        path = self.root / rel
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(
                    uri=path.as_uri(), language_id="python", version=1, text=path.read_text()
                )
            )
        )
        return path.as_uri()

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 10)
            self.client.exit(None)
            await asyncio.wait_for(self.client.stop(), 10)
        finally:  # the anchor's server goes whatever happened (tether's own is killed by its run)
            await asyncio.to_thread(kill_tree, server_process(self.client).pid, 1.0)
            self.drain.cancel()


MAKE_STR = (
    "    return str(value)\n\n\ndef _make_default",
    "    return len(str(value))\n\n\ndef _make_default",
)


async def on_write(base: Path, rounds: int) -> None:
    from lsprotocol import types as lsp

    print("2. diagnostics on write, click 8.5.1: make_str in src/click/utils.py broken / fixed in turn")
    raw_root, our_root = click_project(base / "raw"), click_project(base / "ours")
    raw = Raw(raw_root)
    await raw.start()
    times_raw = []
    try:
        uri = raw.open("src/click/utils.py")
        await raw.round_after(0)
        text = (raw_root / "src/click/utils.py").read_text()
        for i in range(rounds):
            text = text.replace(*MAKE_STR) if i % 2 == 0 else text.replace(MAKE_STR[1], MAKE_STR[0])
            begins = raw.begins
            t0 = time.perf_counter()
            raw.client.text_document_did_change(
                lsp.DidChangeTextDocumentParams(
                    text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=i + 2),
                    content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
                )
            )
            await raw.round_after(begins)
            times_raw.append(time.perf_counter() - t0)
            broken = any(str(d.code) == "reportReturnType" for d in raw.published[uri])
            assert broken == (i % 2 == 0), "the raw client's complete round has the wrong diagnostics"
    finally:
        await raw.stop()
    times_ours = []
    async with tether.open_run(our_root, plugins=[tether.files]) as run:
        r = await run.call(
            "lsp", {"action": "diagnostics", "file": "src/click/utils.py"}
        )  # warm: started, analysed
        assert not r.is_error, r.plain
        for i in range(rounds):
            old, new = MAKE_STR if i % 2 == 0 else MAKE_STR[::-1]
            t0 = time.perf_counter()
            r = await run.call("edit", {"path": "src/click/utils.py", "old_string": old, "new_string": new})
            times_ours.append(time.perf_counter() - t0)
            assert ("reportReturnType" in r.plain) == (i % 2 == 0), r.plain
    ratio = med(times_ours) / med(times_raw)
    print(
        f"   raw client: didChange -> basedpyright's complete round {med(times_raw):7.1f} ms   "
        f"tether edit with its diagnostics {med(times_ours):7.1f} ms   ratio {ratio:.3f} (target <= 1.20)"
    )


async def raw_cold(root: Path) -> tuple[float, int]:
    from lsprotocol import types as lsp

    t0 = time.perf_counter()
    raw = Raw(root)
    try:
        await raw.start()
        uri = raw.open("src/click/utils.py")
        await raw.round_after(0)
        result = await asyncio.wait_for(
            raw.client.text_document_references_async(
                lsp.ReferenceParams(
                    text_document=lsp.TextDocumentIdentifier(uri=uri),
                    position=lsp.Position(line=239, character=4),
                    context=lsp.ReferenceContext(include_declaration=True),
                )
            ),
            60,
        )
        return time.perf_counter() - t0, len(result or [])
    finally:
        await raw.stop()


async def tether_cold(root: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    async with tether.open_run(root) as run:
        r = await run.call(
            "lsp", {"action": "references", "file": "src/click/utils.py", "line": 240, "symbol": "echo"}
        )
        elapsed = time.perf_counter() - t0
        assert not r.is_error, r.plain
        return elapsed, (r.data or {})["total"]


async def cold_start(base: Path, rounds: int) -> None:
    print("3. cold start to the first complete references of echo (click 8.5.1, src/click/utils.py:240)")
    root = click_project(base / "cold")
    raw, ours = [], []
    n_raw = n_ours = 0
    for _ in range(rounds):
        t, n_raw = await raw_cold(root)
        raw.append(t)
        t, n_ours = await tether_cold(root)
        ours.append(t)
        assert n_ours >= n_raw, f"tether answered {n_ours} references, the raw client {n_raw}"
    ratio = med(ours) / med(raw)
    print(
        f"   raw pygls {med(raw):7.1f} ms   tether {med(ours):7.1f} ms   ratio {ratio:.3f} (target <= 1.10)"
        f"   ({n_raw} references raw, {n_ours} tether)"
    )


def rxjs_project(base: Path) -> Path:
    """rxjs 7.8.2's src/ and tsconfig.json from the npm tarball (the tests' pinned, checked, cached download)."""
    import shutil

    return real_projects.rxjs_copy(real_projects.rxjs_pristine(shutil.which("npm") or "npm"), base / "rxjs")


TS_BREAK = (
    "  return operate((source, subscriber) => {\n    // The index",
    "  return operate((source, subscriber) => {\n    const count: number = project;\n    // The index",
)
NODE_BIN = Path(__file__).resolve().parents[1] / "node_modules" / ".bin"


async def ts_on_write(base: Path, rounds: int) -> None:
    import os

    from lsprotocol import types as lsp
    from pygls.lsp.client import LanguageClient
    from tether_lsp.dependents import importers

    print(
        "4. diagnostics on write, rxjs 7.8.2: a TS2322 in src/internal/operators/map.ts added / removed in turn"
    )
    os.environ["PATH"] = f"{NODE_BIN}{os.pathsep}{os.environ['PATH']}"
    raw_root, our_root = rxjs_project(base / "ts-raw"), rxjs_project(base / "ts-ours")
    client = LanguageClient("raw", "0")
    published: dict[str, list] = {}
    changed = asyncio.Event()

    def publish(p) -> None:
        published[p.uri] = list(p.diagnostics)
        changed.set()

    client.feature("textDocument/publishDiagnostics")(publish)
    client.feature("window/workDoneProgress/create")(lambda p: None)
    client.feature("workspace/configuration")(lambda p: [None for _ in p.items])
    for method in ("window/logMessage", "$/progress", "$/typescriptVersion"):
        client.feature(method)(lambda p: None)

    async def until(uri: str, broken: bool) -> None:
        while uri not in published or any(str(d.code) == "2322" for d in published[uri]) != broken:
            changed.clear()
            await asyncio.wait_for(changed.wait(), 120)

    await client.start_io(
        str(NODE_BIN / "typescript-language-server"), "--stdio", cwd=str(raw_root), start_new_session=True
    )
    times_raw = []
    try:
        caps = lsp.ClientCapabilities(  # without publishDiagnostics the server publishes nothing
            window=lsp.WindowClientCapabilities(work_done_progress=True),
            text_document=lsp.TextDocumentClientCapabilities(
                publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities()
            ),
        )
        await initialize(client, raw_root, caps)
        path = raw_root / "src/internal/operators/map.ts"
        uri, text = path.as_uri(), path.read_text()
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(uri=uri, language_id="typescript", version=1, text=text)
            )
        )
        await until(uri, False)
        for i in range(rounds):
            text = text.replace(*TS_BREAK) if i % 2 == 0 else text.replace(TS_BREAK[1], TS_BREAK[0])
            t0 = time.perf_counter()
            client.text_document_did_change(
                lsp.DidChangeTextDocumentParams(
                    text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=i + 2),
                    content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
                )
            )
            await until(uri, i % 2 == 0)
            times_raw.append(time.perf_counter() - t0)
    finally:
        await asyncio.to_thread(kill_tree, server_process(client).pid, 1.0)
    times_ours = []
    async with tether.open_run(our_root, plugins=[tether.files]) as run:
        r = await run.call("lsp", {"action": "diagnostics", "file": "src/internal/operators/map.ts"})
        assert not r.is_error, r.plain
        for i in range(rounds):
            old, new = TS_BREAK if i % 2 == 0 else TS_BREAK[::-1]
            t0 = time.perf_counter()
            r = await run.call(
                "edit", {"path": "src/internal/operators/map.ts", "old_string": old, "new_string": new}
            )
            times_ours.append(time.perf_counter() - t0)
            assert ("[2322]" in r.plain) == (i % 2 == 0), r.plain
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        found, _ = await importers(conn, [our_root / "src/internal/operators/map.ts"], 60)
    ratio = med(times_ours) / med(times_raw)
    print(
        f"   raw client: didChange -> the server's publish of the new state {med(times_raw):7.1f} ms   "
        f"tether edit with its diagnostics {med(times_ours):7.1f} ms   ratio {ratio:.3f}\n"
        f"   (tether also asks tsserver for the {len(found)} files importing map.ts, which the server "
        "itself never checks: they are not open)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200, help="requests per query kind")
    parser.add_argument("--write-rounds", type=int, default=10)
    parser.add_argument("--cold-rounds", type=int, default=3)
    parser.add_argument("--only", choices=["1", "2", "3", "4"], help="run one section")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "1"):
            await per_request(project(Path(tmp)), args.rounds)
        if args.only in (None, "2"):
            await on_write(Path(tmp), args.write_rounds)
        if args.only in (None, "3"):
            await cold_start(Path(tmp), args.cold_rounds)
        if args.only in (None, "4"):
            await ts_on_write(Path(tmp), args.write_rounds)


if __name__ == "__main__":
    asyncio.run(main())
