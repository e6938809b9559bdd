"""Diagnostics as the core sees them, and the per-run registry that decides what a write introduced.

A diagnostic's identity is (file, severity, code, message) with multiplicity. Position is left out
on purpose: an error that only moved (a line inserted above it) is not new. A diagnostic that is
gone from a file's latest set leaves the registry, so bringing it back reports it again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

SEVERITY_ORDER = {"error": 0, "warning": 1, "information": 2, "hint": 3}


@attrs.frozen
class Diagnostic:
    file: str  # relative to the run's root
    line: int  # 1-based
    column: int  # 1-based
    severity: str  # error | warning | information | hint
    message: str
    code: str | None = None
    source: str | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        """Sortable: a diagnostic without a code has the code ""."""
        return (self.file, self.severity, self.code or "", self.message)

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    def render(self) -> str:
        code = f" [{self.code}]" if self.code else ""
        return f"{self.file}:{self.line}:{self.column}: {self.severity}{code}: {self.message}"


@attrs.frozen
class WriteDiagnostics:
    """An answer to `tether_diagnostics_after_write` that also carries notes for the model."""

    files: dict[str, list[Diagnostic]] = attrs.field(factory=dict)
    notes: list[str] = attrs.field(factory=list)


def sort_diagnostics(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Errors first, then warnings, then the rest; within a severity by file and position."""
    return sorted(diags, key=lambda d: (SEVERITY_ORDER.get(d.severity, 9), d.file, d.line, d.column, d.message))


@attrs.define
class DiagnosticRegistry:
    """What the run has seen of each file's diagnostics, as multisets of keys."""

    _seen: dict[str, Counter] = attrs.field(factory=dict)

    def baseline(self, per_file: Mapping[str, Sequence[Diagnostic]]) -> None:
        """Record a file's diagnostics before a write: those are not the write's doing."""
        for file, diags in per_file.items():
            self._seen[file] = Counter(d.key for d in diags)

    def update(self, per_file: Mapping[str, Sequence[Diagnostic]]) -> list[Diagnostic]:
        """Take each file's latest set; return the diagnostics not in the registry before, errors first."""
        introduced: list[Diagnostic] = []
        for file, diags in per_file.items():
            before = self._seen.get(file, Counter())
            budget = Counter(before)
            for d in sort_diagnostics(diags):
                if budget[d.key] > 0:
                    budget[d.key] -= 1
                else:
                    introduced.append(d)
            self._seen[file] = Counter(d.key for d in diags)
        return sort_diagnostics(introduced)
