"""Approval by card: the core's permission gate answered by the human through the run's question port.

Switched on by the run option ``askuser_approval_by_card``: true for every tool, or a list of tiers
(e.g. ``["write", "exec"]``). Fail-closed: no port, a timeout, a disconnect or a skip refuses the call.
The environment variable ``TETHER_APPROVAL_BY_CARD`` (``1`` or ``write,exec``), the option's declared
environment source, switches it on where the command line is not yours to change (a `tether serve` an
MCP client starts); the `tether` commands also take ``--option askuser_approval_by_card=...``. "Always allow" lets every later call of that tool through for
the rest of the run, without a card.
"""

from __future__ import annotations

import json
import weakref
from typing import TYPE_CHECKING, Any

from tether_askuser.card import Choice, Question
from tether_askuser.hookspecs import tether_askuser_port
from tether_askuser.options import AskuserOptions
from tether_askuser.port import ask_human, timeout_of

if TYPE_CHECKING:
    from tether.run import Run
    from tether.tools import Tool

ALLOW = "Allow"
DENY = "Deny"
ALWAYS = "Always allow"
MAX_ARGS_CHARS = 1500

# tools the human allowed for the rest of a run; dies with the run
_always: weakref.WeakKeyDictionary[Run, set[str]] = weakref.WeakKeyDictionary()


def wants_card(run: Run, tool: Tool) -> bool:
    # the run option, else the project's table, else $TETHER_APPROVAL_BY_CARD (read when the run opened)
    setting = run.options.of(AskuserOptions).askuser_approval_by_card
    if not setting or tool.name == "ask_user":  # asking the human needs no permission to ask the human
        return False
    if tool.name in _always.get(run, ()):
        return False
    if isinstance(setting, str):
        setting = [setting]
    if isinstance(setting, (list, tuple, set, frozenset)):
        tiers = {str(getattr(t, "value", t)) for t in setting}
        known = {"read", "write", "exec"}
        # a setting we cannot read gates everything rather than nothing (fail closed)
        return tool.tier.value in tiers if tiers <= known else True
    return bool(setting)


def approval_question(tool: Tool, arguments: dict[str, Any]) -> Question:
    shown = json.dumps(arguments, ensure_ascii=False, indent=1, default=str)
    if len(shown) > MAX_ARGS_CHARS:
        shown = shown[:MAX_ARGS_CHARS] + f"\n[arguments cut: {len(shown):,} characters in all]"
    first = tool.description.split(". ")[0].strip().rstrip(".")
    return Question(
        question=f"Allow the agent to call {tool.name} ({tool.tier.value})?",
        context=f"{tool.name}: {first}.\nArguments:\n{shown}",
        options=(
            Choice(ALLOW, "run this call"),
            Choice(DENY, "refuse this call"),
            Choice(ALWAYS, f"run this and every later {tool.name} call in this run without asking"),
        ),
        allow_free_text=True,  # typed text refuses and tells the agent why
        kind="approval",
    )


async def approve_by_card(run: Run, tool: Tool, arguments: dict[str, Any]) -> bool | str:
    port = run.resource(tether_askuser_port)
    if port is None or getattr(port, "target", None) is None:
        return "approval by card is on but no human is connected to this run to approve it"
    outcome = await ask_human(
        port, approval_question(tool, arguments), timeout_of(run.options.of(AskuserOptions), approval=True)
    )
    if outcome.status == "answered":
        answer = outcome.answer
        assert answer is not None
        if answer.selected == (ALLOW,) and answer.text is None:
            return True
        if answer.selected == (ALWAYS,) and answer.text is None:
            _always.setdefault(run, set()).add(tool.name)
            return True
        if answer.text is not None:
            return f"the human refused it and said: {json.dumps(answer.text, ensure_ascii=False)}"
        return "the human refused it"
    if outcome.status == "skipped":
        return "the human skipped the approval card (skipping refuses)"
    return f"no approval ({outcome.detail}); approval by card refuses when nobody answers"
