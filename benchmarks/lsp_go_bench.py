"""lsp family benchmark, Go: diagnostics on write with gopls on spf13/pflag, against a raw pygls client.

Run: uv run python benchmarks/lsp_go_bench.py [--rounds N]

The write changes `getFlagType`'s signature in flag.go (36 broken calls in 35 other files) and back,
in turn. The anchor is a raw pygls client of gopls on another copy: didChange + didSave until
gopls's round is complete, i.e. flag.go's own publish at the new version (gopls publishes the broken
dependents first and the changed document last; on a loaded machine a few can come after it, so the
anchor also waits until exactly the expected 35 files, or none, have errors: it knows the answer).
After each side's round it waits, untimed, until that side's gopls published nothing for 0.3 s,
so gopls's later passes do not fall on the next round (before, only the raw side had this pause, and
tether's rounds that came right after its own were slower: "tether first" 1.35 against "raw first"
1.01). Against it, tether's `edit` with its diagnostics on a warm run, which waits for the end of
gopls's round as gopls shows it (work-done progress; target: ratio <= 1.2). Both are started and loaded first; then each round runs both
sides, which one first alternating every two rounds (so breaks and restores each get both orders):
on a busy machine the load drifts, and a fixed order lets that drift fall on one side.
pflag comes from Debian's golang-github-spf13-pflag-dev.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psutil
import tether
import tether.files
from raw_lsp import initialize, med
from tether.procs import kill_tree

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import real_projects  # pyright: ignore[reportMissingImports] - tests/ is put on sys.path just above
from tether_lsp.hookspecs import tether_lsp_supervisor

SIGNATURE = (
    "func (f *FlagSet) getFlagType(name string, ftype string, convFunc",
    "func (f *FlagSet) getFlagType(name string, ftype string, extra int, convFunc",
)


class Raw:
    """gopls driven straight through pygls, no tether."""

    def __init__(self, root: Path) -> None:
        from pygls.lsp.client import LanguageClient

        self.root = root
        self.client = LanguageClient("raw", "0")
        self.published: dict[str, tuple[int | None, list]] = {}
        self.seq: dict[str, int] = {}  # publishes per uri
        self.changed = asyncio.Event()
        c = self.client
        c.feature("workspace/configuration")(lambda p: [None for _ in p.items])
        c.feature("window/workDoneProgress/create")(lambda p: None)
        c.feature("client/registerCapability")(lambda p: None)
        c.feature("window/logMessage")(lambda p: None)
        c.feature("$/progress")(lambda p: None)
        c.feature("textDocument/publishDiagnostics")(lambda p: self._publish(p))

    def _publish(self, p) -> None:
        self.published[p.uri] = (p.version, list(p.diagnostics))
        self.seq[p.uri] = self.seq.get(p.uri, 0) + 1
        self.changed.set()

    async def published_at(self, uri: str, version: int, seq: int, timeout: float = 60) -> None:
        """Until ``uri`` was published again after its ``seq``-th publish, at ``version`` or later."""
        deadline = time.monotonic() + timeout
        while self.seq.get(uri, 0) <= seq or (self.published[uri][0] or version) < version:
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), deadline - time.monotonic())

    async def broken(self, expected: int, timeout: float = 60) -> None:
        """Until exactly ``expected`` files have errors (the anchor knows the answer; tether must find it)."""
        deadline = time.monotonic() + timeout
        while (n := sum(any(d.severity == 1 for d in ds) for _, ds in self.published.values())) != expected:
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), deadline - time.monotonic())
            except TimeoutError:
                raise AssertionError(f"the raw client saw {n} broken files, not {expected}") from None

    async def quiet(self, seconds: float) -> None:
        """Until nothing was published for ``seconds``."""
        while True:
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), seconds)
            except TimeoutError:
                return

    async def start(self) -> None:
        from lsprotocol import types as lsp

        me = psutil.Process()
        before = {p.pid for p in me.children()}
        # gopls logs to a file, not to the stderr pipe pygls opens and never reads
        gopls = shutil.which("gopls") or "gopls"
        await self.client.start_io(
            gopls, f"-logfile={os.devnull}", "serve", cwd=str(self.root), start_new_session=True
        )
        started = [p.pid for p in me.children() if p.pid not in before]
        assert len(started) == 1, f"pygls started {len(started)} processes"
        self.pid = started[0]
        caps = lsp.ClientCapabilities(
            workspace=lsp.WorkspaceClientCapabilities(configuration=True),
            window=lsp.WindowClientCapabilities(work_done_progress=True),
            text_document=lsp.TextDocumentClientCapabilities(
                publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(version_support=True)
            ),
        )
        await initialize(self.client, self.root, caps)

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 10)
            self.client.exit(None)
            await asyncio.wait_for(self.client.stop(), 10)
        finally:
            await asyncio.to_thread(kill_tree, self.pid, 1.0)


async def on_write(base: Path, rounds: int) -> None:
    from lsprotocol import types as lsp

    print("diagnostics on write, pflag: getFlagType's signature in flag.go changed / restored in turn")
    raw_root, our_root = (
        real_projects.pflag_copy(base / "raw" / "pflag"),
        real_projects.pflag_copy(base / "ours" / "pflag"),
    )
    raw = Raw(raw_root)
    await raw.start()
    times_raw, times_ours = [], []
    try:
        path = raw_root / "flag.go"
        uri, text = path.as_uri(), path.read_text()
        raw.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(uri=uri, language_id="go", version=1, text=text)
            )
        )
        await raw.published_at(uri, 1, 0)
        await raw.quiet(2.0)  # gopls's first diagnosis comes in passes (the test variant later)
        async with tether.open_run(our_root, plugins=[tether.files]) as run:
            r = await run.call("lsp", {"action": "diagnostics", "file": "flag.go"})  # warm: started, loaded
            assert not r.is_error, r.plain
            (conn,) = run.resource(tether_lsp_supervisor).connections.values()

            async def raw_round(i: int) -> None:
                nonlocal text
                text = text.replace(*SIGNATURE) if i % 2 == 0 else text.replace(SIGNATURE[1], SIGNATURE[0])
                path.write_text(text)
                seq = raw.seq[uri]
                t0 = time.perf_counter()
                ident = lsp.VersionedTextDocumentIdentifier(uri=uri, version=i + 2)
                raw.client.text_document_did_change(
                    lsp.DidChangeTextDocumentParams(
                        text_document=ident,
                        content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
                    )
                )
                raw.client.text_document_did_save(
                    lsp.DidSaveTextDocumentParams(
                        text_document=lsp.TextDocumentIdentifier(uri=uri), text=text
                    )
                )
                await raw.published_at(uri, i + 2, seq)
                await raw.broken(35 if i % 2 == 0 else 0)
                times_raw.append(time.perf_counter() - t0)
                # untimed: gopls's tail of the round (later passes) must not fall on tether's next round
                await raw.quiet(0.3)

            async def tether_round(i: int) -> None:
                old, new = SIGNATURE if i % 2 == 0 else SIGNATURE[::-1]
                t0 = time.perf_counter()
                r = await run.call("edit", {"path": "flag.go", "old_string": old, "new_string": new})
                times_ours.append(time.perf_counter() - t0)
                errors = sum(d["severity"] == "error" for d in (r.data or {}).get("diagnostics", []))
                assert errors == (36 if i % 2 == 0 else 0), r.plain
                # untimed, as after the raw round: its gopls's tail must not fall on its own next round
                while (left := conn.last_event + 0.3 - time.monotonic()) > 0:
                    await asyncio.sleep(left)

            for i in range(rounds):
                first, second = (raw_round, tether_round) if (i // 2) % 2 == 0 else (tether_round, raw_round)
                await first(i)
                await second(i)
    finally:
        await raw.stop()
    ratio = med(times_ours) / med(times_raw)
    print(
        f"   raw client: didChange -> its full answer published {med(times_raw):7.1f} ms   "
        f"tether edit with its diagnostics {med(times_ours):7.1f} ms   ratio {ratio:.3f} (target <= 1.20)"
    )
    for name, order in (("raw client first", 0), ("tether first", 1)):
        picked = [i for i in range(rounds) if (i // 2) % 2 == order]
        if picked:
            ours, theirs = med([times_ours[i] for i in picked]), med([times_raw[i] for i in picked])
            print(f"     {name}: raw {theirs:7.1f} ms   tether {ours:7.1f} ms   ratio {ours / theirs:.3f}")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20, help="writes per side (break, restore, ...)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        await on_write(Path(tmp), args.rounds)


if __name__ == "__main__":
    asyncio.run(main())
