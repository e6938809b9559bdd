"""An envelope: the sandbox a harness runs the conversation's processes in.

eval only needs two things from it: whether it is up right now (it never boots one) and how to turn
a command line into one that runs inside it (e.g. ``["bwrap", ..., *argv]`` or
``["docker", "exec", "-i", name, *argv]``). The kernel talks to tether over ipc sockets in a private
temporary directory (or tcp on 127.0.0.1 for Deno): the envelope must share that directory (or the
loopback) and the paths of the root and the interpreter with the host.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence

import attrs


@attrs.frozen
class Envelope:
    name: str
    wrap: Callable[[Sequence[str]], Sequence[str]]  # argv on the host -> argv that starts it inside
    is_up: Callable[[], bool | Awaitable[bool]] = lambda: True
    python: str | None = None  # the interpreter with ipykernel inside; None: the same choice as on the host
    deno: str | None = None  # the deno binary inside; None: the one tether ships

    async def up(self, timeout: float = 5.0) -> bool:
        """Whether the envelope is up; a check that fails or hangs counts as down."""
        try:
            value = self.is_up()
            if inspect.isawaitable(value):
                value = await asyncio.wait_for(value, timeout)
            return bool(value)
        except Exception:  # noqa: BLE001 - a broken check means we cannot count on the envelope
            return False
