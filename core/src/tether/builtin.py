"""The core's own hook implementations, registered like any plugin (and blockable the same way)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tether.diagnostics import Diagnostic, sort_diagnostics
from tether.hookspecs import hookimpl
from tether.options import CoreOptions
from tether.sandbox import Envelope, SandboxOptions, builtin_envelope
from tether.tools import Text, ToolResult

if TYPE_CHECKING:
    from tether.run import Run
    from tether.tools import Tool

PER_FILE = 20
FILES = 5


@hookimpl
def tether_addoptions(register) -> None:
    register(CoreOptions)
    register(SandboxOptions)


@hookimpl(trylast=True)
def tether_envelope(run: Run, purpose: str) -> Envelope | None:
    return builtin_envelope(run, purpose)


@hookimpl(trylast=True)
def tether_post_write(
    run: Run, tool: Tool, paths: Sequence[str], result: ToolResult, introduced: Sequence[Diagnostic], notes: Sequence[str]
) -> ToolResult:
    """Append the diagnostics the write introduced (bounded), errors first, and any notes."""
    if not introduced and not notes:
        return result
    lines: list[str] = []
    if introduced:
        by_file: dict[str, list[Diagnostic]] = {}
        for d in introduced:
            by_file.setdefault(d.file, []).append(d)
        errors = sum(d.severity == "error" for d in introduced)
        warnings = sum(d.severity == "warning" for d in introduced)
        others = len(introduced) - errors - warnings
        counts = [f"{errors} error(s)", f"{warnings} warning(s)"] + ([f"{others} other"] if others else [])
        lines.append(f"This write introduced {', '.join(counts)}:")
        # keep the files the write touched first, then the files it broke elsewhere; show errors first
        order = sorted(by_file, key=lambda f: (f not in paths, f))
        shown = [d for file in order[:FILES] for d in by_file[file][:PER_FILE]]
        lines.extend(d.render() for d in sort_diagnostics(shown))
        for file in order[:FILES]:
            if len(by_file[file]) > PER_FILE:
                lines.append(f"[{len(by_file[file]) - PER_FILE} more in {file}; ask the checker for that file to see all]")
        if len(order) > FILES:
            lines.append(f"[{len(order) - FILES} more file(s) with new diagnostics: {', '.join(order[FILES:])}]")
    lines.extend(notes)
    data = dict(result.data or {})
    data["diagnostics"] = [d.to_json() for d in introduced]
    content = (*result.content, Text("\n".join(lines)))
    return ToolResult(content, result.is_error, data)
