"""What is asked and what comes back: the card, the answer, and their checks and renderings.

Plain value classes shared by every port: a port shows a `Question` somewhere and returns an
`Answer`; the tool checks the answer against the question before the model sees it, so a port (or a
client) that returns something that was never on offer fails closed instead of misleading the model.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import attrs

MAX_OPTIONS = 20


@attrs.frozen
class Choice:
    """One option on the card.

    Attributes:
        label: what is shown, and what comes back in `Answer.selected`.
        description: an optional explanation shown with it.
    """

    label: str
    description: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "description": self.description}


@attrs.frozen
class Question:
    """The card a port shows: the question, its options, and what kind of answer is allowed.

    Attributes:
        question: the question itself.
        context: what the human needs to know to answer, shown under the question.
        options: the choices on offer (`Choice`), in order.
        allow_free_text: whether the human may type an answer of their own.
        multi_select: whether several options may be chosen.
        kind: "question" (the model asks) or "approval" (a call waits for permission).
    """

    question: str
    context: str | None = None
    options: tuple[Choice, ...] = attrs.field(default=(), converter=tuple)
    allow_free_text: bool = True
    multi_select: bool = False
    kind: Literal["question", "approval"] = "question"

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(o.label for o in self.options)

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "context": self.context,
            "options": [o.to_json() for o in self.options],
            "allow_free_text": self.allow_free_text,
            "multi_select": self.multi_select,
            "kind": self.kind,
        }

    def how_to_answer(self) -> str:
        """The line under the card that says what may be typed (terminal)."""
        parts = []
        n = len(self.options)
        if n:
            if self.multi_select:
                parts.append(f"numbers 1-{n}, several separated by commas (e.g. 1,3)")
            else:
                parts.append(f"a number 1-{n}" if n > 1 else "1")
        if self.allow_free_text:
            parts.append("your own answer as text" if n else "your answer")
        parts.append("s to skip")
        return "Type " + ", or ".join(parts) + ", then Enter."


@attrs.frozen
class Answer:
    """What the human did: answered (chosen labels and/or typed text) or skipped.

    Build one with ``Answer.choose(*labels, text=None)``, ``Answer.typed(text)`` or ``Answer.skip()``.

    Attributes:
        action: "answer" or "skip".
        selected: the labels of the chosen options.
        text: the typed answer, if any.
    """

    action: Literal["answer", "skip"]
    selected: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    text: str | None = None

    @classmethod
    def choose(cls, *labels: str, text: str | None = None) -> Answer:
        return cls("answer", labels, text)

    @classmethod
    def typed(cls, text: str) -> Answer:
        return cls("answer", (), text)

    @classmethod
    def skip(cls) -> Answer:
        return cls("skip")


class InvalidQuestion(ValueError):
    """The model's question cannot be put to a human as given; the message names the fix."""


def _norm(label: str) -> str:
    return " ".join(label.split()).casefold()


def make_question(
    question: str,
    context: str | None,
    options: list[tuple[str, str | None]],
    allow_free_text: bool,
    multi_select: bool,
) -> Question:
    """Check the semantics the schema cannot express and build the card."""
    if not question.strip():
        raise InvalidQuestion(
            "question is empty; write the question the human should answer, e.g. 'Which database should the service use?'"
        )
    if multi_select and not options:
        raise InvalidQuestion(
            "multi_select needs options to choose from; give options (each {label, description?}) or set multi_select to false"
        )
    if not options and not allow_free_text:
        raise InvalidQuestion(
            "the human could not answer: there are no options and allow_free_text is false; give options (each "
            "{label, description?}) or set allow_free_text to true"
        )
    seen: dict[str, int] = {}
    choices = []
    for i, (label, description) in enumerate(options):
        if not label.strip():
            raise InvalidQuestion(
                f"options[{i}].label is empty; every option needs a short label the human can pick"
            )
        key = _norm(label)
        if key in seen:
            raise InvalidQuestion(
                f"options[{i}].label {json.dumps(label)} duplicates options[{seen[key]}].label; labels must be distinct "
                "(they are what comes back as the answer), so rename or drop one"
            )
        seen[key] = i
        desc = description.strip() if description and description.strip() else None
        choices.append(Choice(label.strip(), desc))
    ctx = context.strip() if context and context.strip() else None
    return Question(question.strip(), ctx, tuple(choices), allow_free_text, multi_select)


def check_answer(question: Question, answer: Any) -> Answer:
    """The answer if it fits the question; otherwise ValueError naming what the port got wrong."""
    if not isinstance(answer, Answer):
        raise ValueError(f"the port returned {type(answer).__name__}, not an Answer")
    if answer.action == "skip":
        return Answer.skip()
    if answer.action != "answer":
        raise ValueError(f"unknown answer action {answer.action!r}")
    text = answer.text.strip() if isinstance(answer.text, str) and answer.text.strip() else None
    unknown = [s for s in answer.selected if s not in question.labels]
    if unknown:
        raise ValueError(f"the answer chose {json.dumps(unknown)}, which are not options on the card")
    if len(set(answer.selected)) != len(answer.selected):
        raise ValueError("the answer chose the same option twice")
    if len(answer.selected) > 1 and not question.multi_select:
        raise ValueError("the answer chose several options for a single-choice question")
    if text is not None and not question.allow_free_text:
        raise ValueError("the answer carries typed text but free text was not allowed")
    if not answer.selected and text is None:
        # an accepted but empty form: the human gave nothing, which is a skip
        return Answer.skip()
    # keep the card's order, not the order of picking: stable for the model
    ordered = tuple(label for label in question.labels if label in answer.selected)
    return Answer("answer", ordered, text)


# -- rendering ------------------------------------------------------------------------------------


def render_card(question: Question, width: int = 78) -> str:
    """The numbered card as plain text (the terminal shows it; elicitation sends it as the message)."""
    title = "Permission needed" if question.kind == "approval" else "The agent asks"
    lines = [f"== {title} " + "=" * max(4, width - len(title) - 4), question.question]
    if question.context:
        lines += ["", *question.context.splitlines()]
    if question.options:
        lines.append("")
        for i, choice in enumerate(question.options, 1):
            lines.append(
                f"  {i}. {choice.label}" + (f" - {choice.description}" if choice.description else "")
            )
        if question.multi_select:
            lines.append("  (several may be chosen)")
    return "\n".join(lines)


NUMBERS = re.compile(r"^\s*\d+(\s*[,\s]\s*\d+)*\s*$")


def parse_typed(question: Question, line: str) -> Answer | str:
    """A line typed at the terminal -> an Answer, or a one-line hint to show before asking again."""
    raw = line.strip()
    n = len(question.options)
    if not raw:
        return question.how_to_answer()
    if raw.lower() in {"s", "skip"}:
        return Answer.skip()
    if n and NUMBERS.match(raw):
        picks = [int(p) for p in re.split(r"[,\s]+", raw) if p]
        bad = [p for p in picks if not 1 <= p <= n]
        if bad:
            return f"No option {bad[0]}: choose between 1 and {n}."
        picks = list(dict.fromkeys(picks))
        if len(picks) > 1 and not question.multi_select:
            return "Choose one option only."
        return Answer.choose(*(question.options[p - 1].label for p in picks))
    if question.allow_free_text:
        return Answer.typed(raw)
    return f"Not a choice. {question.how_to_answer()}"
