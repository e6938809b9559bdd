"""Approval by card: the core's permission gate answered through the run's question port, fail-closed."""

from __future__ import annotations

import asyncio

import pytest
import tether
import tether.files
from tether.options import OptionsError
from tether_askuser import Answer, PortDisconnected, QueuePort

WRITE = {"path": "notes.txt", "content": "hello\n"}


def opened(tmp_path, **options):
    return tether.open_run(tmp_path, plugins=[tether.files], options=options)


async def answered_by(tmp_path, answer_fn, **options):
    """Call `write` with approval by card on; the human's card goes to ``answer_fn``."""
    cards = []

    async def human(q):
        cards.append(q)
        return await answer_fn(q)

    async with opened(tmp_path, ask_user_port=human, approval_by_card=True, **options) as run:
        result = await run.call("write", WRITE)
    return result, cards


async def test_allow_runs_the_call(tmp_path):
    async def allow(q):
        return Answer.choose("Allow")

    result, cards = await answered_by(tmp_path, allow)
    assert not result.is_error, result.plain
    assert (tmp_path / "notes.txt").read_text() == "hello\n"
    (card,) = cards
    assert card.kind == "approval"
    assert card.question == "Allow the agent to call write (write)?"
    assert '"path": "notes.txt"' in card.context and card.labels == ("Allow", "Deny", "Always allow")


@pytest.mark.parametrize(
    "answer, said",
    [
        (Answer.choose("Deny"), "the human refused it"),
        (Answer.typed("not that file"), 'the human refused it and said: "not that file"'),
        (Answer.choose("Allow", text="but carefully"), 'refused it and said: "but carefully"'),
        (Answer.skip(), "skipped the approval card (skipping refuses)"),
    ],
)
async def test_anything_but_a_plain_allow_refuses(tmp_path, answer, said):
    async def human(q):
        return answer

    result, _ = await answered_by(tmp_path, human)
    assert result.is_error and result.data == {"error": "refused"}
    assert said in result.plain and "Do not retry it unchanged" in result.plain
    assert not (tmp_path / "notes.txt").exists()


async def test_timeout_refuses(tmp_path):
    async def asleep(q):
        await asyncio.sleep(30)

    result, _ = await answered_by(tmp_path, asleep, approval_timeout=0.2)
    assert result.is_error and "nobody answered within 0.2 s" in result.plain
    assert not (tmp_path / "notes.txt").exists()


async def test_disconnect_refuses(tmp_path):
    async def gone(q):
        raise PortDisconnected("the terminal hung up")

    result, _ = await answered_by(tmp_path, gone)
    assert result.is_error and "the terminal hung up" in result.plain
    assert not (tmp_path / "notes.txt").exists()


async def test_no_port_refuses_instead_of_allowing(tmp_path):
    async with opened(tmp_path, approval_by_card=True, ask_user_terminal=False) as run:
        result = await run.call("write", WRITE)
    assert result.is_error and "no human is connected" in result.plain
    assert not (tmp_path / "notes.txt").exists()


async def test_off_by_default(tmp_path):
    port = QueuePort()
    async with opened(tmp_path, ask_user_port=port) as run:
        result = await run.call("write", WRITE)
    assert not result.is_error and port.questions.empty()


async def test_tier_list_gates_only_those_tiers_and_never_ask_user(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    port = QueuePort()
    async with opened(tmp_path, ask_user_port=port, approval_by_card=["write"], ask_user_timeout=5) as run:
        read = await run.call("read", {"path": "a.txt"})
        assert not read.is_error and port.questions.empty()
        ask = asyncio.create_task(run.call("ask_user", {"question": "Name?"}))
        pending = await asyncio.wait_for(port.questions.get(), 5)
        assert pending.question.kind == "question"  # no approval card before the question itself
        pending.type("x")
        assert (await ask).data["text"] == "x"
        write = asyncio.create_task(run.call("write", WRITE))
        card = await asyncio.wait_for(port.questions.get(), 5)
        assert card.question.kind == "approval"
        card.choose("Allow")
        assert not (await write).is_error


@pytest.mark.parametrize("setting, gated", [("write", True), (["exec"], False), (False, False)])
async def test_tier_settings(tmp_path, setting, gated):
    async def deny(q):
        return Answer.choose("Deny")

    async with opened(tmp_path, ask_user_port=deny, askuser_approval_by_card=setting) as run:
        result = await run.call("write", WRITE)
    assert result.is_error is gated
    assert (tmp_path / "notes.txt").exists() is not gated


async def test_an_unreadable_tier_setting_stops_the_run_at_open(tmp_path):
    # the options are structured when the run opens: a misspelled tier never gets as far as a call
    with pytest.raises(OptionsError, match="askuser_approval_by_card") as info:
        async with opened(tmp_path, askuser_approval_by_card=["wirte"]):
            pass
    assert len(info.value.problems) == 1


async def test_always_allow_lets_later_calls_of_that_tool_through_for_this_run_only(tmp_path):
    port = QueuePort()
    async with opened(tmp_path, ask_user_port=port, approval_by_card=True) as run:
        first = asyncio.create_task(run.call("write", WRITE))
        (await asyncio.wait_for(port.questions.get(), 5)).choose("Always allow")
        assert not (await first).is_error
        again = await asyncio.wait_for(run.call("write", {"path": "more.txt", "content": "y"}), 5)
        assert not again.is_error and port.questions.empty()
        # another tool still needs its own card
        other = asyncio.create_task(
            run.call("edit", {"path": "more.txt", "old_string": "y", "new_string": "z"})
        )
        card = await asyncio.wait_for(port.questions.get(), 5)
        assert card.question.question.startswith("Allow the agent to call edit")
        card.choose("Deny")
        assert (await other).is_error
    async with opened(
        tmp_path, ask_user_port=QueuePort(), approval_by_card=True, approval_timeout=0.2
    ) as run:
        fresh = await run.call("write", WRITE)  # a new run asks again (and nobody answers here)
    assert fresh.is_error and "nobody answered" in fresh.plain


@pytest.mark.parametrize(
    "env, gated", [("1", True), ("write,exec", True), ("exec", False), ("0", False), ("", False)]
)
async def test_environment_switch_for_the_commands(tmp_path, monkeypatch, env, gated):
    async def deny(q):
        return Answer.choose("Deny")

    monkeypatch.setenv("TETHER_APPROVAL_BY_CARD", env)
    async with tether.open_run(tmp_path, plugins=[tether.files], options={"ask_user_port": deny}) as run:
        result = await run.call("write", WRITE)
    assert result.is_error is gated


async def test_run_option_wins_over_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TETHER_APPROVAL_BY_CARD", "1")

    async def deny(q):
        return Answer.choose("Deny")

    async with opened(tmp_path, ask_user_port=deny, approval_by_card=False) as run:
        assert not (await run.call("write", WRITE)).is_error
