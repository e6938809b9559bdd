"""The MCP elicitation port: in process against a real callable, and end to end through `tether serve`
with the official MCP SDK's client answering `elicitation/create`."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import mcp_types as types
import pytest
import tether
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from tether_askuser.card import make_question
from tether_askuser.elicitation import requested_schema

OPTIONS = [{"label": "Postgres", "description": "production default"}, {"label": "SQLite"}]


# -- the port in process: the same callable `tether serve` answers tether_elicitation with ----------


def elicit_replying(*replies):
    sent = []
    queue = list(replies)

    async def elicit(message, schema):
        sent.append((message, schema))
        reply = queue.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    return elicit, sent


class Client:
    """A host whose client's human answers forms: the core's tether_elicitation, as `tether serve` does."""

    def __init__(self, elicit):
        self.elicit = elicit

    @tether.hookimpl
    def tether_elicitation(self):
        return self.elicit


async def ask(tmp_path, elicit, args):
    async with tether.open_run(tmp_path, plugins=[Client(elicit)]) as run:
        assert "ask_user" in [t.name for t in run.tools()]
        return await run.call("ask_user", args)


async def test_accept_single_choice(tmp_path):
    elicit, sent = elicit_replying(("accept", {"choice": "SQLite"}))
    result = await ask(
        tmp_path, elicit, {"question": "Which DB?", "context": "for tests", "options": OPTIONS}
    )
    assert result.data == {
        "status": "answered",
        "selected": ["SQLite"],
        "text": None,
        "port": "MCP client (elicitation)",
    }
    message, schema = sent[0]
    assert message == "Which DB?\n\nfor tests"
    assert schema["properties"]["choice"]["oneOf"][0] == {
        "const": "Postgres",
        "title": "1. Postgres - production default",
    }
    assert "required" not in schema  # free text is allowed, so neither field is required


async def test_accept_multi_and_text(tmp_path):
    elicit, _ = elicit_replying(("accept", {"choices": ["SQLite", "Postgres"], "answer": "both"}))
    result = await ask(tmp_path, elicit, {"question": "Which?", "options": OPTIONS, "multi_select": True})
    assert result.data["selected"] == ["Postgres", "SQLite"] and result.data["text"] == "both"


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_are_skips(tmp_path, action):
    elicit, _ = elicit_replying((action, None))
    result = await ask(tmp_path, elicit, {"question": "Name?"})
    assert not result.is_error and result.data["status"] == "skipped"


async def test_accept_with_an_empty_form_is_a_skip(tmp_path):
    elicit, _ = elicit_replying(("accept", {}))
    result = await ask(tmp_path, elicit, {"question": "Which?", "options": OPTIONS})
    assert result.data["status"] == "skipped"


@pytest.mark.parametrize(
    "reply, said",
    [
        (("accept", {"choice": "MySQL"}), "not options on the card"),
        (("accept", {"choices": "Postgres"}), "not a list of labels"),
        (("accept", {"answer": 3}), "not text"),
        (("maybe", None), "unknown action 'maybe'"),
        (RuntimeError("client went away"), "did not answer the elicitation (RuntimeError: client went away)"),
    ],
)
async def test_client_misbehaving_or_gone_fails_closed(tmp_path, reply, said):
    elicit, _ = elicit_replying(reply)
    result = await ask(tmp_path, elicit, {"question": "Which?", "options": OPTIONS})
    assert result.is_error and said in result.plain
    assert result.data["status"] in {"failed", "disconnected"}


def test_schemas_are_flat_forms():
    single_only = requested_schema(make_question("q", None, [("a", None), ("b", "bee")], False, False))
    assert single_only == {
        "type": "object",
        "properties": {
            "choice": {
                "type": "string",
                "title": "Choose one",
                "oneOf": [{"const": "a", "title": "1. a"}, {"const": "b", "title": "2. b - bee"}],
            }
        },
        "required": ["choice"],
    }
    multi_only = requested_schema(make_question("q", None, [("a", None)], False, True))
    assert multi_only["properties"]["choices"]["items"] == {"anyOf": [{"const": "a", "title": "1. a"}]}
    assert multi_only["properties"]["choices"]["minItems"] == 1 and multi_only["required"] == ["choices"]
    text_only = requested_schema(make_question("q", None, [], True, False))
    assert text_only == {
        "type": "object",
        "properties": {"answer": {"type": "string", "title": "Your answer"}},
        "required": ["answer"],
    }
    both = requested_schema(make_question("q", None, [("a", None)], True, True))
    assert set(both["properties"]) == {"choices", "answer"} and "required" not in both
    for schema in (single_only, multi_only, text_only, both):
        # elicitation forms are flat: no nested objects
        assert all(prop["type"] in {"string", "array"} for prop in schema["properties"].values())


# -- end to end: the official client against `tether serve` -----------------------------------------


def server(root, **extra_env):
    env = dict(os.environ, TETHER_PLUGINS="askuser", **extra_env)
    return StdioServerParameters(
        command=sys.executable, args=["-m", "tether.cli", "serve", "--root", str(root)], env=env
    )


def answering(*results):
    """An elicitation callback that records each request and answers with the next result."""
    seen = []
    queue = list(results)

    async def callback(context, params):
        seen.append(params)
        reply = queue.pop(0)
        return await reply(params) if callable(reply) else reply

    return callback, seen


async def test_serve_with_elicitation_asks_through_the_client(tmp_path, no_leftover_processes):
    callback, seen = answering(
        types.ElicitResult(action="accept", content={"choice": "Postgres"}),
        types.ElicitResult(action="accept", content={"choices": ["SQLite"], "answer": "and a cache"}),
        types.ElicitResult(action="decline"),
        types.ElicitResult(action="cancel"),
        types.ErrorData(code=types.INTERNAL_ERROR, message="the window was closed"),
    )
    async with (
        stdio_client(server(tmp_path)) as (read, write),
        ClientSession(read, write, elicitation_callback=callback) as session,
    ):
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert tools["ask_user"].annotations.read_only_hint is True

        first = await session.call_tool("ask_user", {"question": "Which DB?", "options": OPTIONS})
        assert first.is_error is False
        assert first.meta["tether/data"]["selected"] == ["Postgres"]
        assert '["Postgres"]' in first.content[0].text
        assert seen[0].message == "Which DB?"
        assert seen[0].requested_schema["properties"]["choice"]["oneOf"][1]["const"] == "SQLite"

        multi = await session.call_tool(
            "ask_user", {"question": "Which?", "options": OPTIONS, "multi_select": True}
        )
        assert multi.meta["tether/data"]["selected"] == ["SQLite"]
        assert multi.meta["tether/data"]["text"] == "and a cache"

        for _ in ("decline", "cancel"):
            skipped = await session.call_tool("ask_user", {"question": "Name?"})
            assert skipped.is_error is False and skipped.meta["tether/data"]["status"] == "skipped"

        failed = await session.call_tool("ask_user", {"question": "Name?"})
        assert failed.is_error is True
        assert failed.meta["tether/data"]["status"] == "disconnected"
        assert "the window was closed" in failed.content[0].text

        bad = await session.call_tool("ask_user", {"question": "Name?", "multi_select": True})
        assert bad.is_error is True and "multi_select needs options" in bad.content[0].text
        assert len(seen) == 5  # the bad call never reached the human


async def test_serve_without_elicitation_capability_has_no_ask_user(tmp_path, no_leftover_processes):
    async with stdio_client(server(tmp_path)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        names = [t.name for t in (await session.list_tools()).tools]
        assert "ask_user" not in names
        result = await session.call_tool("ask_user", {"question": "Anyone?"})
        assert result.is_error is True
        assert "askuser: no human is reachable" in result.content[0].text


async def test_client_leaving_mid_question_ends_the_server(tmp_path, no_leftover_processes):
    asked = asyncio.Event()

    async def never_answers(params):
        asked.set()
        await asyncio.sleep(3600)

    callback, _ = answering(never_answers)
    async with stdio_client(server(tmp_path)) as (read, write):
        async with ClientSession(read, write, elicitation_callback=callback) as session:
            await session.initialize()
            call = asyncio.create_task(session.call_tool("ask_user", {"question": "Still there?"}))
            await asyncio.wait_for(asyncio.shield(asked.wait()), 15)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
        left = time.monotonic()
    # leaving closed the server's stdin mid-question; the SDK kills a server still alive after 2 s, so
    # a server that ended by itself (its waiting question released) is gone well before that
    took = time.monotonic() - left
    assert took < 1.8, f"the server did not end by itself within {took:.1f} s of losing its client"


async def test_serve_timeout_is_an_error_and_the_form_is_withdrawn(tmp_path, no_leftover_processes):
    withdrawn = asyncio.Event()

    async def slow_human(params):
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            withdrawn.set()  # the server cancelled its elicitation request: the client closes the form
            raise

    callback, _ = answering(slow_human)
    async with (
        stdio_client(server(tmp_path, TETHER_ASK_USER_TIMEOUT="0.5")) as (read, write),
        ClientSession(read, write, elicitation_callback=callback) as session,
    ):
        await session.initialize()
        t0 = time.monotonic()
        result = await asyncio.wait_for(session.call_tool("ask_user", {"question": "Anyone?"}), 15)
        assert time.monotonic() - t0 < 5
        assert result.is_error is True and result.meta["tether/data"]["status"] == "timeout"
        assert "nobody answered within 0.5 s" in result.content[0].text
        await asyncio.wait_for(withdrawn.wait(), 5)


async def test_serve_approval_by_card_through_elicitation(tmp_path, no_leftover_processes):
    callback, seen = answering(
        types.ElicitResult(action="accept", content={"choice": "Allow"}),
        types.ElicitResult(action="decline"),
        types.ElicitResult(action="accept", content={"answer": "use b.txt instead"}),
    )
    async with (
        stdio_client(server(tmp_path, TETHER_APPROVAL_BY_CARD="write")) as (read, write),
        ClientSession(read, write, elicitation_callback=callback) as session,
    ):
        await session.initialize()
        allowed = await session.call_tool("write", {"path": "a.txt", "content": "x"})
        assert allowed.is_error is False and (tmp_path / "a.txt").read_text() == "x"
        assert seen[0].message.startswith("Permission needed: Allow the agent to call write (write)?")
        assert '"path": "a.txt"' in seen[0].message
        assert [o["const"] for o in seen[0].requested_schema["properties"]["choice"]["oneOf"]] == [
            "Allow",
            "Deny",
            "Always allow",
        ]
        declined = await session.call_tool("write", {"path": "c.txt", "content": "x"})
        assert declined.is_error is True and "skipped the approval card" in declined.content[0].text
        told = await session.call_tool("write", {"path": "c.txt", "content": "x"})
        assert told.is_error is True and 'said: "use b.txt instead"' in told.content[0].text
        assert not (tmp_path / "c.txt").exists()
        read_result = await session.call_tool("read", {"path": "a.txt"})  # read tier is not gated here
        assert read_result.is_error is False and len(seen) == 3
