"""A closed run with a language server in it is not kept alive by the lsp client (issue 18, item 13).

pygls caches two lookups per protocol with `functools.lru_cache`, whose keys held every protocol, its
handlers, the connection and the closed run: 0.5 MB a run, growing with every open/close cycle."""

from __future__ import annotations

import gc
import weakref

import pytest
import tether
from tether.testing import open_test_run


async def cycle(root) -> weakref.ref:
    async with open_test_run(root, only=["lsp"], plugins=[tether.files]) as run:
        hover = await run.call(
            "lsp", {"action": "hover", "file": "pkg/main.py", "line": 4, "symbol": "greet"}
        )
        assert not hover.is_error, hover.plain
        wrote = await run.call("write", {"path": "pkg/other.py", "content": "x: int = 1\n"})
        assert not wrote.is_error, wrote.plain
        return weakref.ref(run)


@pytest.mark.usefixtures("no_leftover_processes")
async def test_closed_runs_with_a_language_server_are_released(py_root):
    refs = [await cycle(py_root) for _ in range(3)]
    gc.collect()
    kept = [r for r in refs if r() is not None]
    assert kept == [], f"{len(kept)} of 3 closed runs are still referenced"
