"""`tether serve`: a call of a tool that is not read-only, carrying `_meta["tether/idempotency_key"]`,
runs once however often the client retries it (over stdio and Streamable HTTP, the retry racing the
first call or after it); the same key with other arguments is refused; an approval card's
multi-round retry still works; the memory is bounded in time and count."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from serve_support import http_server
from tether.testing import assert_no_traceback

KEY, REPLAY = "tether/idempotency_key", "tether/replay"
REVISIONS = {"legacy": "2025-11-25", "auto": "2026-07-28"}


def keyed(key):
    return {KEY: key}


@contextlib.asynccontextmanager
async def connect(transport, root, mode, *args, env=None, **client_kwargs):
    env = dict(os.environ, **(env or {}))
    if transport == "stdio":
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "tether.cli", "serve", "--root", str(root), *args], env=env
        )
        async with Client(params, mode=mode, **client_kwargs) as client:
            yield client
        return
    with http_server(root, "127.0.0.1:0", *args, **(env or {})) as (_proc, url):
        async with Client(url, mode=mode, **client_kwargs) as client:
            yield client


def replayed(result) -> bool:
    return bool(result.meta and result.meta.get(REPLAY))


PATCH = """--- a/notes.txt
+++ b/notes.txt
@@ -1,2 +1,3 @@
 one
 two
+three
"""


@pytest.mark.parametrize(("transport", "mode"), [("stdio", "legacy"), ("http", "auto")])
async def test_a_retried_write_edit_or_patch_runs_once(tmp_path, transport, mode, no_leftover_processes):
    (tmp_path / "notes.txt").write_text("one\ntwo\n")
    (tmp_path / "config.txt").write_text("debug = false\n")
    async with connect(transport, tmp_path, mode, env={"TETHER_PLUGINS": ""}) as c:
        first = await c.call_tool("write", {"path": "new.txt", "content": "v1\n"}, meta=keyed("w-1"))
        assert first.is_error is False and not replayed(first)
        (tmp_path / "new.txt").write_text("changed by someone since\n")
        again = await c.call_tool("write", {"path": "new.txt", "content": "v1\n"}, meta=keyed("w-1"))
        assert replayed(again) and again.content[0].text == first.content[0].text
        assert (tmp_path / "new.txt").read_text() == "changed by someone since\n"  # not written twice

        edit = {"path": "config.txt", "old_string": "false", "new_string": "true"}
        edited = await c.call_tool("edit", edit, meta=keyed("e-1"))
        assert edited.is_error is False, edited.content[0].text
        retried = await c.call_tool("edit", edit, meta=keyed("e-1"))  # ran again, it finds no "false"
        assert retried.is_error is False and replayed(retried)
        assert (tmp_path / "config.txt").read_text() == "debug = true\n"

        patched = await c.call_tool("apply_patch", {"patch": PATCH}, meta=keyed("p-1"))
        assert patched.is_error is False, patched.content[0].text
        assert replayed(await c.call_tool("apply_patch", {"patch": PATCH}, meta=keyed("p-1")))
        assert (tmp_path / "notes.txt").read_text() == "one\ntwo\nthree\n"

        other = await c.call_tool("write", {"path": "new.txt", "content": "v2\n"}, meta=keyed("w-1"))
        text = other.content[0].text
        assert other.is_error is True and not replayed(other)
        assert "names an earlier call of write with other arguments" in text and "new key" in text
        assert (tmp_path / "new.txt").read_text() == "changed by someone since\n"

        # without a key, as always: the call runs each time
        plain = await c.call_tool("edit", edit)
        assert plain.is_error is True and "not found" in plain.content[0].text.lower()
        # a read-only tool ignores a key: reading twice reads twice
        assert not replayed(await c.call_tool("read", {"path": "notes.txt"}, meta=keyed("r-1")))
        assert not replayed(await c.call_tool("read", {"path": "notes.txt"}, meta=keyed("r-1")))


async def test_a_bad_key_is_refused_in_one_paragraph_and_nothing_runs(tmp_path):
    async with connect("stdio", tmp_path, "auto", env={"TETHER_PLUGINS": ""}) as c:
        for key in (3, "", " ", "k" * 257, {"id": 1}, True):
            bad = await c.call_tool("write", {"path": "x.txt", "content": "x"}, meta=keyed(key))
            text = bad.content[0].text
            assert bad.is_error is True and "tether/idempotency_key" in text and "did not run" in text, key
            assert "\n" not in text
            assert_no_traceback(text, "the refusal")
            assert not (tmp_path / "x.txt").exists()


@pytest.mark.parametrize(("transport", "mode"), [("stdio", "legacy"), ("http", "auto")])
async def test_a_retry_racing_the_first_call_joins_it(
    tmp_path, plugin_site, transport, mode, no_leftover_processes
):
    """The first request still runs (held at approval) when its retry comes; over HTTP the first
    request's response is lost too (the client gives up on it): the write happens once."""
    gate = tmp_path / "gate"
    gate.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    env = {"TETHER_PLUGINS": "", "GATE_DIR": str(gate), "TETHER_SERVE_HEARTBEAT": "0.1"}
    joined = asyncio.Event()

    async def on_progress(done, total, message):
        joined.set()  # the heartbeat of the call reaches the request that joined it

    async def asked():
        while not (gate / "asked").exists():
            await asyncio.sleep(0.02)

    args = {"path": "once.txt", "content": "once\n"}
    async with connect(transport, root, mode, "-p", "tether_test_gate", env=env) as c:
        first = asyncio.create_task(c.call_tool("write", args, meta=keyed("race-1")))
        await asyncio.wait_for(asked(), 60)
        if transport == "http":
            first.cancel()  # the response of the first request is lost
            with contextlib.suppress(asyncio.CancelledError):
                await first
        retry = asyncio.create_task(
            c.call_tool("write", args, meta=keyed("race-1"), progress_callback=on_progress)
        )
        await asyncio.wait_for(joined.wait(), 60)
        (gate / "open").touch()
        second = await asyncio.wait_for(retry, 60)
        assert second.is_error is False and replayed(second), second.content[0].text
        if transport == "stdio":
            assert not replayed(await asyncio.wait_for(first, 60))
        after = await c.call_tool("write", args, meta=keyed("race-1"))
        assert replayed(after)
    assert (gate / "asked").read_text() == "once.txt\n"  # approved once: the tool ran once
    assert (root / "once.txt").read_text() == "once\n"


WORKER = """
import sys
brief = sys.stdin.read()
with open("spawned.txt", "a") as fh:
    fh.write("spawned\\n")
print("worker done: " + brief.strip())
"""


async def test_resolve_accept_lsp_rename_and_vibe_spawn_retried_run_once(tmp_path, no_leftover_processes):
    root = tmp_path
    (root / "pyproject.toml").write_text('[project]\nname = "sample"\nversion = "0"\n')
    (root / "util.py").write_text("def greet(name: str) -> str:\n    return name\n")
    (root / "main.py").write_text('from util import greet\n\nprint(greet("x"))\n')
    (root / "c.py").write_text("print(1)\nprint(2)\n")
    (root / "worker.py").write_text(WORKER)
    args = ["--vibe", "--option", f"vibe_fast={json.dumps([sys.executable, str(root / 'worker.py')])}"]
    async with connect("stdio", root, "auto", *args, env={"TETHER_PLUGINS": "astgrep,lsp,vibe"}) as c:
        staged = await c.call_tool("ast_edit", {"pattern": "print($A)", "rewrite": "log($A)", "path": "c.py"})
        assert staged.is_error is False, staged.content[0].text
        accept = {"edit_id": staged.meta["tether/data"]["edit_id"], "action": "accept"}
        accepted = await c.call_tool("resolve", accept, meta=keyed("resolve-1"))
        assert accepted.is_error is False, accepted.content[0].text
        again = await c.call_tool("resolve", accept, meta=keyed("resolve-1"))  # ran again: no such edit
        assert again.is_error is False and replayed(again)
        assert (root / "c.py").read_text() == "log(1)\nlog(2)\n"

        rename = {"file": "util.py", "line": 1, "symbol": "greet", "new_name": "welcome"}
        renamed = await c.call_tool("lsp_rename", rename, meta=keyed("rename-1"))
        assert renamed.is_error is False, renamed.content[0].text
        again = await c.call_tool("lsp_rename", rename, meta=keyed("rename-1"))  # ran again: no 'greet'
        assert again.is_error is False and replayed(again)
        assert "welcome(" in (root / "main.py").read_text()

        spawn = {"brief": "hello", "label": "once"}
        spawned = await c.call_tool("vibe_spawn", spawn, meta=keyed("spawn-1"))
        assert spawned.is_error is False, spawned.content[0].text
        again = await c.call_tool("vibe_spawn", spawn, meta=keyed("spawn-1"))
        worker = spawned.meta["tether/data"]["worker_id"]
        assert replayed(again) and again.meta["tether/data"]["worker_id"] == worker
        done = await c.call_tool("vibe_wait", {"worker_id": worker, "timeout_seconds": 60})
        assert done.meta["tether/data"]["status"] == "done", done.content[0].text
        listed = await c.call_tool("vibe_list", {})
        assert [w["worker_id"] for w in listed.meta["tether/data"]["workers"]] == [worker]
    assert (root / "spawned.txt").read_text() == "spawned\n"


async def test_an_approval_cards_multi_round_retry_still_works_with_a_key(tmp_path, no_leftover_processes):
    cards = []

    async def human(context, params):
        cards.append(params.message)
        return types.ElicitResult(action="accept", content={"choice": "Allow"})

    option = ["--option", 'askuser_approval_by_card=["write"]']
    env = {"TETHER_PLUGINS": "askuser"}
    async with connect("stdio", tmp_path, "auto", *option, env=env, elicitation_callback=human) as c:
        assert c.protocol_version == REVISIONS["auto"]
        args = {"path": "approved.txt", "content": "yes\n"}
        wrote = await c.call_tool("write", args, meta=keyed("card-1"))  # InputRequiredResult, then the retry
        assert wrote.is_error is False and not replayed(wrote), wrote.content[0].text
        assert len(cards) == 1 and (tmp_path / "approved.txt").read_text() == "yes\n"
        (tmp_path / "approved.txt").write_text("edited since\n")
        again = await c.call_tool("write", args, meta=keyed("card-1"))
        assert replayed(again) and len(cards) == 1  # no second card, no second write
    assert (tmp_path / "approved.txt").read_text() == "edited since\n"


def test_the_memory_is_bounded_in_time_and_count():
    from tether.serve import _Call, _Keyed, _Replays

    now = [0.0]
    replays = _Replays(ttl=600.0, size=3, clock=lambda: now[0])

    def remember(key):
        kept = _Keyed(key, _Call(None, "write"))
        replays.add(key, kept)
        return kept

    running = remember("running")
    for key in ("a", "b", "c"):
        replays.finished(key, remember(key))
        now[0] += 1
    # full: the oldest finished call is forgotten first, the running one is kept
    assert len(replays) == 3 and replays.get("a") is None
    assert replays.get("running") is running and replays.get("b") and replays.get("c")
    now[0] = 601.0  # b finished at 1, c at 2: b is 600 s old now
    assert replays.get("b") is None and replays.get("c") is not None
    now[0] += 1
    assert replays.get("c") is None and replays.get("running") is running  # running: never expires
    replays.finished("running", running)
    now[0] += 600
    assert replays.get("running") is None and len(replays) == 0
