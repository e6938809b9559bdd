"""The DAP wire layer: framing round trips, and the client's bounded waits and answered reverse requests.

The peer here is the other end of a socket pair speaking raw frames: what is under test is our
framing and bookkeeping, which no real adapter lets us drive into these corners on purpose.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tether_debug.dap import DapClient, DapClosed, DapTimeout, encode, read_message

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=10), json_values, max_size=5), min_size=1, max_size=4))
def test_frames_round_trip_back_to_back(messages):
    async def read_all():
        reader = _reader(b"".join(encode(m) for m in messages))
        out = []
        while (m := await read_message(reader)) is not None:
            out.append(m)
        return out

    assert asyncio.run(read_all()) == messages


async def test_extra_headers_and_non_ascii_bodies():
    body = json.dumps({"type": "event", "event": "output", "body": {"output": "héllo ✓\n"}}).encode()
    data = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
    message = await read_message(_reader(data))
    assert message["body"]["output"] == "héllo ✓\n"
    assert await read_message(_reader(b"")) is None


async def _pair():
    server_side: asyncio.Queue = asyncio.Queue()

    async def on_connect(reader, writer):
        await server_side.put((reader, writer))

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    peer_reader, peer_writer = await server_side.get()
    return server, (reader, writer), (peer_reader, peer_writer)


async def test_reverse_requests_are_answered_and_requests_time_out():
    server, (reader, writer), (peer_reader, peer_writer) = await _pair()
    client = DapClient(reader, writer, request_timeout=0.3)
    client.start()
    try:
        # the adapter asks something we do not support: it gets a refusal, not silence
        peer_writer.write(encode({"type": "request", "seq": 7, "command": "startDebugging", "arguments": {}}))
        answer = await asyncio.wait_for(read_message(peer_reader), 5)
        assert answer["type"] == "response" and answer["request_seq"] == 7 and answer["success"] is False
        assert "startDebugging" in answer["message"]

        # a request nobody answers is bounded
        with pytest.raises(DapTimeout, match=r"did not answer 'threads' within 0\.3 s"):
            await client.request("threads")

        # an event that arrives before anyone waits is not lost
        peer_writer.write(
            encode({"type": "event", "seq": 9, "event": "stopped", "body": {"reason": "pause"}})
        )
        await peer_writer.drain()
        hit = await client.wait_event(("stopped",), 0, 5)
        assert hit is not None and hit[1]["body"]["reason"] == "pause"
        assert await client.wait_event(("stopped",), hit[0] + 1, 0.2) is None

        # the peer going away fails what is pending and wakes waiters
        pending = client.send("stackTrace", {"threadId": 1})
        peer_writer.close()
        assert await client.wait_event(("terminated",), 0, 5) is None
        assert client.closed
        with pytest.raises(DapClosed, match="closed"):
            await client.wait(pending, "stackTrace", 5)
    finally:
        await client.close()
        server.close()
        await server.wait_closed()
