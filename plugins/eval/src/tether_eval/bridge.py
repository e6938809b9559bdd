"""Tool calls from a cell (`tools.x(...)`, `tool(name, args)`): what the cell is offered, and how its calls run.

The kernel side (kernel_side/) sends a batch of calls as one input_request on the kernel's stdin channel;
`answer_calls` dispatches them through the run exactly like the model's own calls, at once where `Overlap`
allows, and answers them in their order.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from tether import Image, Tier, Tool

if TYPE_CHECKING:
    import asyncio

    from tether.run import CallContext, Run

MAX_CALLS_AT_ONCE = 32  # calls of one batch from a cell that run at the same time (the rest wait their turn)
MAX_NAMES_SHOWN = 10  # tools named in the cell's answer line (then "and N more")


def catalog(run: Run) -> str:
    """The tools a cell's `tools` object offers: the run's surface, without `eval` (JSON)."""
    entries = [
        {"name": t.name, "tier": t.tier.value, "description": t.description, "schema": t.input_schema}
        for t in run.tools()
        if t.name != "eval"
    ]
    return json.dumps(entries)


class Overlap:
    """Which calls of a cell may run at the same time, enforced in the run.

    Read-tier calls overlap freely. A write whose files are known (the tool's ``touches``) overlaps with
    reads and with writes of other files, never with a write of one of its files. Any other call (an
    exec-tier tool, a write that does not say its files) runs alone among the writes.
    """

    def __init__(self) -> None:
        self._files: dict[str, asyncio.Lock] = {}
        self._condition: asyncio.Condition | None = None  # made on first use: a listing needs no asyncio
        self._shared = 0
        self._alone = False

    @property
    def _gate(self) -> asyncio.Condition:
        if self._condition is None:
            import asyncio

            self._condition = asyncio.Condition()
        return self._condition

    @contextlib.asynccontextmanager
    async def hold(self, run: Run, name: str, arguments: dict[str, Any]) -> AsyncIterator[None]:
        import asyncio

        tool = next((t for t in run.tools() if t.name == name), None)
        if tool is None or tool.tier == Tier.READ:
            yield
            return
        files = _files(run, tool, arguments)
        async with self._gate:
            if files is None:
                await self._gate.wait_for(lambda: not self._alone and not self._shared)
                self._alone = True
            else:
                await self._gate.wait_for(lambda: not self._alone)
                self._shared += 1
        try:
            async with contextlib.AsyncExitStack() as stack:
                for path in sorted(files or ()):  # in one order: two writes of the same files cannot deadlock
                    await stack.enter_async_context(self._files.setdefault(path, asyncio.Lock()))
                yield
        finally:
            async with self._gate:
                if files is None:
                    self._alone = False
                else:
                    self._shared -= 1
                self._gate.notify_all()


def _files(run: Run, tool: Tool, arguments: dict[str, Any]) -> list[str] | None:
    """The files a write will touch, or None when it does not say (then it runs alone)."""
    if tool.touches is None:
        return None
    from tether.args import structure_arguments

    try:
        args = structure_arguments(tool.args, arguments)
        return [run.relpath(run.resolve_path(p)) for p in tool.touches(args)]
    except Exception:  # noqa: BLE001 - the call itself says what is wrong with its arguments
        return []


def calls_line(names: list[str]) -> str:
    """The cell's answer lists the tool calls it made: how many, and of which tools (bounded)."""
    counts = collections.Counter(names)
    shown = [f"{n} x{c}" if c > 1 else n for n, c in counts.most_common(MAX_NAMES_SHOWN)]
    more = len(counts) - len(shown)
    tail = f" and {more} more tool(s)" if more > 0 else ""
    return f"[{len(names)} tool call(s) from the cell: {', '.join(shown)}{tail}]"


async def answer_calls(ctx: CallContext, payload: str, overlap: Overlap, called: list[str]) -> str:
    """Tool calls from the cell, dispatched through the run exactly like the model's own calls; the calls
    of one request run at once where `Overlap` allows, each answered in its order."""
    import asyncio

    try:
        calls = json.loads(payload)["calls"]
        requests = [(str(c["tool"]), c.get("args") or {}) for c in calls]
    except (ValueError, KeyError, TypeError):
        requests = None
    if not requests:
        error = {"is_error": True, "text": "tool(): malformed call (expected a name and a dict of arguments)"}
        return json.dumps({"results": [error]})
    limit = asyncio.Semaphore(MAX_CALLS_AT_ONCE)

    async def one(name: str, arguments: Any) -> dict[str, Any]:
        called.append(name)
        if name == ctx.tool.name:
            text = f"tool({name!r}) cannot be called from inside a cell: run the code in this cell instead"
            return {"tool": name, "is_error": True, "text": text, "data": {"error": "reentrant"}}
        async with limit, overlap.hold(ctx.run, name, arguments if isinstance(arguments, dict) else {}):
            started = time.time()
            result = await ctx.run.call(name, arguments)
            ended = time.time()
        images = [
            {"mime_type": b.mime_type, "data": base64.b64encode(b.data).decode()}
            for b in result.content
            if isinstance(b, Image)
        ]
        return {
            "tool": name,
            "is_error": result.is_error,
            "text": result.plain,
            "data": result.data or {},
            "images": images,
            "started": started,
            "ended": ended,
        }

    if len(requests) == 1:  # tool() one call at a time: no task to start
        results = [await one(*requests[0])]
    else:
        results = await asyncio.gather(*(one(n, a) for n, a in requests))
    return json.dumps({"results": results}, default=str)
