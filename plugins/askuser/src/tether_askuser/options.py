"""Run options of the askuser family (the old names without the family prefix still work, deprecated)."""

from __future__ import annotations

from typing import Any

import attrs
from tether import Tier, arg

# where the command line is not yours to change (a `tether serve` an MCP client starts), these stand in
# for askuser_timeout and askuser_approval_by_card; a run option or the project's table, when given, wins
ENV_TIMEOUT = "TETHER_ASK_USER_TIMEOUT"
ENV_APPROVAL = "TETHER_APPROVAL_BY_CARD"


def approval_from_text(text: str) -> Any:
    """``TETHER_APPROVAL_BY_CARD``'s text: ``1`` (or true, yes, on, all) for every tool, ``0`` (or false, no,
    off) for none, else tiers separated by commas (``write,exec``)."""
    raw = text.strip().lower()
    if raw in {"0", "false", "no", "off"}:
        return False
    if raw in {"1", "true", "yes", "on", "all"}:
        return True
    return [t.strip() for t in raw.split(",") if t.strip()]


@attrs.frozen
class AskuserOptions:
    askuser_port: Any = arg(
        "the harness's question port: a port object or an async callable (Python API only)", default=None
    )
    askuser_terminal: bool | None = arg(
        "show cards on the controlling terminal: true, false, or null for only when stdin is a terminal",
        default=None,
    )
    askuser_timeout: float | None = arg(
        "seconds a question waits (null: $TETHER_ASK_USER_TIMEOUT, else 600)",
        default=None,
        minimum=0,
        env=ENV_TIMEOUT,
    )
    askuser_heartbeat: float = arg(
        "seconds between progress reports while a question waits (not on the terminal)",
        default=15.0,
        minimum=0,
    )
    askuser_approval_by_card: bool | Tier | list[Tier] | None = arg(
        'ask the human before each call: true for every tool, or a tier or list of tiers such as ["write", "exec"] '
        "(null: $TETHER_APPROVAL_BY_CARD, else off)",
        default=None,
        env=ENV_APPROVAL,
        env_parse=approval_from_text,
    )
    askuser_approval_timeout: float | None = arg(
        "seconds an approval card waits (null: askuser_timeout)", default=None, minimum=0
    )


DEPRECATED = {
    "ask_user_port": "askuser_port",
    "ask_user_terminal": "askuser_terminal",
    "ask_user_timeout": "askuser_timeout",
    "ask_user_heartbeat": "askuser_heartbeat",
    "approval_by_card": "askuser_approval_by_card",
    "approval_timeout": "askuser_approval_timeout",
}
