"""ask_user and approval cards through `tether serve` in both MCP revisions, with the official SDK client:
`elicitation/create` for a 2025-11-25 client, multi round-trip requests (an `InputRequiredResult`, then
the client's retry with the answer) for a 2026-07-28 client."""

from __future__ import annotations

import asyncio
import os
import sys
from contextlib import asynccontextmanager

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

OPTIONS = [{"label": "Postgres", "description": "production default"}, {"label": "SQLite"}]
REVISIONS = {"legacy": "2025-11-25", "auto": "2026-07-28"}  # auto: the client probes server/discover


def answering(*replies):
    """An elicitation callback that records each form and answers with the next reply."""
    seen = []
    queue = list(replies)

    async def callback(context, params):
        seen.append(params)
        return queue.pop(0)

    return callback, seen


@asynccontextmanager
async def connect(root, mode, callback=None, **env):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tether.cli", "serve", "--root", str(root)],
        env=dict(os.environ, TETHER_PLUGINS="askuser", **env),
    )
    async with Client(params, mode=mode, elicitation_callback=callback) as client:
        assert client.protocol_version == REVISIONS[mode]
        yield client


@pytest.mark.parametrize("mode", REVISIONS)
async def test_accept_decline_cancel_and_a_refused_form(tmp_path, mode, no_leftover_processes):
    callback, seen = answering(
        types.ElicitResult(action="accept", content={"choice": "Postgres"}),
        types.ElicitResult(action="accept", content={"choices": ["SQLite"], "answer": "and a cache"}),
        types.ElicitResult(action="decline"),
        types.ElicitResult(action="cancel"),
        types.ErrorData(code=types.INTERNAL_ERROR, message="the window was closed"),
    )
    async with connect(tmp_path, mode, callback) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["ask_user"].annotations.read_only_hint is True

        first = await client.call_tool(
            "ask_user", {"question": "Which DB?", "context": "for tests", "options": OPTIONS}
        )
        assert first.is_error is False and first.meta["tether/data"]["selected"] == ["Postgres"]
        assert seen[0].message == "Which DB?\n\nfor tests"
        assert [o["const"] for o in seen[0].requested_schema["properties"]["choice"]["oneOf"]] == [
            "Postgres",
            "SQLite",
        ]

        multi = await client.call_tool(
            "ask_user", {"question": "Which?", "options": OPTIONS, "multi_select": True}
        )
        assert (
            multi.meta["tether/data"]["selected"] == ["SQLite"]
            and multi.meta["tether/data"]["text"] == "and a cache"
        )
        for _ in ("decline", "cancel"):
            skipped = await client.call_tool("ask_user", {"question": "Name?"})
            assert skipped.is_error is False and skipped.meta["tether/data"]["status"] == "skipped"
        if mode == "legacy":  # the client refuses the elicitation/create request: the card fails closed
            failed = await client.call_tool("ask_user", {"question": "Name?"})
            assert failed.is_error is True and failed.meta["tether/data"]["status"] == "disconnected"
            assert "the window was closed" in failed.content[0].text
        else:  # the SDK's retry driver turns a refused input into an error of the call itself
            with pytest.raises(MCPError, match="the window was closed"):
                await client.call_tool("ask_user", {"question": "Name?"})
        assert len(seen) == 5


async def test_without_elicitation_in_the_request_meta_there_is_no_ask_user(tmp_path, no_leftover_processes):
    async with connect(tmp_path, "auto") as client:
        assert "ask_user" not in [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool("ask_user", {"question": "Anyone?"})
        assert result.is_error is True and "askuser: no human is reachable" in result.content[0].text


async def test_a_retry_resumes_the_same_question_and_a_card_is_never_asked_twice(
    tmp_path, no_leftover_processes
):
    callback, seen = answering()
    async with connect(tmp_path, "auto", callback) as client:
        args = {"question": "Which DB?", "options": OPTIONS}
        asked = await client.session.call_tool("ask_user", args, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult)
        [(key, form)] = asked.input_requests.items()
        assert form.params.message == "Which DB?" and "choice" in form.params.requested_schema["properties"]

        answer = {key: types.ElicitResult(action="accept", content={"choice": "SQLite"})}
        done = await client.session.call_tool(
            "ask_user",
            args,
            input_responses=answer,
            request_state=asked.request_state,
            allow_input_required=True,
        )
        assert done.is_error is False and done.meta["tether/data"]["selected"] == ["SQLite"]

        # the same state again: the question was answered, it is not put to the human a second time
        again = await client.session.call_tool(
            "ask_user",
            args,
            input_responses=answer,
            request_state=asked.request_state,
            allow_input_required=True,
        )
        assert again.is_error is True and "a card is never asked twice" in again.content[0].text

        # the state is sealed and bound to the call: another call's arguments, or a forged state, are refused
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await client.session.call_tool(
                "ask_user",
                {"question": "Other?"},
                input_responses=answer,
                request_state=asked.request_state,
                allow_input_required=True,
            )
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await client.session.call_tool(
                "ask_user", args, request_state='{"call": "x"}', allow_input_required=True
            )
    assert seen == []  # every round above was driven by hand


async def test_a_retry_without_the_answer_fails_the_card_closed(tmp_path, no_leftover_processes):
    async with connect(tmp_path, "auto", answering()[0]) as client:
        asked = await client.session.call_tool("ask_user", {"question": "Name?"}, allow_input_required=True)
        retried = await client.session.call_tool(
            "ask_user", {"question": "Name?"}, request_state=asked.request_state, allow_input_required=True
        )
        assert retried.is_error is True and retried.meta["tether/data"]["status"] == "disconnected"
        assert "retried the call without answering the card" in retried.content[0].text


async def test_a_client_that_never_retries_meets_the_timeout(tmp_path, no_leftover_processes):
    async with connect(tmp_path, "auto", answering()[0], TETHER_ASK_USER_TIMEOUT="0.3") as client:
        asked = await client.session.call_tool("ask_user", {"question": "Name?"}, allow_input_required=True)
        await asyncio.sleep(1.0)  # the client keeps the form for longer than the card's timeout
        late = await client.session.call_tool(
            "ask_user",
            {"question": "Name?"},
            allow_input_required=True,
            request_state=asked.request_state,
            input_responses={"card1": types.ElicitResult(action="accept", content={"answer": "too late"})},
        )
        assert late.is_error is True and late.meta["tether/data"]["status"] == "timeout"
        assert "nobody answered within 0.3 s" in late.content[0].text


@pytest.mark.parametrize("mode", REVISIONS)
async def test_approval_by_card(tmp_path, mode, no_leftover_processes):
    callback, seen = answering(
        types.ElicitResult(action="accept", content={"choice": "Allow"}),
        types.ElicitResult(action="decline"),
        types.ElicitResult(action="accept", content={"answer": "use b.txt instead"}),
        types.ElicitResult(action="accept", content={"choice": "Always allow"}),
    )
    async with connect(tmp_path, mode, callback, TETHER_APPROVAL_BY_CARD="write") as client:
        allowed = await client.call_tool("write", {"path": "a.txt", "content": "x"})
        assert allowed.is_error is False and (tmp_path / "a.txt").read_text() == "x"
        assert seen[0].message.startswith("Permission needed: Allow the agent to call write (write)?")
        assert '"path": "a.txt"' in seen[0].message
        declined = await client.call_tool("write", {"path": "c.txt", "content": "x"})
        assert declined.is_error is True and "skipped the approval card" in declined.content[0].text
        told = await client.call_tool("write", {"path": "c.txt", "content": "x"})
        assert told.is_error is True and 'said: "use b.txt instead"' in told.content[0].text
        assert not (tmp_path / "c.txt").exists()
        for name in ("d.txt", "e.txt"):  # always allow: the second call runs without a card
            assert (await client.call_tool("write", {"path": name, "content": "x"})).is_error is False
        assert (await client.call_tool("read", {"path": "a.txt"})).is_error is False  # read is not gated here
        assert len(seen) == 4
