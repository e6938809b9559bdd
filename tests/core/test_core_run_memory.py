"""A closed run keeps nothing: open/close cycles with a kernel, processes and files leave no run behind."""

from __future__ import annotations

import gc
import tracemalloc
import weakref

import pytest
import tether
import tether.files
import tether_eval.plugin as eval_plugin

D = "add one and one for the test"


async def cycle(root) -> weakref.ref:
    async with tether.open_run(
        root, conversation_id="c", plugins=[tether.files, eval_plugin], load_entry_points=False
    ) as run:
        assert not (await run.call("write", {"path": "a.py", "content": "x = 1\n"})).is_error
        assert not (await run.call("read", {"path": "a.py"})).is_error
        assert not (await run.call("eval", {"code": "1+1", "description": D})).is_error
        return weakref.ref(run)


@pytest.mark.usefixtures("no_leftover_processes")
async def test_open_close_cycles_release_every_run(tmp_path):
    for _ in range(3):  # warm-up: imports, caches, the first kernel's one-time costs
        await cycle(tmp_path)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        refs = [await cycle(tmp_path) for _ in range(10)]
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert [r for r in refs if r() is not None] == []  # no closed run is still referenced
    assert grown / 10 < 100_000, f"{grown / 10:,.0f} bytes kept per closed run"
