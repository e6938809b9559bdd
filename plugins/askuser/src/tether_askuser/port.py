"""The question port: where a card goes and an answer comes from, and the one bounded way to use it.

A port has a ``target`` (the place the card is shown - a terminal, a chat, an MCP client - or None
when there is no such place right now) and ``async ask(question) -> Answer``. It raises
`PortDisconnected` when the human side goes away mid-question. Every use goes through `ask_human`,
which bounds the wait and fails closed: a timeout, a disconnect, a port that breaks, or an answer
that was never on offer all come back as an `Outcome` that is not an answer.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Literal, Protocol, runtime_checkable

import attrs

from tether_askuser.card import Answer, Question, check_answer
from tether_askuser.options import AskuserOptions

log = logging.getLogger("tether.askuser")

DEFAULT_TIMEOUT = 600.0


class PortDisconnected(Exception):
    """The human side went away (terminal hung up, client gone) before answering."""


@runtime_checkable
class QuestionPort(Protocol):
    """Where a card goes and its answer comes from (a terminal, a chat, an MCP client).

    Attributes:
        target: the place the card is shown, named for the model; None when there is no such place
            right now.
    """

    target: str | None

    async def ask(self, question: Question) -> Answer:
        """Show the card and return the human's answer; raise `PortDisconnected` when the human side goes away."""
        ...


@attrs.frozen
class Outcome:
    status: Literal["answered", "skipped", "timeout", "disconnected", "failed"]
    answer: Answer | None = None
    detail: str = ""


def timeout_of(options: AskuserOptions, *, approval: bool = False) -> float:
    """The run's wait bound in seconds: the run option (or ``$TETHER_ASK_USER_TIMEOUT``, the option's
    declared environment source, read when the run opened), else the default; 0 is the default too,
    never a wait without end.

    The environment variable covers runs whose command line is not yours to change (a `tether serve`
    an MCP client starts); `tether call` and `tether serve` also take ``--option askuser_timeout=N``.
    """
    given = options.askuser_approval_timeout if approval else None
    if given is None:
        given = options.askuser_timeout
    if given is None or given <= 0:
        return DEFAULT_TIMEOUT
    return float(given)


async def ask_human(port: QuestionPort, question: Question, timeout: float) -> Outcome:
    """Put the card to the human through ``port``; never raises, never waits longer than ``timeout``."""
    try:
        async with asyncio.timeout(timeout):  # no extra task, unlike wait_for: cheaper on the approval path
            raw = await port.ask(question)
    except TimeoutError:
        return Outcome("timeout", detail=f"nobody answered within {timeout:g} s")
    except PortDisconnected as exc:
        return Outcome("disconnected", detail=str(exc) or "the human side disconnected")
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a broken port refuses (fail closed), the log keeps the traceback
        log.warning("question port %r failed", getattr(port, "target", port), exc_info=True)
        return Outcome("failed", detail=f"the question port failed: {type(exc).__name__}: {exc}")
    try:
        answer = check_answer(question, raw)
    except ValueError as exc:
        return Outcome(
            "failed", detail=f"the question port returned an answer that does not fit the card: {exc}"
        )
    return Outcome("skipped" if answer.action == "skip" else "answered", answer)
