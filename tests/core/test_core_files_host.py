"""The file tools through the `tether` host, as the issue's campaign drove them: a FIFO under the root
must not freeze `tether call` or `tether serve`, and bad paths stay one-line errors over MCP."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

TETHER = [sys.executable, "-m", "tether.cli"]
ONLY_FILES = {"TETHER_PLUGINS": ""}  # the host's file tools alone: no family starts


def test_call_read_of_a_fifo_answers_at_once(tmp_path):
    os.mkfifo(tmp_path / "p")
    out = subprocess.run(
        [*TETHER, "call", "read", '{"path":"p"}', "--root", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **ONLY_FILES},
    )
    assert out.returncode == 1, out.stderr
    body = json.loads(out.stdout)
    assert body["is_error"] and body["data"]["error"] == "not_a_file"
    assert "'p' is a named pipe (FIFO), not a regular file" in body["content"][0]["text"]


async def test_serve_answers_every_request_with_a_fifo_and_bad_paths_under_the_root(tmp_path):
    os.mkfifo(tmp_path / "p")
    (tmp_path / "loop").symlink_to("loop")
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tether.cli", "serve", "--root", str(tmp_path)],
        env={**os.environ, **ONLY_FILES},
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        calls = [
            session.call_tool("read", {"path": "p"}),
            session.call_tool("edit", {"path": "p", "old_string": "a", "new_string": "b"}),
            session.call_tool("apply_patch", {"patch": "--- a/p\n+++ b/p\n@@ -1 +1 @@\n-a\n+b\n"}),
            session.call_tool("read", {"path": "loop/x"}),
            session.call_tool("write", {"path": "x" * 5000, "content": "x"}),
            session.call_tool("write", {"path": "ok.txt", "content": "fine\n"}),
        ]
        results = await asyncio.wait_for(asyncio.gather(*calls), 60)
    texts = [r.content[0].text for r in results]
    assert all(r.is_error for r in results[:5]) and not results[5].is_error, texts
    assert all("named pipe (FIFO)" in t for t in texts[:3]), texts
    assert "symlink loop" in texts[3] and "path is too long" in texts[4]
    assert all("\n" not in t and "fault of the tool" not in t for t in texts[:5]), texts
    assert (tmp_path / "ok.txt").read_text() == "fine\n"
