"""Diagnostics on write, top to bottom: what a diagnostic is, the per-run registry that decides what a
write introduced, the wrapping of every file-writing call, and what the model sees.

A diagnostic's identity is (file, severity, code, message) with multiplicity. Position is left out
on purpose: an error that only moved (a line inserted above it) is not new. A diagnostic that was in
a file when the run first saw it (the file's first baseline, taken before any write of the run was
reported to affect it) is never introduced by a later write, even when it vanished meanwhile (a call
broken and mended again brings back the warning its argument had). Beyond those, a diagnostic that is
gone from a file's latest set leaves the registry, so bringing it back reports it again.

A tool with ``touches`` is a file-writing tool. Before it runs, `before_write` asks
``tether_diagnostics_before_write`` for the baseline; after it succeeded, `after_write` asks
``tether_diagnostics_after_write`` for each affected file's latest set, keeps what the registry has
not seen, and hands that to ``tether_write_result``, whose core implementation (below) appends it to
the result, errors first, bounded. A checker that does not answer in time, or fails, is said in the
result: a write never looks clean because its checker broke.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from tether.hookspecs import CORE_PLUGIN, hookimpl
from tether.options import CoreOptions
from tether.tools import Text, ToolResult

if TYPE_CHECKING:
    from tether.run import Run
    from tether.tools import Tool

log = logging.getLogger("tether")

DIAGNOSTICS_SLACK = 2.0  # beyond the run's diagnostics timeout, before the core stops waiting on a plugin
PER_FILE = 20  # diagnostics shown per file
FILES = 5  # files shown

SEVERITY_ORDER = {"error": 0, "warning": 1, "information": 2, "hint": 3}


@attrs.frozen
class Diagnostic:
    """One finding of a checker or a language server about one place in a file.

    Attributes:
        file: the file, relative to the run's root.
        line: 1-based.
        column: 1-based.
        severity: error, warning, information or hint.
        message: the checker's message.
        code: the checker's rule or error code, when it has one.
        source: which checker said it (e.g. basedpyright, ruff).
    """

    file: str
    line: int
    column: int
    severity: str
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
        """``file:line:col: severity [code]: message (source)``: the source tells two checkers of one file apart."""
        code = f" [{self.code}]" if self.code else ""
        source = f" ({self.source})" if self.source else ""
        return f"{self.file}:{self.line}:{self.column}: {self.severity}{code}: {self.message}{source}"


@attrs.frozen
class WriteDiagnostics:
    """An answer to `tether_diagnostics_after_write` that also carries notes for the model.

    Attributes:
        files: ``{path: [Diagnostic, ...]}``, each list the file's whole current set.
        notes: lines for the model (e.g. "diagnostics still pending for x.py after 5 s").
    """

    files: dict[str, list[Diagnostic]] = attrs.field(factory=dict)
    notes: list[str] = attrs.field(factory=list)


@attrs.frozen
class PreviewDiagnostics:
    """An answer to `tether_diagnostics_preview`: each affected file's set before the change and with it.

    Attributes:
        before: ``{path: [Diagnostic, ...]}``, the files' sets as they are now (the write's baseline).
        after: the same files' sets, and those of other files the change affects, with the change in place.
        covered: the change's files this checker serves (a file no checker covers was not checked).
        unchecked: ``{path: why}``, files it could not compare (no complete round before or with the change).
        notes: lines for the model.
    """

    before: dict[str, list[Diagnostic]] = attrs.field(factory=dict)
    after: dict[str, list[Diagnostic]] = attrs.field(factory=dict)
    covered: list[str] = attrs.field(factory=list)
    unchecked: dict[str, str] = attrs.field(factory=dict)
    notes: list[str] = attrs.field(factory=list)


def sort_diagnostics(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Errors first, then warnings, then the rest; within a severity by file and position."""
    return sorted(
        diags, key=lambda d: (SEVERITY_ORDER.get(d.severity, 9), d.file, d.line, d.column, d.message)
    )


@attrs.define
class DiagnosticRegistry:
    """What the run has seen of each file's diagnostics, as multisets of keys."""

    _seen: dict[str, Counter] = attrs.field(factory=dict)
    # each file's set when the run first saw it, before a write of the run was reported to affect it
    _origin: dict[str, Counter] = attrs.field(factory=dict)
    _affected: set[str] = attrs.field(factory=set)  # files a write's latest sets covered

    def copy(self) -> DiagnosticRegistry:
        """An independent copy: a preview decides on it and leaves the run's registry as it was."""
        return DiagnosticRegistry(
            {f: Counter(c) for f, c in self._seen.items()},
            {f: Counter(c) for f, c in self._origin.items()},
            set(self._affected),
        )

    def baseline(self, per_file: Mapping[str, Sequence[Diagnostic]]) -> None:
        """Record a file's diagnostics before a write: those are not the write's doing."""
        for file, diags in per_file.items():
            keys = Counter(d.key for d in diags)
            if file not in self._origin and file not in self._affected:
                self._origin[file] = keys
            self._seen[file] = keys

    def moved(self, old: str, new: str) -> None:
        """A file moved from ``old`` to ``new`` (`lsp_move`): what was known of it is known of its new
        path, so the errors it already had are not reported as the move's doing."""

        def rekeyed(keys: Counter) -> Counter:
            return Counter({(new, *key[1:]): n for key, n in keys.items()})

        if old in self._seen:
            self._seen[new] = rekeyed(self._seen[old])
        if old in self._origin:
            self._origin[new] = rekeyed(self._origin[old])

    def update(self, per_file: Mapping[str, Sequence[Diagnostic]]) -> list[Diagnostic]:
        """Take each file's latest set; return the diagnostics neither in the registry before nor in the
        file when the run first saw it, errors first."""
        introduced: list[Diagnostic] = []
        for file, diags in per_file.items():
            self._affected.add(file)
            budget = self._seen.get(file, Counter()) | self._origin.get(file, Counter())
            for d in sort_diagnostics(diags):
                if budget[d.key] > 0:
                    budget[d.key] -= 1
                else:
                    introduced.append(d)
            self._seen[file] = Counter(d.key for d in diags)
        return sort_diagnostics(introduced)


# -- the wrapping of a file-writing call -----------------------------------------------------------


async def before_write(run: Run, paths: Sequence[str], call_id: str) -> None:
    """Record the baseline of the files a write will touch: what is there before is not its doing."""
    files, _ = await _gather(run, run.hook.tether_diagnostics_before_write, paths, call_id)
    run.diagnostics.baseline(files)


async def after_write(
    run: Run, tool: Tool, paths: Sequence[str], result: ToolResult, call_id: str
) -> ToolResult:
    """The result the model sees for a write that succeeded: with the diagnostics it introduced."""
    from tether.staging import preview_note

    files, notes = await _gather(run, run.hook.tether_diagnostics_after_write, paths, call_id)
    introduced = run.diagnostics.update(files)
    notes = [*notes, *preview_note(run, result, introduced)]
    old = run.hook.tether_post_write
    legacy = any(impl.plugin_name != CORE_PLUGIN for impl in old.get_hookimpls())
    hook = old if legacy else run.hook.tether_write_result
    try:
        out = hook(run=run, tool=tool, paths=list(paths), result=result, introduced=introduced, notes=notes)
    except Exception:  # the write happened; report it even if post-processing broke
        log.exception("write-result hook failed")
        return result
    return out if out is not None else result


async def _gather(
    run: Run, hook: Any, paths: Sequence[str], call_id: str
) -> tuple[dict[str, list[Diagnostic]], list[str]]:
    """Every checker's answer, each on its own: one that fails or hangs is a note, the others count."""
    import asyncio
    import inspect

    wait = run.options.of(CoreOptions).diagnostics_timeout + DIAGNOSTICS_SLACK
    kwargs = {"run": run, "paths": list(paths), "call_id": call_id}
    files: dict[str, list[Diagnostic]] = {}
    notes: list[str] = []
    for impl in reversed(hook.get_hookimpls()):  # pluggy's call order
        try:
            answer = impl.function(*(kwargs[a] for a in impl.argnames))
            value = await asyncio.wait_for(answer, wait) if inspect.isawaitable(answer) else answer
        except TimeoutError:
            notes.append("diagnostics still pending: a checker did not answer in time")
            continue
        except Exception as exc:  # diagnostics are extra; never fail the write over them
            log.exception("diagnostics plugin failed")
            notes.append(
                f"diagnostics unknown: a checker failed ({type(exc).__name__}); the write itself succeeded"
            )
            continue
        if isinstance(value, WriteDiagnostics):
            files.update(value.files)
            notes.extend(value.notes)
        elif value:
            files.update(value)
    return files, notes


# -- what the model sees ---------------------------------------------------------------------------


@hookimpl(trylast=True)
def tether_write_result(
    run: Run,
    tool: Tool,
    paths: Sequence[str],
    result: ToolResult,
    introduced: Sequence[Diagnostic],
    notes: Sequence[str],
) -> ToolResult:
    """The core's answer: append the diagnostics the write introduced (bounded), errors first, and any notes."""
    if not introduced and not notes:
        return result
    lines = render_introduced(introduced, paths, "This write introduced")
    lines.extend(notes)
    data = dict(result.data or {})
    data["diagnostics"] = [d.to_json() for d in introduced]
    content = (*result.content, Text("\n".join(lines)))
    return ToolResult(content, result.is_error, data)


def render_introduced(introduced: Sequence[Diagnostic], paths: Sequence[str], head: str) -> list[str]:
    """``head`` and the diagnostics, bounded: the files of ``paths`` first, then the files broken elsewhere;
    errors first. Nothing when there are none."""
    if not introduced:
        return []
    by_file: dict[str, list[Diagnostic]] = {}
    for d in introduced:
        by_file.setdefault(d.file, []).append(d)
    errors = sum(d.severity == "error" for d in introduced)
    warns = sum(d.severity == "warning" for d in introduced)
    others = len(introduced) - errors - warns
    counts = [f"{errors} error(s)", f"{warns} warning(s)"] + ([f"{others} other"] if others else [])
    lines = [f"{head} {', '.join(counts)}:"]
    order = sorted(by_file, key=lambda f: (f not in paths, f))
    shown = [d for file in order[:FILES] for d in by_file[file][:PER_FILE]]
    lines.extend(d.render() for d in sort_diagnostics(shown))
    for file in order[:FILES]:
        if len(by_file[file]) > PER_FILE:
            lines.append(
                f"[{len(by_file[file]) - PER_FILE} more in {file}; ask the checker for that file to see all]"
            )
    if len(order) > FILES:
        lines.append(f"[{len(order) - FILES} more file(s) with new diagnostics: {', '.join(order[FILES:])}]")
    return lines


tether_post_write = tether_write_result  # the deprecated name, served while a plugin still implements it
