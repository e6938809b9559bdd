"""pygls' LanguageClient over a server process tether starts and owns.

pygls' own `start_io` keeps the process to itself (no public accessor) and gives tether no say in how
it is started (its own session, stderr drained by tether). So tether starts the process and connects
the client to its pipes with pygls' public pieces: the protocol's writer and `pygls.io_.run_async`,
stopped by an event of its own.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, PyglsError
from pygls.io_ import run_async
from pygls.lsp.client import LanguageClient
from pygls.protocol import LanguageServerProtocol

from tether_lsp.converter import lsp_converter

log = logging.getLogger("tether.lsp")


@functools.cache
def _types(method: str) -> tuple[Any, Any]:
    found = types.METHOD_TO_TYPES.get(method, (None, None))
    return found[0], found[1]


class Protocol(LanguageServerProtocol):
    """pygls' protocol without its per-instance caches.

    pygls decorates `get_message_type` and `get_result_type` with `functools.lru_cache` on the method,
    so the cache's keys hold every protocol ever used, and through its handlers the connection and the
    closed run, until 128 newer entries push them out (0.5 MB a closed run). Both depend on the method
    name only: one cache by name serves every protocol and holds none.
    """

    # the base's attribute is the lru_cache wrapper this replaces with a plain method
    def get_message_type(self, method: str) -> type[Any] | None:  # pyright: ignore[reportIncompatibleVariableOverride]
        return _types(method)[0]

    def get_result_type(self, method: str) -> type[Any] | None:  # pyright: ignore[reportIncompatibleVariableOverride]
        return _types(method)[1]


class Client(LanguageClient):
    """A LanguageClient that reads and writes the pipes of a process started elsewhere."""

    def __init__(self, on_error: Callable[[str], None]) -> None:
        super().__init__("tether", "0.1.0", protocol_cls=Protocol, converter_factory=lsp_converter)
        self._on_error = on_error
        self._reading = threading.Event()  # set: stop reading
        self._reader: asyncio.Task[Any] | None = None

    def connect(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.protocol.set_writer(proc.stdin)
        self._reader = asyncio.create_task(
            run_async(
                stop_event=self._reading,
                reader=proc.stdout,
                protocol=self.protocol,
                logger=log,
                error_handler=self.report_server_error,
            )
        )

    def report_server_error(
        self, error: Exception, source: type[PyglsError] | type[JsonRpcException]
    ) -> None:
        # pygls reports here a message it cannot parse and then never completes its request (as with
        # cattrs >= 25 before `lsp_converter`): keep the reason so the timeout can name it
        self._on_error(f"client: {source.__name__}: {error}")

    async def disconnect(self, grace: float) -> None:
        """Stop reading (the process is gone or going); never raises, never hangs."""
        self._reading.set()
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, grace)
            except (TimeoutError, Exception):  # noqa: BLE001 - a reader that does not end is cancelled
                self._reader.cancel()
