"""ask_user through the harness ports (an async callable, a queue): answers, skips, failures, bounds."""

from __future__ import annotations

import asyncio
import time

import pytest
import tether
from tether.testing import assert_model_error
from tether_askuser import Answer, PortDisconnected, Question, QueuePort

OPTIONS = [{"label": "Postgres", "description": "production default"}, {"label": "SQLite"}]


async def test_callable_port_gets_the_card_and_its_answer_comes_back(tmp_path):
    seen: list[Question] = []

    async def human(q: Question) -> Answer:
        seen.append(q)
        return Answer.choose("SQLite")

    async with tether.open_run(tmp_path, options={"ask_user_port": human}) as run:
        result = await run.call(
            "ask_user", {"question": " Which DB? ", "context": "migrations", "options": OPTIONS}
        )
    assert not result.is_error
    assert result.data == {"status": "answered", "selected": ["SQLite"], "text": None, "port": "harness"}
    assert seen[0].question == "Which DB?"
    assert seen[0].context == "migrations"
    assert seen[0].labels == ("Postgres", "SQLite")
    assert seen[0].options[0].description == "production default"
    assert seen[0].to_json()["options"][1] == {"label": "SQLite", "description": None}


async def test_queue_port_answer_with_options_and_text(tmp_path):
    port = QueuePort()
    async with tether.open_run(tmp_path, options={"ask_user_port": port}) as run:
        call = asyncio.create_task(
            run.call("ask_user", {"question": "Which?", "options": OPTIONS, "multi_select": True})
        )
        pending = await asyncio.wait_for(port.questions.get(), 5)
        assert pending.question.multi_select
        pending.choose("SQLite", "Postgres", text="both, for now")
        result = await asyncio.wait_for(call, 5)
    assert result.data["selected"] == ["Postgres", "SQLite"]  # the card's order
    assert result.data["text"] == "both, for now"
    assert 'Typed answer (JSON string): "both, for now"' in result.plain


async def test_queue_port_skip(tmp_path):
    port = QueuePort()
    async with tether.open_run(tmp_path, options={"ask_user_port": port}) as run:
        call = asyncio.create_task(run.call("ask_user", {"question": "Name?"}))
        (await asyncio.wait_for(port.questions.get(), 5)).skip()
        result = await asyncio.wait_for(call, 5)
    assert not result.is_error
    assert result.data["status"] == "skipped"
    assert "Do not ask this again" in result.plain


async def test_timeout_is_error_and_bounded(tmp_path):
    port = QueuePort()
    async with tether.open_run(tmp_path, options={"ask_user_port": port, "ask_user_timeout": 0.3}) as run:
        t0 = time.monotonic()
        result = await run.call("ask_user", {"question": "Name?"})
        took = time.monotonic() - t0
    assert result.is_error and result.data["status"] == "timeout"
    assert "nobody answered within 0.3 s" in result.plain and "Do not ask this again" in result.plain
    assert took < 2


async def test_disconnect_mid_question_is_error_not_hang(tmp_path):
    port = QueuePort()
    async with tether.open_run(tmp_path, options={"ask_user_port": port}) as run:
        call = asyncio.create_task(run.call("ask_user", {"question": "Name?"}))
        await asyncio.wait_for(port.questions.get(), 5)
        port.disconnect("the chat window closed")
        result = await asyncio.wait_for(call, 5)
        assert result.is_error and result.data["status"] == "disconnected"
        assert "the chat window closed" in result.plain
        # later questions fail at once too
        again = await asyncio.wait_for(run.call("ask_user", {"question": "Name?"}), 5)
        assert again.data["status"] == "disconnected"


async def test_closing_the_run_releases_a_waiting_question(tmp_path):
    port = QueuePort()
    run_cm = tether.open_run(tmp_path, options={"ask_user_port": port})
    run = await run_cm.__aenter__()
    call = asyncio.create_task(run.call("ask_user", {"question": "Name?"}))
    await asyncio.wait_for(port.questions.get(), 5)
    await run_cm.__aexit__(None, None, None)
    result = await asyncio.wait_for(call, 5)
    assert result.is_error and "the run closed" in result.plain


async def test_callable_raising_disconnect(tmp_path):
    async def gone(q):
        raise PortDisconnected("no operator on shift")

    async with tether.open_run(tmp_path, options={"ask_user_port": gone}) as run:
        result = await run.call("ask_user", {"question": "Name?"})
    assert result.is_error and result.data["status"] == "disconnected"
    assert "no operator on shift" in result.plain


async def test_broken_port_fails_closed_without_traceback(tmp_path):
    async def broken(q):
        raise KeyError("session")

    async with tether.open_run(tmp_path, options={"ask_user_port": broken}) as run:
        result = await run.call("ask_user", {"question": "Name?"})
    assert_model_error(result, "the question port failed: KeyError")
    assert result.data["status"] == "failed"


@pytest.mark.parametrize(
    "answer, why",
    [
        (Answer.choose("MySQL"), "not options on the card"),
        (Answer.choose("Postgres", "SQLite"), "several options for a single-choice question"),
        ("Postgres", "not an Answer"),
    ],
)
async def test_answer_that_was_never_on_offer_fails_closed(tmp_path, answer, why):
    async def liar(q):
        return answer

    async with tether.open_run(tmp_path, options={"ask_user_port": liar}) as run:
        result = await run.call("ask_user", {"question": "Which?", "options": OPTIONS})
    assert result.is_error and result.data["status"] == "failed"
    assert why in result.plain


async def test_typed_text_when_free_text_not_allowed_fails_closed(tmp_path):
    async def typer(q):
        return Answer.typed("whatever")

    async with tether.open_run(tmp_path, options={"ask_user_port": typer}) as run:
        result = await run.call(
            "ask_user", {"question": "Which?", "options": OPTIONS, "allow_free_text": False}
        )
    assert result.is_error and "free text was not allowed" in result.plain


async def test_port_without_target_space_is_not_registered(tmp_path):
    async with tether.open_run(tmp_path, options={"ask_user_port": QueuePort(target=None)}) as run:
        assert "ask_user" not in [t.name for t in run.tools()]
        assert any(u.family == "askuser" and "no place to show a card" in u.reason for u in run.unavailable)
        result = await run.call("ask_user", {"question": "x"})
    assert result.is_error and "askuser: the question port has no place" in result.plain


async def test_not_registered_without_any_port(tmp_path):
    async with tether.open_run(tmp_path, options={"ask_user_terminal": False}) as run:
        assert "ask_user" not in [t.name for t in run.tools()]
        (reason,) = [u.reason for u in run.unavailable if u.family == "askuser"]
    assert "no human is reachable" in reason


async def test_bad_port_option_is_reported_not_raised(tmp_path):
    async with tether.open_run(tmp_path, options={"ask_user_port": 42}) as run:
        assert "ask_user" not in [t.name for t in run.tools()]
        (reason,) = [u.reason for u in run.unavailable if u.family == "askuser"]
    assert "askuser_port must be a question port or an async callable" in reason


async def test_harness_hook_with_tryfirst_overrides_the_port(tmp_path):
    calls = []

    class Harness:
        @tether.hookimpl(tryfirst=True)
        def tether_askuser_port(self, run):
            async def chat(q):
                calls.append(q.question)
                return Answer.typed("from the chat")

            from tether_askuser import CallbackPort

            return CallbackPort(chat, target="chat panel")

    async with tether.open_run(tmp_path, plugins=[Harness()], options={"ask_user_port": QueuePort()}) as run:
        result = await run.call("ask_user", {"question": "Hi?"})
    assert calls == ["Hi?"]
    assert result.data["port"] == "chat panel" and result.data["text"] == "from the chat"


async def test_sync_run_works_with_a_callable_port(tmp_path):
    async def human(q):
        return Answer.choose("Postgres")

    with tether.open_run_sync(tmp_path, options={"ask_user_port": human}) as run:
        result = run.call("ask_user", {"question": "Which?", "options": OPTIONS})
    assert result.data["selected"] == ["Postgres"]


async def test_progress_heartbeat_while_the_human_thinks(tmp_path):
    port = QueuePort()
    beats = []

    async def sink(done, total, message):
        beats.append((done, total, message))

    options = {"ask_user_port": port, "ask_user_timeout": 30, "ask_user_heartbeat": 0.05}
    async with tether.open_run(tmp_path, options=options) as run:
        call = asyncio.create_task(run.call("ask_user", {"question": "Name?"}, progress=sink))
        pending = await asyncio.wait_for(port.questions.get(), 5)
        async with asyncio.timeout(5):
            while len(beats) < 3:
                await asyncio.sleep(0.02)
        pending.type("x")
        await asyncio.wait_for(call, 5)
        count = len(beats)
        await asyncio.sleep(0.2)
    assert len(beats) == count  # the heartbeat stops with the answer
    assert beats[0][1] == 30 and beats[0][2] == "waiting for the human's answer (30 s left)"
    assert beats[-1][0] > beats[0][0]


def test_timeout_defaults_to_ten_minutes_and_zero_does_not_mean_forever():
    from tether_askuser.options import AskuserOptions as O
    from tether_askuser.port import timeout_of

    # a bad run option never gets here: the run refuses it when it opens (test_askuser_arguments)
    assert timeout_of(O()) == 600
    assert timeout_of(O(askuser_timeout=5)) == 5
    assert timeout_of(O(askuser_timeout=0)) == 600
    assert timeout_of(O(askuser_timeout=5), approval=True) == 5
    assert timeout_of(O(askuser_timeout=5, askuser_approval_timeout=2), approval=True) == 2


async def test_the_environment_stands_in_for_an_unset_timeout_and_a_run_option_wins(tmp_path, monkeypatch):
    from tether_askuser.options import AskuserOptions

    monkeypatch.setenv("TETHER_ASK_USER_TIMEOUT", "7")
    async with tether.open_run(tmp_path) as run:
        assert run.options.of(AskuserOptions).askuser_timeout == 7
    async with tether.open_run(tmp_path, options={"askuser_timeout": 3}) as run:
        assert run.options.of(AskuserOptions).askuser_timeout == 3
    async with tether.open_run(tmp_path, options={"askuser_timeout": None}) as run:  # null: the environment
        assert run.options.of(AskuserOptions).askuser_timeout == 7
    (tmp_path / "pyproject.toml").write_text("[tool.tether.askuser]\ntimeout = 4\n")
    async with tether.open_run(tmp_path) as run:  # the project's table, when it says, wins too
        assert run.options.of(AskuserOptions).askuser_timeout == 4


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        (
            "TETHER_ASK_USER_TIMEOUT",
            "soon",
            "run option askuser_timeout (from $TETHER_ASK_USER_TIMEOUT): expected number, got string 'soon'",
        ),
        (
            "TETHER_ASK_USER_TIMEOUT",
            "-1",
            "run option askuser_timeout (from $TETHER_ASK_USER_TIMEOUT): must be at least 0, got -1.0",
        ),
        (
            "TETHER_APPROVAL_BY_CARD",
            "write,wrte",
            "run option askuser_approval_by_card[1] (from $TETHER_APPROVAL_BY_CARD): "
            'expected one of "read", "write", "exec", got string \'wrte\'',
        ),
    ],
)
async def test_a_bad_environment_value_is_one_line_naming_the_variable(
    tmp_path, monkeypatch, variable, value, problem
):
    from tether.options import OptionsError

    monkeypatch.setenv(variable, value)
    with pytest.raises(OptionsError) as info:
        async with tether.open_run(tmp_path):
            pytest.fail("the run must not open")
    assert info.value.problems == [problem]
