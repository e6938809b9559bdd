"""tether family askuser: ask_user, the only way a run asks a human, fail-closed.

Harnesses: pass ``options={"askuser_port": port_or_async_callable}`` to a run; see `Answer`,
`Question`, `QueuePort`, `CallbackPort`, `PortDisconnected`. Names are imported on first use so the
entry point (`tether_askuser.plugin`) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names for type checkers; at run time __getattr__ imports them on first use
    from tether_askuser.card import Answer, Choice, Question
    from tether_askuser.port import PortDisconnected, QuestionPort
    from tether_askuser.programmatic import CallbackPort, PendingQuestion, QueuePort

_HOME = {
    "Answer": "card",
    "Choice": "card",
    "Question": "card",
    "PortDisconnected": "port",
    "QuestionPort": "port",
    "CallbackPort": "programmatic",
    "PendingQuestion": "programmatic",
    "QueuePort": "programmatic",
}

__all__ = [
    "Answer",
    "CallbackPort",
    "Choice",
    "PendingQuestion",
    "PortDisconnected",
    "Question",
    "QuestionPort",
    "QueuePort",
]


def __getattr__(name: str):
    if name in _HOME:
        import importlib

        return getattr(importlib.import_module(f"tether_askuser.{_HOME[name]}"), name)
    raise AttributeError(name)
