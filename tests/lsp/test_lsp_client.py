"""pygls' LanguageClient over a server process tether starts and owns (tether_lsp.client)."""

from __future__ import annotations

import os
import signal
import time

import pytest
import tether
from tether_lsp.hookspecs import tether_lsp_supervisor


async def test_a_server_killed_while_a_request_waits_ends_the_request_at_once(py_root, no_leftover_processes):
    # tether starts the process itself and connects pygls to its pipes: a request waits for its answer
    # or the process's exit, never for its whole timeout
    import asyncio

    from tether_lsp.connection import ServerDied

    async with tether.open_run(py_root) as run:
        r = await run.call("lsp", {"action": "hover", "file": "pkg/util.py", "line": 1, "symbol": "greet"})
        assert not r.is_error, r.plain
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        doc = next(iter(conn.docs.values()))
        params = conn.lsp.HoverParams(
            text_document=conn.lsp.TextDocumentIdentifier(uri=doc.uri),
            position=conn.lsp.Position(line=0, character=4),
        )
        os.killpg(conn.pid, signal.SIGSTOP)  # it will not answer
        waiting = asyncio.ensure_future(conn.request("textDocument/hover", params, 60))
        await asyncio.sleep(0)  # the request is sent
        t0 = time.monotonic()
        os.killpg(conn.pid, signal.SIGKILL)
        with pytest.raises(ServerDied):
            await asyncio.wait_for(waiting, 30)
        assert time.monotonic() - t0 < 10
        r = await run.call("lsp", {"action": "hover", "file": "pkg/util.py", "line": 1, "symbol": "greet"})
        assert not r.is_error and "def greet" in r.plain, r.plain  # restarted
