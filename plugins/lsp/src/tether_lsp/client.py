"""pygls' LanguageClient over a server process tether starts and owns.

pygls' own `start_io` keeps the process to itself (no public accessor) and gives tether no say in how
it is started (its own session, stderr drained by tether). So tether starts the process and connects
the client to its pipes with pygls' public pieces: the protocol's writer and `pygls.io_.run_async`,
stopped by an event of its own.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from pygls.exceptions import JsonRpcException, PyglsError
from pygls.io_ import run_async
from pygls.lsp.client import LanguageClient

from tether_lsp.converter import lsp_converter

log = logging.getLogger("tether.lsp")


class Client(LanguageClient):
    """A LanguageClient that reads and writes the pipes of a process started elsewhere."""

    def __init__(self, on_error: Callable[[str], None]) -> None:
        super().__init__("tether", "0.1.0", converter_factory=lsp_converter)
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
