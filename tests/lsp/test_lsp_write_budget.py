"""How long a write waits for a silent server follows its measured rounds; diagnostics_timeout bounds it all."""

from __future__ import annotations

import os
import signal
import time

import tether
import tether.files
from tether_lsp import rounds
from tether_lsp.hookspecs import tether_lsp_supervisor
from tether_lsp.rounds import ROUND_FLOOR


def basedpyright(run):
    (conn,) = run.resource(tether_lsp_supervisor).connections.values()
    return conn


async def test_a_write_waits_for_what_the_servers_rounds_take_not_the_whole_timeout(
    py_root, samples, no_leftover_processes
):
    async with tether.open_run(py_root, plugins=[tether.files], options={"diagnostics_timeout": 90}) as run:
        r = await run.call("lsp", {"action": "diagnostics", "file": "pkg/util.py"})
        assert not r.is_error, r.plain
        conn = basedpyright(run)
        assert rounds.budget(conn, 90) == 90  # nothing measured yet: the whole bound
        for i in range(3):
            r = await run.call("write", {"path": "pkg/util.py", "content": samples.UTIL + f"\nX{i} = {i}\n"})
            assert not r.is_error and "pending" not in r.plain, r.plain
        assert conn.round_times and all(0 < t < 90 for t in conn.round_times), conn.round_times
        budget = rounds.budget(conn, 90)
        assert ROUND_FLOOR <= budget < 90, conn.round_times
        # a server that stops answering (no publish, no progress) costs the write its budget, not the 90 s
        # of diagnostics_timeout; one that is working gets the whole bound
        os.killpg(conn.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            r = await run.call("write", {"path": "pkg/util.py", "content": samples.UTIL + "\nY = 1\n"})
            elapsed = time.monotonic() - t0
        finally:
            os.killpg(conn.pid, signal.SIGCONT)
        assert not r.is_error and "introduced" not in r.plain, r.plain
        assert "diagnostics incomplete: still pending for pkg/util.py after " in r.plain, r.plain
        assert budget - 0.5 <= elapsed < budget + 15, (elapsed, budget)
        # once it answers again, the next write is checked as before
        r = await run.call("write", {"path": "pkg/util.py", "content": samples.UTIL + "\nZ: int = 'z'\n"})
        assert "This write introduced 1 error(s)" in r.plain and "pkg/util.py:10:" in r.plain, r.plain


async def test_a_server_computing_without_a_word_is_working_and_its_quiet_counts_once_it_stops(
    tmp_path, monkeypatch
):
    """basedpyright, starved on a loaded machine, computed for seconds between its first publishes and its
    round's progress begin: the quiet rule took the round as done on the placeholders (CI: click's and
    Django's importers' errors were missed, unsaid). Its processes' CPU use is a sign of work, as a
    publish is; a server whose definition does not say so (clangd indexes between rounds) is not read so."""
    import asyncio
    import subprocess
    import sys

    import attrs
    from tether_lsp.connection import Connection
    from tether_lsp.servers import BUILTIN_SERVERS

    monkeypatch.setattr(rounds, "PROGRESS_FALLBACK_SEEN", 1.0)
    server = next(d for d in BUILTIN_SERVERS if d.id == "basedpyright")
    # the server's process, as the connection sees it: one that computes and sends nothing
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        for definition, counts in ((server, True), (attrs.evolve(server, cpu_is_work=False), False)):
            conn = Connection(definition, "basedpyright-langserver", tmp_path, None)
            conn.proc = burner
            conn.begins = 1  # rounds were seen: a change with no round of its own waits the fallback quiet
            mark = conn.mark()
            done = await rounds.wait_round(conn, mark, 4.0)
            assert done is not counts, (definition.cpu_is_work, done)
        os.kill(burner.pid, signal.SIGSTOP)  # it stops computing: the quiet counts from its last use
        conn = Connection(server, "basedpyright-langserver", tmp_path, None)
        conn.proc, conn.begins = burner, 1
        await asyncio.sleep(0.3)
        mark = conn.mark()
        assert await rounds.wait_round(conn, mark, 60.0)
    finally:
        burner.kill()
        burner.wait()
