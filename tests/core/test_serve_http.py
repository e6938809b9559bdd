"""`tether serve --http`: MCP's Streamable HTTP through the SDK, driven by the SDK's own HTTP client, in
both revisions; the bearer token; SIGTERM reaping every child."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from serve_support import http_server
from tether.procs import alive
from tether.serve import _listen

REVISIONS = {"legacy": "2025-11-25", "auto": "2026-07-28"}
TOKEN = "s3cret-token-for-tests-0123456789"


def client(url, mode, token=None, **kwargs):
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return Client(
        streamable_http_client(url, http_client=create_mcp_http_client(headers=headers)), mode=mode, **kwargs
    )


@pytest.mark.parametrize("mode", REVISIONS)
async def test_both_revisions_over_http_with_a_card_and_a_long_call(
    tmp_path, plugin_site, mode, no_leftover_processes
):
    (tmp_path / "hello.txt").write_text("hello\n")
    seen, progress = [], []

    async def human(context, params):
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "over http"})

    async def on_progress(done, total, message):
        progress.append(done)

    with http_server(tmp_path, PROCFAM_ON="1", TETHER_PLUGINS="procfam,askuser") as (_proc, url):
        async with client(url, mode, elicitation_callback=human) as c:
            assert c.protocol_version == REVISIONS[mode]
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"read", "ask_user", "proc_slow"} <= names
            read = await c.call_tool("read", {"path": "hello.txt"})
            assert read.is_error is False and read.meta["tether/data"]["total_lines"] == 1
            asked = await c.call_tool("ask_user", {"question": "Where?"})
            assert asked.meta["tether/data"]["text"] == "over http" and seen == ["Where?"]
            slow = await c.call_tool("proc_slow", {"steps": 5}, progress_callback=on_progress)
            assert slow.content[0].text == "done after 5 steps" and progress == [1, 2, 3, 4, 5]


def test_beyond_loopback_a_token_is_required(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TETHER_SERVE_TOKEN"}
    out = subprocess.run(
        [sys.executable, "-m", "tether.cli", "serve", "--root", str(tmp_path), "--http", "0.0.0.0:0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert (
        out.returncode == 2
        and "clients must send a bearer token" in out.stderr
        and "TETHER_SERVE_TOKEN" in out.stderr
    )
    short = subprocess.run(
        [sys.executable, "-m", "tether.cli", "serve", "--root", str(tmp_path), "--http", "0.0.0.0:0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(env, TETHER_SERVE_TOKEN="abc"),
        stdin=subprocess.DEVNULL,
    )
    assert short.returncode == 2 and "at least 16 characters" in short.stderr


@pytest.mark.parametrize("source", ["env", "file"])
async def test_a_request_without_the_right_token_is_refused_before_any_tool(
    tmp_path, source, no_leftover_processes
):
    env, args = {"TETHER_SERVE_TOKEN": TOKEN}, []
    if source == "file":
        env = {}
        (tmp_path / "token").write_text(TOKEN + "\n")
        args = ["--token-file", str(tmp_path / "token")]
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "write",
            "arguments": {"path": "pwned.txt", "content": "x"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "write",
    }
    with http_server(tmp_path, "0.0.0.0:0", *args, **env) as (_proc, url):
        async with httpx2.AsyncClient() as raw:
            for auth in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": TOKEN}):
                answer = await raw.post(url, content=json.dumps(call), headers={**headers, **auth})
                assert answer.status_code == 401, answer.text
                assert answer.headers["www-authenticate"].startswith("Bearer")
        assert not (tmp_path / "pwned.txt").exists()
        async with client(url, "auto", token=TOKEN) as c:
            wrote = await c.call_tool("write", {"path": "ok.txt", "content": "x"})
            assert wrote.is_error is False and (tmp_path / "ok.txt").read_text() == "x"
        with pytest.raises(ExceptionGroup) as refused:  # the SDK client fails to connect with the wrong token
            async with client(url, "legacy", token="wrong-token-0123456789") as c:
                await c.list_tools()
        assert refused.group_contains(MCPError)


async def test_sigterm_mid_call_closes_the_run_and_reaps_every_child(tmp_path, plugin_site):
    asked = asyncio.Event()

    async def never_answers(context, params):
        asked.set()
        await asyncio.sleep(3600)

    with http_server(tmp_path, PROCFAM_ON="1", TETHER_PLUGINS="procfam,askuser") as (proc, url):
        async with client(url, "legacy", elicitation_callback=never_answers) as c:
            pid = (await c.call_tool("proc_spawn", {})).meta["tether/data"]["pid"]
            assert alive(pid)
            waiting = asyncio.create_task(c.call_tool("ask_user", {"question": "Still there?"}))
            await asyncio.wait_for(asked.wait(), 20)  # a call is in flight, its card open
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(proc.wait, 20) == 0
            waiting.cancel()
    deadline = time.monotonic() + 15
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "SIGTERM left the run's process tree behind"


@pytest.mark.parametrize(
    "args, said",
    [
        (["--http", "8765"], "--http takes HOST:PORT"),
        (["--http", "127.0.0.1:99999"], "--http takes HOST:PORT"),
        (
            ["--http", "0.0.0.0:0", "--token-file", "no-such-file"],
            "--token-file 'no-such-file' cannot be read",
        ),
        (["--token-file", "token"], "--token-file is for --http HOST:PORT"),
    ],
)
def test_bad_serve_arguments_are_one_line_usage_errors(tmp_path, args, said):
    (tmp_path / "token").write_text(TOKEN)
    out = subprocess.run(
        [sys.executable, "-m", "tether.cli", "serve", "--root", str(tmp_path), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2 and said in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_a_token_in_the_environment_does_not_stop_stdio(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "tether.cli", "serve", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, TETHER_SERVE_TOKEN=TOKEN),
    )
    assert out.returncode == 0 and out.stderr == ""  # end of input at once: served nothing, closed cleanly


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
async def test_accepted_connections_send_without_waiting_for_the_acks_of_small_writes(host):
    """A response goes out as two writes (headers, then body): with Nagle on, the body waited for the
    client's delayed ACK of the headers, 40 ms a request."""
    if host == "::1" and not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def on_connect(reader, writer):
        accepted.set_result(
            writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        )
        writer.close()

    try:
        sock = _listen((host, 0))
    except OSError as exc:
        pytest.skip(f"cannot bind {host}: {exc}")
    server = await asyncio.start_server(on_connect, sock=sock)
    async with server:
        _reader, writer = await asyncio.open_connection(host, sock.getsockname()[1])
        assert await asyncio.wait_for(accepted, 20) == 1
        writer.close()
