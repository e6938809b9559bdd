"""The file watcher's scan of the tree runs in a thread, never on the event loop (a big tree must not
stall every other call of the run), and still tells the server about a file changed behind its back."""

from __future__ import annotations

import threading

import tether
from tether.testing import open_test_run
from tether_lsp.watching import Watcher


async def test_the_watchers_scan_runs_off_the_loop_and_sees_a_shell_edit(py_root, monkeypatch):
    threads: list[threading.Thread] = []
    scan = Watcher.scan

    def spy(self):
        threads.append(threading.current_thread())
        return scan(self)

    monkeypatch.setattr(Watcher, "scan", spy)
    async with open_test_run(py_root, only=["lsp"], plugins=[tether.files]) as run:
        first = await run.call(
            "lsp", {"action": "hover", "file": "pkg/main.py", "line": 4, "symbol": "greet"}
        )
        assert not first.is_error, first.plain
        # a shell adds a function the server has never been told about; a query's refresh finds it
        (py_root / "pkg" / "extra.py").write_text("def brand_new_helper() -> int:\n    return 1\n")
        found = await run.call("lsp", {"action": "symbols", "query": "brand_new_helper"})
    assert "brand_new_helper" in found.plain, found.plain
    assert len(threads) >= 2, "start and the query's refresh both scan"
    assert threading.main_thread() not in threads, "a scan ran on the event loop's thread"
