"""The ask_user tool: arguments, description, and the handler that turns an outcome into a result."""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

import attrs
from tether import Tier, Tool, ToolError, ToolResult, arg

from tether_askuser.card import MAX_OPTIONS, InvalidQuestion, Question, make_question
from tether_askuser.options import AskuserOptions
from tether_askuser.port import Outcome, QuestionPort, ask_human, timeout_of

if TYPE_CHECKING:
    from tether.run import CallContext

DESCRIPTION = (
    "Ask the human a question and wait for the answer. This is the ONLY way to ask the human anything: "
    "never write a question as a chat message (that ends your turn, and nobody may be there to read it); "
    "call this tool instead. Ask when a decision depends on the human's intent or knowledge that the code, "
    "docs and tools cannot tell you; otherwise decide yourself. Give `options` (each {label, description?}) "
    "for known choices, `multi_select` to allow several, `allow_free_text` for a typed answer; put why you ask "
    "and what depends on it in `context`. The human sees a numbered card; the result gives the chosen labels "
    "exactly as you wrote them and any typed text, as JSON. If the human skips, go on under an assumption you "
    "state and do not ask again; if nobody answers in time, the call fails with the same instruction."
)


@attrs.frozen
class OptionArg:
    label: str = arg(
        "short text of the choice; it is what comes back when the human picks it",
        min_length=1,
        max_length=200,
    )
    description: str | None = arg(
        "what choosing it means, shown beside the label", default=None, max_length=1000
    )


@attrs.frozen
class AskUserArgs:
    question: str = arg(
        "the question, one clear sentence the human can answer", min_length=1, max_length=2000
    )
    context: str | None = arg(
        "why you ask and what depends on the answer (shown under the question)", default=None, max_length=8000
    )
    options: list[OptionArg] = arg(
        "choices to pick from, each {label, description?}; labels must be distinct",
        factory=list,
        max_items=MAX_OPTIONS,
    )
    allow_free_text: bool = arg(
        "whether the human may type an answer instead of (or without) picking", default=True
    )
    multi_select: bool = arg("whether several options may be chosen (needs options)", default=False)


def make_tools(port: QuestionPort) -> list[Tool]:
    """ask_user, bound to the run's question port."""

    async def handler(ctx: CallContext, args: AskUserArgs) -> ToolResult:
        try:
            question = make_question(
                args.question,
                args.context,
                [(o.label, o.description) for o in args.options],
                args.allow_free_text,
                args.multi_select,
            )
        except InvalidQuestion as exc:
            raise ToolError(str(exc), code="invalid_question") from None
        options = ctx.run.options.of(AskuserOptions)
        timeout = timeout_of(options)
        beat = None
        if not getattr(port, "owns_terminal", False):
            beat = asyncio.create_task(_heartbeat(ctx, timeout, options.askuser_heartbeat))
        try:
            outcome = await ask_human(port, question, timeout)
        finally:
            if beat is not None:
                beat.cancel()
        return result_for(question, outcome, port.target)

    return [
        Tool(
            name="ask_user",
            tier=Tier.READ,
            description=DESCRIPTION,
            args=AskUserArgs,
            handler=handler,
            parallel_safe=True,
        )
    ]


async def _heartbeat(ctx: CallContext, timeout: float, every: float) -> None:
    """Progress while the human thinks: clients see the call alive (some reset their request timeout on it).

    Not for the terminal port: `tether call` draws progress on the same terminal, over the prompt.
    """
    every = max(every, 0.05)
    start = time.monotonic()
    while True:
        waited = time.monotonic() - start
        await ctx.progress(
            round(waited, 1), timeout, f"waiting for the human's answer ({timeout - waited:.0f} s left)"
        )
        await asyncio.sleep(every)


GO_ON = "Do not ask this again: go on under an assumption you state explicitly in your next message."


def result_for(question: Question, outcome: Outcome, target: str | None) -> ToolResult:
    data: dict[str, Any] = {"status": outcome.status, "selected": [], "text": None, "port": target}
    if outcome.status == "answered":
        answer = outcome.answer
        assert answer is not None
        data.update(selected=list(answer.selected), text=answer.text)
        lines = ["The human answered."]
        if question.options:
            how = "chosen option labels" if question.multi_select else "chosen option label"
            lines.append(
                f"Selected ({how}, JSON list): {json.dumps(list(answer.selected), ensure_ascii=False)}"
            )
        if answer.text is not None:
            lines.append(f"Typed answer (JSON string): {json.dumps(answer.text, ensure_ascii=False)}")
        elif question.allow_free_text:
            lines.append("Typed answer: none")
        return ToolResult.text("\n".join(lines), data)
    if outcome.status == "skipped":
        return ToolResult.text(f"The human skipped this question. {GO_ON}", data)
    data["error"] = outcome.status
    if outcome.status == "timeout":
        return ToolResult.error(f"No answer: {outcome.detail}. {GO_ON}", data)
    return ToolResult.error(
        f"No answer: {outcome.detail}. Nobody can answer right now. {GO_ON} "
        "If the work cannot go on safely under any assumption, stop and say what you need.",
        data,
    )
