"""The MCP elicitation port: the card goes to the client as an ``elicitation/create`` form.

`tether serve` answers the core's host hook `tether.hookspecs.tether_elicitation` with ``elicit(message,
requested_schema) -> (action, content)`` only when the client declared the ``elicitation`` capability, so
this port exists exactly when there is a client that can show the card. accept -> answer; decline and cancel -> skip. The
content is checked against the card afterwards (a client may send anything).
"""

from __future__ import annotations

from typing import Any

from tether.hookspecs import Elicit

from tether_askuser.card import Answer, Question
from tether_askuser.port import PortDisconnected

CHOICE = "choice"
CHOICES = "choices"
TEXT = "answer"


def elicitation_message(question: Question) -> str:
    """The question and its context; the numbered options are the form's own fields."""
    title = "Permission needed: " if question.kind == "approval" else ""
    return f"{title}{question.question}" + (f"\n\n{question.context}" if question.context else "")


def requested_schema(question: Question) -> dict[str, Any]:
    """A flat form (the only shape elicitation allows): the options as an enum, free text as a string."""
    props: dict[str, Any] = {}
    required: list[str] = []
    titled = [
        {"const": c.label, "title": f"{i}. {c.label}" + (f" - {c.description}" if c.description else "")}
        for i, c in enumerate(question.options, 1)
    ]
    if question.options and question.multi_select:
        props[CHOICES] = {"type": "array", "title": "Choose one or more", "items": {"anyOf": titled}}
        if not question.allow_free_text:
            props[CHOICES]["minItems"] = 1
            required.append(CHOICES)
    elif question.options:
        props[CHOICE] = {"type": "string", "title": "Choose one", "oneOf": titled}
        if not question.allow_free_text:
            required.append(CHOICE)
    if question.allow_free_text:
        title = "Or type your own answer" if question.options else "Your answer"
        props[TEXT] = {"type": "string", "title": title}
        if not question.options:
            required.append(TEXT)
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


class ElicitationPort:
    target = "MCP client (elicitation)"

    def __init__(self, elicit: Elicit) -> None:
        self._elicit = elicit

    async def ask(self, question: Question) -> Answer:
        try:
            reply = await self._elicit(elicitation_message(question), requested_schema(question))
        except Exception as exc:  # any failure of the request means no human answered
            raise PortDisconnected(
                f"the MCP client did not answer the elicitation ({type(exc).__name__}: {exc})"
            ) from exc
        try:
            action, content = reply
        except (TypeError, ValueError):
            raise PortDisconnected(f"the elicitation returned {reply!r}, not (action, content)") from None
        if action in ("decline", "cancel"):
            return Answer.skip()
        if action != "accept":
            raise PortDisconnected(f"the MCP client answered with unknown action {action!r}")
        content = content or {}
        if not isinstance(content, dict):
            raise ValueError(f"the MCP client accepted with content {content!r}, not an object")
        selected: list[str] = []
        if CHOICE in content and content[CHOICE] not in (None, ""):
            selected.append(content[CHOICE])
        picks = content.get(CHOICES)
        if isinstance(picks, list):
            selected.extend(picks)
        elif picks not in (None, ""):
            raise ValueError(f"the MCP client sent {CHOICES}={picks!r}, not a list of labels")
        text = content.get(TEXT)
        if text is not None and not isinstance(text, str):
            raise ValueError(f"the MCP client sent {TEXT}={text!r}, not text")
        return Answer("answer", tuple(selected), text)
