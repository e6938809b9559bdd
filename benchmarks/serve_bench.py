"""serve benchmarks: what `tether serve` adds to a tool call, beside the direct call, in one run.

    uv run python benchmarks/serve_bench.py [N]

1. A `read` call's round trip through `tether serve` with the official SDK client, over stdio and
   over Streamable HTTP (127.0.0.1), in both protocol revisions, against the same call made directly
   with `run.call` in process (the anchor). Medians and ratios to the anchor. Over HTTP also a plain
   HTTP client (httpx posting the JSON-RPC body with the revision's headers), which tells the SDK
   client's share from the server's, and the same server with the listening socket made as before
   (`socket.create_server`: asyncio leaves Nagle on for the connections it accepts).
   Then 20 HTTP clients (2026-07-28) calling `read` at once on one server: p50 and p95 of a call.
   And, over a raw socket (one write per request, Nagle off), the time from the response's headers
   to its body, old socket and new: the delayed-ACK wait itself, which a busy machine does not blur.
3. The idempotency check's cost per call of a keyed `write` (4 KiB of content): the key read from
   `_meta`, the fingerprint of the arguments, the look-up and the remembering, in a full memory.
4. `ask_user` answered at once by the client: through multi round-trip requests (2026-07-28: an
   InputRequiredResult, then the retry) against through `elicitation/create` (2025-11-25), both over
   stdio. Each is also shown against a plain `read` on the same connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
import mcp_types as types
import tether
import tether.files
from mcp import Client
from mcp.client.stdio import StdioServerParameters

READ = {"path": "hello.txt"}
QUESTION = {"question": "Which DB?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]}
ENV = dict(
    os.environ, TETHER_PLUGINS="askuser"
)  # the files tools and askuser only: no other family's start-up


def ms(ns: list[int]) -> float:
    return statistics.median(ns) / 1e6


async def timed(call, n: int) -> float:
    for _ in range(max(10, n // 10)):
        await call()
    got = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        await call()
        got.append(time.perf_counter_ns() - t0)
    return ms(got)


async def direct(root: str, n: int) -> float:
    async with tether.open_run(root, plugins=[tether.files], load_entry_points=False) as run:

        async def call():
            assert not (await run.call("read", READ)).is_error

        return await timed(call, n)


async def accept(context, params):
    return types.ElicitResult(action="accept", content={"choice": "SQLite"})


async def through(server, mode: str, n: int, tool: str = "read", args=READ) -> float:
    async with Client(server, mode=mode, elicitation_callback=accept) as client:

        async def call():
            assert not (await client.call_tool(tool, args)).is_error

        return await timed(call, n)


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
JSON_SSE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def rpc(request_id, method: str, params: dict | None = None) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})}


async def plain_http(url: str, revision: str, n: int) -> float:
    """The same `read` posted by httpx with the revision's headers: no SDK on the client's side."""
    async with httpx2.AsyncClient() as http:
        if revision == "2026-07-28":
            headers = {
                **JSON_SSE,
                "MCP-Protocol-Version": revision,
                "Mcp-Method": "tools/call",
                "Mcp-Name": "read",
            }
            body = rpc(1, "tools/call", {"name": "read", "arguments": READ, "_meta": MODERN_META})
        else:
            hello = {
                "protocolVersion": revision,
                "capabilities": {},
                "clientInfo": {"name": "plain", "version": "0"},
            }
            answer = await http.post(url, json=rpc(0, "initialize", hello), headers=JSON_SSE)
            headers = {
                **JSON_SSE,
                "MCP-Protocol-Version": revision,
                "Mcp-Session-Id": answer.headers["mcp-session-id"],
            }
            await http.post(
                url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
            )
            body = rpc(1, "tools/call", {"name": "read", "arguments": READ})

        async def call():
            answer = await http.post(url, json=body, headers=headers)
            assert answer.status_code == 200 and '"isError":false' in answer.text, answer.text

        return await timed(call, n)


async def crowd(url: str, clients: int, n: int) -> tuple[float, float]:
    """``clients`` SDK clients (2026-07-28) calling `read` at once on one server: p50 and p95 (ms)."""
    got: list[int] = []

    async def one() -> None:
        async with Client(url, mode="auto") as client:
            for _ in range(3):
                await client.call_tool("read", READ)
            for _ in range(n):
                t0 = time.perf_counter_ns()
                assert not (await client.call_tool("read", READ)).is_error
                got.append(time.perf_counter_ns() - t0)

    await asyncio.gather(*(one() for _ in range(clients)))
    cuts = statistics.quantiles(got, n=20)
    return cuts[9] / 1e6, cuts[18] / 1e6


# The server as it was before its listening socket named IPPROTO_TCP, for the "before" rows.
OLD_SOCKET = (
    "import socket, sys, tether.serve, tether.cli\n"
    "tether.serve._listen = lambda bind: socket.create_server(bind)\n"
    "sys.exit(tether.cli.main())"
)


@contextlib.contextmanager
def http_server(root: str, old_socket: bool = False):
    start = ["-c", OLD_SOCKET] if old_socket else ["-m", "tether.cli"]
    http = subprocess.Popen(
        [sys.executable, *start, "serve", "--root", root, "--http", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        yield re.search(r"at (http://\S+/mcp)", http.stderr.readline()).group(1)
    finally:
        http.send_signal(signal.SIGTERM)
        http.wait(30)
        http.stderr.close()


def headers_to_body(url: str, n: int) -> float:
    """Median ms between the arrival of a 2026-07-28 `read` response's headers and of its body."""
    found = re.match(r"http://([^:/]+):(\d+)(/\S*)", url)
    assert found
    host, port, path = found.group(1), int(found.group(2)), found.group(3)
    body = json.dumps(
        rpc(1, "tools/call", {"name": "read", "arguments": READ, "_meta": MODERN_META})
    ).encode()
    head = {**JSON_SSE, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "read"}
    lines = "".join(f"{k}: {v}\r\n" for k, v in head.items())
    request = f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{lines}Content-Length: {len(body)}\r\n\r\n"
    gaps = []
    with socket.create_connection((host, port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(n + 5):
            sock.sendall(request.encode() + body)
            got, seen_head = b"", None
            while True:
                got += sock.recv(65536)
                if seen_head is None and b"\r\n\r\n" in got:
                    seen_head = time.perf_counter_ns()
                if seen_head is not None:
                    top, rest = got.split(b"\r\n\r\n", 1)
                    length = re.search(rb"content-length: (\d+)", top, re.I)
                    assert length, top
                    if len(rest) >= int(length.group(1)):
                        break
            if i >= 5:
                gaps.append(time.perf_counter_ns() - seen_head)
    return ms(gaps)


def idempotency_cost(n: int) -> float:
    from tether.serve import IDEMPOTENCY_MAX, _Call, _fingerprint, _idempotency_key, _Keyed, _Replays

    replays = _Replays()
    call = _Call(None, "write")
    for i in range(IDEMPOTENCY_MAX):  # full: every call also forgets the oldest
        keyed = _Keyed("x", call)
        replays.add(f"old-{i}", keyed)
        replays.finished(f"old-{i}", keyed)
    arguments = {"path": "src/module.py", "content": "x = 1\n" * 700}
    got = []
    for i in range(n):
        params = types.CallToolRequestParams(
            name="write", arguments=arguments, _meta={"tether/idempotency_key": f"key-{i}"}
        )
        t0 = time.perf_counter_ns()
        key = _idempotency_key(params)
        assert key is not None
        fingerprint = _fingerprint("write", arguments)
        assert replays.get(key) is None
        keyed = _Keyed(fingerprint, call)
        replays.add(key, keyed)
        replays.finished(key, keyed)
        got.append(time.perf_counter_ns() - t0)
    return ms(got)


def stdio(root: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "tether.cli", "serve", "--root", root], env=ENV
    )


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        (Path(root) / "hello.txt").write_text("hello\n")
        anchor = await direct(root, n)
        rows = [("direct run.call (anchor)", anchor)]
        for mode, revision in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
            rows.append((f"stdio {revision}", await through(stdio(root), mode, n)))
        with http_server(root) as url:
            for mode, revision in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
                rows.append((f"HTTP {revision}", await through(url, mode, n)))
                rows.append((f"HTTP {revision}, plain httpx", await plain_http(url, revision, n)))
            p50, p95 = await crowd(url, 20, max(10, n // 2))
            gap_after = headers_to_body(url, n)
        with http_server(root, old_socket=True) as url:
            for mode, revision in (("legacy", "2025-11-25"), ("auto", "2026-07-28")):
                rows.append((f"HTTP {revision}, before", await through(url, mode, n)))
                rows.append((f"HTTP {revision}, plain, before", await plain_http(url, revision, n)))
            gap_before = headers_to_body(url, n)
        print(f"1. read round trip, median of {n} (ms; ratio to the anchor)")
        for name, t in rows:
            print(f"   {name:<36} {t:8.3f}   x{t / anchor:7.1f}")
        times = dict(rows)
        print(
            f"   HTTP 2026-07-28 / HTTP 2025-11-25: x{times['HTTP 2026-07-28'] / times['HTTP 2025-11-25']:.2f}"
            f" (before: x{times['HTTP 2026-07-28, before'] / times['HTTP 2025-11-25, before']:.2f})"
        )
        print(
            f"   a 2026-07-28 response's headers to its body (raw socket): {gap_after:.3f}"
            f" (before: {gap_before:.3f})"
        )
        print(f"   20 HTTP clients (2026-07-28) at once on one server, a read: p50 {p50:.3f}, p95 {p95:.3f}")

        print(f"3. idempotency check per keyed call, median of {n * 10} (ms): {idempotency_cost(n * 10):.4f}")

        asks = {}
        for mode, how in (("legacy", "elicitation/create"), ("auto", "MRTR (InputRequiredResult + retry)")):
            plain = await through(stdio(root), mode, n)
            asked = await through(stdio(root), mode, n, "ask_user", QUESTION)
            asks[mode] = (how, asked, plain)
        print(f"4. ask_user answered at once, over stdio, median of {n} (ms)")
        for how, asked, plain in asks.values():
            print(
                f"   {how:<36} {asked:8.3f}   (a plain read on the same server: {plain:.3f}; x{asked / plain:.1f})"
            )
        print(f"   MRTR / elicitation/create: x{asks['auto'][1] / asks['legacy'][1]:.2f}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))
