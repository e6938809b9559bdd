"""Surfaces: who sees which tiers. Plan mode and read-only subagents see read tools only."""

from __future__ import annotations

import attrs

from tether.tools import Tier


@attrs.frozen
class Surface:
    """Who sees which tools: a name and the tiers its tools may have.

    Attributes:
        name: what ``--surface`` and ``open_run(surface=...)`` take (built in: full, plan, readonly).
        tiers: the tiers visible on it (strings or `Tier` members).
    """

    name: str
    tiers: frozenset[Tier] = attrs.field(converter=lambda ts: frozenset(Tier(t) for t in ts))

    def allows(self, tier: Tier) -> bool:
        return tier in self.tiers


BUILTIN_SURFACES = {
    "full": Surface("full", {Tier.READ, Tier.WRITE, Tier.EXEC}),
    "plan": Surface("plan", {Tier.READ}),
    "readonly": Surface("readonly", {Tier.READ}),
}
