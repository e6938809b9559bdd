"""The raw pygls clients the lsp benchmarks measure tether against: the handshake they share, and medians.

Imported by lsp_bench.py and lsp_go_bench.py (this folder is on sys.path when they run).
"""

from __future__ import annotations

import asyncio
import statistics
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient


async def initialize(client: LanguageClient, root: Path, capabilities: lsp.ClientCapabilities) -> None:
    """initialize (one workspace folder: ``root``) within 60 s, then initialized."""
    folder = lsp.WorkspaceFolder(uri=root.as_uri(), name=root.name)
    params = lsp.InitializeParams(
        process_id=None, root_uri=root.as_uri(), capabilities=capabilities, workspace_folders=[folder]
    )
    await asyncio.wait_for(client.initialize_async(params), 60)
    client.initialized(lsp.InitializedParams())


def med(xs: list[float]) -> float:
    """The median of times in seconds, in ms."""
    return statistics.median(xs) * 1000
