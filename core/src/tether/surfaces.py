"""Surfaces: who sees which tiers. Plan mode and read-only subagents see read tools only."""

from __future__ import annotations

import attrs

from tether.tools import Tier


def _names(names) -> frozenset[str] | None:
    if names is None:
        return None
    if isinstance(names, str):  # one name, not its letters
        raise ValueError(f"listed takes a set of tool names, not the string {names!r}")
    return frozenset(names)


def _tool_names(instance, attribute, value) -> None:
    if value is not None and not all(isinstance(n, str) and n for n in value):
        raise ValueError(f"surface {instance.name!r}: listed takes tool names (non-empty strings)")


@attrs.frozen
class Surface:
    """Who sees which tools: a name, the tiers its tools may have, and which of them the model is shown.

    Attributes:
        name: what ``--surface`` and ``open_run(surface=...)`` take (built in: full, plan, readonly).
        tiers: the tiers visible on it (strings or `Tier` members): its tools are the run's tools of
            these tiers, and only they can be called, by the model or from a cell.
        listed: the names of the tools listed to the model (MCP ``tools/list``, `tether tools`, the
            framework adapters); None: all of them. The surface's other tools are not listed but stay
            callable: from an `eval` cell's ``tools`` object (``tools.help()`` shows them), or by name.
            A harness that offers its model few tools (``listed={"eval", "read"}``) lets cells reach
            the rest. A name no tool of the surface has lists nothing.
    """

    name: str
    tiers: frozenset[Tier] = attrs.field(converter=lambda ts: frozenset(Tier(t) for t in ts))
    listed: frozenset[str] | None = attrs.field(
        default=None, kw_only=True, converter=_names, validator=_tool_names
    )

    def allows(self, tier: Tier) -> bool:
        return tier in self.tiers

    def lists(self, name: str) -> bool:
        """Whether the model is shown the surface's tool ``name`` (it is callable either way)."""
        return self.listed is None or name in self.listed


BUILTIN_SURFACES = {
    "full": Surface("full", {Tier.READ, Tier.WRITE, Tier.EXEC}),
    "plan": Surface("plan", {Tier.READ}),
    "readonly": Surface("readonly", {Tier.READ}),
}
