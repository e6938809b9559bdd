"""`tether serve`: one process = one run, over the Model Context Protocol's stdio transport.

Built on the official MCP SDK's low-level server (imported only here: the SDK is heavy). The run opens
on the first request after `initialize`, when the client's capabilities are known: a client that
declared `elicitation` gets `run.options["elicit"]`, which the askuser family turns into a question
port. End of stdin ends the run, and closing the run reaps every child process.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import signal
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from tether.run import Run
from tether.tools import Image, Tier, ToolResult

log = logging.getLogger("tether.serve")

_current: contextvars.ContextVar[Any] = contextvars.ContextVar("tether_mcp_request")


def _mcp_tool(tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=tool.tier is Tier.READ,
            destructive_hint=tool.tier is Tier.WRITE,
        ),
    )


def _mcp_result(result: ToolResult) -> types.CallToolResult:
    blocks: list[Any] = []
    for b in result.content:
        if isinstance(b, Image):
            blocks.append(types.ImageContent(type="image", data=b.to_json()["data"], mime_type=b.mime_type))
        else:
            blocks.append(types.TextContent(type="text", text=b.text))
    return types.CallToolResult(content=blocks, structured_content=result.data or None, is_error=result.is_error)


class _Host:
    def __init__(self, run_kwargs: dict[str, Any]) -> None:
        self.run_kwargs = run_kwargs
        self.run: Run | None = None
        self._lock = asyncio.Lock()

    async def ensure_run(self, ctx) -> Run:
        async with self._lock:
            if self.run is None:
                options = dict(self.run_kwargs.pop("options", {}))
                caps = ctx.session.client_capabilities
                if caps is not None and getattr(caps, "elicitation", None) is not None:
                    options["elicit"] = _elicit
                run = Run(options=options, **self.run_kwargs)
                await run._open()
                self.run = run
            return self.run

    async def list_tools(self, ctx, params) -> types.ListToolsResult:
        run = await self.ensure_run(ctx)
        return types.ListToolsResult(tools=[_mcp_tool(t) for t in run.tools()])

    async def call_tool(self, ctx, params) -> types.CallToolResult:
        run = await self.ensure_run(ctx)
        token = _current.set(ctx)
        try:

            async def progress(done: float, total: float | None, message: str | None) -> None:
                await ctx.session.report_progress(done, total, message)

            result = await run.call(params.name, dict(params.arguments or {}), progress=progress)
        finally:
            _current.reset(token)
        return _mcp_result(result)


async def _elicit(message: str, requested_schema: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """Ask the connected client's human, through the request that is being served."""
    ctx = _current.get(None)
    if ctx is None:
        raise RuntimeError("no MCP request is being served, so there is no client to ask")
    answer = await ctx.session.elicit_form(message, requested_schema, related_request_id=ctx.request_id)
    return answer.action, answer.content


async def _serve(run_kwargs: dict[str, Any]) -> None:
    host = _Host(run_kwargs)
    from importlib.metadata import version

    server = Server(
        "tether",
        version=version("tether-core"),
        instructions="Run-bound tools for coding agents: each tool is bound to a live resource of this run.",
        on_list_tools=host.list_tools,
        on_call_tool=host.call_tool,
    )
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, main.cancel)  # type: ignore[union-attr]
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    except asyncio.CancelledError:
        pass
    finally:
        if host.run is not None:
            with anyio.CancelScope(shield=True):
                await host.run.aclose()


def serve(**run_kwargs: Any) -> int:
    asyncio.run(_serve(run_kwargs))
    return 0
