"""The core's own hook implementations, registered like any plugin (and blockable the same way)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tether.diagnostics import Diagnostic
from tether.hookspecs import hookimpl
from tether.tools import Text, ToolResult

if TYPE_CHECKING:
    from tether.run import Run
    from tether.tools import Tool

PER_FILE = 20
FILES = 5


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
        # files the write touched first, then files it broke elsewhere
        order = sorted(by_file, key=lambda f: (f not in paths, f))
        for file in order[:FILES]:
            diags = by_file[file]
            lines.extend(d.render() for d in diags[:PER_FILE])
            if len(diags) > PER_FILE:
                lines.append(f"[{len(diags) - PER_FILE} more in {file}; run lsp diagnostics on it to see all]")
        if len(order) > FILES:
            lines.append(f"[{len(order) - FILES} more file(s) with new diagnostics: {', '.join(order[FILES:])}]")
    lines.extend(notes)
    data = dict(result.data or {})
    data["diagnostics"] = [d.to_json() for d in introduced]
    content = (*result.content, Text("\n".join(lines)))
    return ToolResult(content, result.is_error, data)
