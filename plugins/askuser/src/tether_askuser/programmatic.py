"""Ports for harnesses and tests: an async callable, or a queue the harness serves.

Pass one as the run option ``askuser_port`` (an async callable ``fn(question) -> Answer`` is
wrapped in `CallbackPort`), or return one from your own ``tether_askuser_port`` hook implementation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import attrs

from tether_askuser.card import Answer, Question
from tether_askuser.port import PortDisconnected


class CallbackPort:
    """Each question is one awaited call of ``fn``; raise `PortDisconnected` from it when nobody is there."""

    def __init__(self, fn: Callable[[Question], Awaitable[Answer]], target: str | None = "harness") -> None:
        self._fn = fn
        self.target = target

    async def ask(self, question: Question) -> Answer:
        return await self._fn(question)


@attrs.define(eq=False)
class PendingQuestion:
    """A question waiting in a `QueuePort`: answer it with `answer()` / `skip()`."""

    question: Question
    _future: asyncio.Future = attrs.field(repr=False)

    def answer(self, answer: Answer) -> None:
        if not self._future.done():
            self._future.set_result(answer)

    def choose(self, *labels: str, text: str | None = None) -> None:
        self.answer(Answer.choose(*labels, text=text))

    def type(self, text: str) -> None:
        self.answer(Answer.typed(text))

    def skip(self) -> None:
        self.answer(Answer.skip())

    @property
    def done(self) -> bool:
        return self._future.done()


class QueuePort:
    """Questions arrive on ``questions`` (an asyncio.Queue of `PendingQuestion`) for the harness to serve.

    ``disconnect()`` (also called when the run closes) fails every waiting and future question, so a
    harness whose human left never leaves a call blocked.
    """

    def __init__(self, target: str | None = "harness") -> None:
        self.target = target
        self.questions: asyncio.Queue[PendingQuestion] = asyncio.Queue()
        self._waiting: set[PendingQuestion] = set()
        self._gone: str | None = None

    async def ask(self, question: Question) -> Answer:
        if self._gone is not None:
            raise PortDisconnected(self._gone)
        pending = PendingQuestion(question, asyncio.get_running_loop().create_future())
        self._waiting.add(pending)
        try:
            self.questions.put_nowait(pending)
            return await pending._future
        finally:
            self._waiting.discard(pending)

    def disconnect(self, reason: str = "the harness disconnected the human") -> None:
        self._gone = reason
        for pending in list(self._waiting):
            if not pending._future.done():
                pending._future.set_exception(PortDisconnected(reason))

    def close(self) -> None:
        self.disconnect("the run closed")
