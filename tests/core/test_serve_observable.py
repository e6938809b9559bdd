"""`tether serve` for harnesses that watch it: `/healthz` and `/readyz` over HTTP (the token beyond
loopback), tether's attributes on the span the MCP SDK opens for each call, and a tool list in a fixed
order that a 2026-07-28 client may keep."""

from __future__ import annotations

import httpx2
import pytest
import tether.files
from mcp import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from serve_support import http_server

TOKEN = "s3cret-token-for-tests-0123456789"


async def test_healthz_and_readyz_say_whether_the_run_is_open(tmp_path, no_leftover_processes):
    with http_server(tmp_path, "127.0.0.1:0", TETHER_PLUGINS="") as (_proc, url):
        base = url.removesuffix("/mcp")
        async with httpx2.AsyncClient() as http:
            assert (await http.get(f"{base}/healthz")).json() == {"ok": True}
            ready = await http.get(f"{base}/readyz")
            assert ready.status_code == 200
            assert ready.json() == {"ready": True, "run": "not open yet: it opens on the first MCP request"}
            async with Client(url, mode="auto") as c:
                await c.list_tools()
            opened = (await http.get(f"{base}/readyz")).json()
            assert opened["ready"] is True and opened["run"] == "open" and opened["unavailable"] == {}
            assert isinstance(opened["families"], list)


async def test_beyond_loopback_the_probes_take_the_token(tmp_path, no_leftover_processes):
    with http_server(tmp_path, "0.0.0.0:0", TETHER_PLUGINS="", TETHER_SERVE_TOKEN=TOKEN) as (_proc, url):
        base = url.removesuffix("/mcp")
        async with httpx2.AsyncClient() as http:
            for path in ("/healthz", "/readyz"):
                refused = await http.get(f"{base}{path}")
                assert refused.status_code == 401 and "bearer token" in refused.json()["error"]
                wrong = await http.get(
                    f"{base}{path}", headers={"Authorization": "Bearer wrong-token-0123456"}
                )
                assert wrong.status_code == 401
                ok = await http.get(f"{base}{path}", headers={"Authorization": f"Bearer {TOKEN}"})
                assert ok.status_code == 200, ok.text


@pytest.fixture(scope="module")
def spans():
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdks_span_of_a_call_carries_tethers_attributes(tmp_path, spans, mode):
    from tether.serve import _Host, _server

    spans.clear()
    (tmp_path / "a.txt").write_text("a\n")
    host = _Host({"root": tmp_path, "plugins": [tether.files], "load_entry_points": False})
    try:
        async with Client(_server(host), mode=mode) as c:
            await c.call_tool("read", {"path": "a.txt"})
            await c.call_tool("read", {"path": "missing.txt"})
            write = {"path": "b.txt", "content": "b\n"}
            for _ in range(2):
                await c.call_tool("write", write, meta={"tether/idempotency_key": "k1"})
    finally:
        await host.close()
    calls = [
        s
        for s in spans.get_finished_spans()
        if s.kind is SpanKind.SERVER and s.attributes.get("mcp.method.name") == "tools/call"
    ]
    seen = [
        {k: v for k, v in s.attributes.items() if k.startswith("tether.")} for s in calls
    ]  # one span a call: the SDK's, with tether's attributes on it
    assert [s["tether.tool"] for s in seen] == ["read", "read", "write", "write"]
    assert [s["tether.outcome"] for s in seen] == ["ok", "error", "ok", "ok"]
    assert [s["tether.replay"] for s in seen] == [False, False, False, True]
    assert [s["tether.tier"] for s in seen] == ["read", "read", "write", "write"]
    assert {s["tether.surface"] for s in seen} == {"full"}


async def test_the_tool_list_is_in_a_fixed_order_and_may_be_kept(tmp_path, no_leftover_processes):
    with http_server(tmp_path, "127.0.0.1:0", TETHER_PLUGINS="askuser") as (_proc, url):
        async with httpx2.AsyncClient() as http:
            meta = {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            }
            headers = {
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tools/list",
            }
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
            lists = [(await http.post(url, json=body, headers=headers)).json()["result"] for _ in range(2)]
    names = [t["name"] for t in lists[0]["tools"]]
    assert names == sorted(names) and lists[0]["tools"] == lists[1]["tools"]
    assert lists[0]["ttlMs"] > 0 and lists[0]["cacheScope"] == "private"


async def test_the_requests_a_call_makes_of_a_server_a_kernel_and_an_adapter_are_child_spans_of_it(
    tmp_path, spans
):
    from tether.serve import _Host, _server

    spans.clear()
    (tmp_path / "app.py").write_text("def twice(x):\n    return 2 * x\n\n\nprint(twice(21))\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0"\n')
    host = _Host({"root": tmp_path, "conversation_id": "c1"})
    try:
        async with Client(_server(host)) as c:
            for name, args in [
                ("lsp", {"action": "hover", "file": "app.py", "line": 1, "symbol": "twice"}),
                ("eval", {"code": "6 * 7", "description": "Multiply six by seven and show it"}),
                ("debug", {"action": "launch", "program": "app.py"}),
            ]:
                r = await c.call_tool(name, args)
                assert not r.is_error, (name, r.content)
    finally:
        await host.close()
    finished = spans.get_finished_spans()
    calls = {
        s.context.span_id: s
        for s in finished
        if s.kind is SpanKind.SERVER and s.attributes.get("mcp.method.name") == "tools/call"
    }
    by_id = {s.context.span_id: s for s in finished}

    def call_of(s):  # the tools/call span above a span, through any spans between them
        while s.parent is not None and s.parent.span_id not in calls:
            s = by_id[s.parent.span_id]
        return calls[s.parent.span_id].attributes["tether.tool"] if s.parent is not None else None

    children = [s for s in finished if s.kind is SpanKind.CLIENT and s.instrumentation_scope.name == "tether"]
    under = {(call_of(s), s.name) for s in children}
    assert ("lsp", "lsp textDocument/hover") in under, under
    assert ("eval", "kernel execute") in under, under
    assert ("debug", "dap launch") in under, under
    (cell,) = [s for s in children if s.name == "kernel execute" and not s.attributes["tether.silent"]]
    assert cell.attributes["tether.kernel"] == "python" and cell.attributes["tether.cell_status"] == "ok"
    hover = next(s for s in children if s.name == "lsp textDocument/hover")
    assert hover.attributes["tether.server"] == "basedpyright"
    # every child span belongs to a call: a family's own requests outside a call open no traces
    assert all(call_of(s) is not None for s in children), [s.name for s in children if call_of(s) is None]
