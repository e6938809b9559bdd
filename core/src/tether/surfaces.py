"""Surfaces: who sees which tiers. Plan mode and read-only subagents see read tools only."""

from __future__ import annotations

import attrs

from tether.tools import Tier


@attrs.frozen
class Surface:
    name: str
    tiers: frozenset[Tier] = attrs.field(converter=lambda ts: frozenset(Tier(t) for t in ts))

    def allows(self, tier: Tier) -> bool:
        return tier in self.tiers


BUILTIN_SURFACES = {
    "full": Surface("full", {Tier.READ, Tier.WRITE, Tier.EXEC}),
    "plan": Surface("plan", {Tier.READ}),
    "readonly": Surface("readonly", {Tier.READ}),
}
