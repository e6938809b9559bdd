"""`tether serve` over stdio in both MCP revisions, driven by the official SDK's client: 2025-11-25
(the `initialize` handshake) and 2026-07-28 (`server/discover`, the capabilities in each request's
`_meta`); signals while the client keeps stdin open; lines the SDK cannot read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import asynccontextmanager

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from tether.procs import alive
from tether.testing import assert_no_traceback

TETHER = [sys.executable, "-m", "tether.cli"]
REVISIONS = {"legacy": "2025-11-25", "auto": "2026-07-28"}  # auto: the client probes server/discover


@asynccontextmanager
async def connect(root, mode, env=None, **client_kwargs):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tether.cli", "serve", "--root", str(root)],
        env=dict(os.environ, **(env or {})),
    )
    async with Client(params, mode=mode, **client_kwargs) as client:
        assert client.protocol_version == REVISIONS[mode]
        yield client


def wait_gone(pid, seconds=15.0):
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


@pytest.mark.parametrize("mode", REVISIONS)
async def test_listing_a_call_its_data_and_errors(tmp_path, mode, no_leftover_processes):
    (tmp_path / "hello.txt").write_text("hello\n")
    async with connect(tmp_path, mode) as client:
        assert client.server_info.name == "tether"
        tools = {t.name: t for t in (await client.list_tools()).tools}
        read, write = tools["read"].annotations, tools["write"].annotations
        assert (read.read_only_hint, read.open_world_hint) == (True, False)
        assert (write.read_only_hint, write.destructive_hint, write.open_world_hint) == (False, True, False)
        assert tools["read"].input_schema["required"] == ["path"]

        result = await client.call_tool("read", {"path": "hello.txt"})
        assert result.is_error is False and result.content[0].text == "     1\thello"
        # data is for programs, in _meta: clients that find structuredContent show the model that instead
        # of the content, and data is a summary (here without the file's lines)
        assert result.meta["tether/data"]["total_lines"] == 1 and result.structured_content is None

        bad = await client.call_tool("read", {"path": "../outside"})
        assert bad.is_error is True and "outside the root" in bad.content[0].text
        invalid = await client.call_tool("read", {"path": 3})
        assert invalid.is_error is True and "path: expected string, got integer 3" in invalid.content[0].text
        unknown = await client.call_tool("nope", {})
        assert unknown.is_error is True and "unknown tool 'nope'" in unknown.content[0].text


@pytest.mark.parametrize("mode", REVISIONS)
async def test_progress_annotations_by_tier_and_end_of_input_reaps_children(tmp_path, plugin_site, mode):
    progress = []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async with connect(tmp_path, mode, {"PROCFAM_ON": "1"}) as client:
        tools = {t.name: t.annotations for t in (await client.list_tools()).tools}
        # exec-tier tools run code: clients that auto-approve by annotation must not take them for safe
        assert (
            tools["proc_spawn"].read_only_hint,
            tools["proc_spawn"].destructive_hint,
            tools["proc_spawn"].open_world_hint,
        ) == (False, True, True)
        assert tools["proc_write"].destructive_hint is True and tools["proc_slow"].read_only_hint is True

        slow = await client.call_tool("proc_slow", {"steps": 3}, progress_callback=on_progress)
        assert slow.content[0].text == "done after 3 steps"
        pid = (await client.call_tool("proc_spawn", {})).meta["tether/data"]["pid"]
        assert alive(pid)
    assert [p[0] for p in progress] == [1, 2, 3] and progress[-1] == (3, 3, "step 3")
    assert wait_gone(pid), "end of input must close the run and kill the tree it started"


# -- signals while the client keeps stdin open (#18 item 8) ----------------------------------------


def raw_server(root, env=None):
    return subprocess.Popen(
        [*TETHER, "serve", "--root", str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **(env or {})),
    )


def exchange(proc, *messages):
    proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
    proc.stdin.flush()
    return [json.loads(proc.stdout.readline()) for m in messages if "id" in m]


HELLO = [
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_closes_the_run_reaps_every_child_and_exits(tmp_path, plugin_site, sig):
    proc = raw_server(tmp_path, {"PROCFAM_ON": "1"})
    try:
        exchange(proc, *HELLO)
        [spawned] = exchange(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "proc_spawn", "arguments": {}},
            },
        )
        pid = spawned["result"]["_meta"]["tether/data"]["pid"]
        assert alive(pid)
        proc.send_signal(sig)  # stdin stays open: the client is still there
        assert proc.wait(timeout=20) == 0, proc.stderr.read()
        assert wait_gone(pid), f"{signal.Signals(sig).name} left the run's process tree behind"
    finally:
        proc.kill()
        proc.wait()


# -- lines the SDK cannot read (#18 item 10) --------------------------------------------------------


def nested_call(request_id, depth):
    return (
        f'{{"jsonrpc": "2.0", "id": {request_id:d}, "method": "tools/call", "params": {{"name": "read", '
        f'"arguments": {{"path": "x", "deep": {"[" * depth}{"]" * depth}}}}}}}'
    )


def test_every_unreadable_line_gets_a_json_rpc_error(tmp_path, no_leftover_processes):
    proc = raw_server(tmp_path)
    try:
        exchange(proc, *HELLO)
        answers = {}
        for i, depth in enumerate([150, 200, 1000, 100_000], start=1):
            proc.stdin.write(nested_call(i, depth) + "\n")
            proc.stdin.flush()
            answer = json.loads(proc.stdout.readline())
            answers[answer["id"]] = answer
        # shallow enough for the parser: the tool refuses the argument; deeper: a parse error, to its caller
        assert (
            answers[1]["result"]["isError"] is True and "deep" in answers[1]["result"]["content"][0]["text"]
        )
        for i in (2, 3, 4):
            assert answers[i]["error"]["code"] == -32700
            assert "recursion limit exceeded" in answers[i]["error"]["message"]

        proc.stdin.write('{"id": 9, "oops\nnot json at all\n{"jsonrpc": "2.0", "no": "method"}\n')
        proc.stdin.flush()
        cut, garbage, shape = (json.loads(proc.stdout.readline()) for _ in range(3))
        assert cut["id"] == 9 and cut["error"]["code"] == -32700  # the id is still there: its caller hears
        assert garbage["id"] is None and garbage["error"]["code"] == -32700
        assert shape["id"] is None and shape["error"]["code"] == -32600

        [after] = exchange(proc, {"jsonrpc": "2.0", "id": 10, "method": "tools/list"})
        assert after["id"] == 10 and after["result"]["tools"], "the server goes on serving after them"
        proc.stdin.close()
        assert proc.wait(timeout=20) == 0
        assert_no_traceback(proc.stderr.read(), "the server's stderr")
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("mode", REVISIONS)
async def test_a_long_eval_cell_keeps_the_client_informed(tmp_path, mode, no_leftover_processes):
    """A tool that reports no progress of its own (an eval cell) still shows the client it is alive."""
    progress = []

    async def on_progress(done, total, message):
        progress.append((done, message))

    env = {"TETHER_PLUGINS": "eval", "TETHER_SERVE_HEARTBEAT": "0.2"}
    async with connect(tmp_path, mode, env) as client:
        cell = {
            "code": "import time\ntime.sleep(1.5)\n'slept'",
            "description": "Sleep a moment and say that it slept",
        }
        result = await client.call_tool("eval", cell, progress_callback=on_progress)
        assert result.is_error is False and "slept" in " ".join(b.text for b in result.content)
    assert progress and all(m.startswith("eval still running (") for _, m in progress)
    assert [d for d, _ in progress] == sorted(d for d, _ in progress)  # progress only ever grows
