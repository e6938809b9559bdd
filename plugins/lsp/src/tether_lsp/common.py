"""The `lsp` tool's arguments, and what its answers and lsp_rename share: the source file asked about, the
position of a symbol, the errors of an argument missing and of a server still indexing, and the occurrences
of a name written outside a server's program.

A leaf of the family: `tether_lsp.tools` imports it to list the tools, so it loads none of the
language-server machinery (the watcher's size check loads with the first file asked about).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.files import split_lines
from tether.tools import ToolError

from tether_lsp.positions import Spot, text_lines, to_units

if TYPE_CHECKING:
    from tether.run import Run

    from tether_lsp.args import LspArgs
    from tether_lsp.connection import Connection


def source_file(run: Run, file: str) -> tuple[Path, str, str]:
    """(path, relpath, text) of an existing text file under the root, or a clear error."""
    from tether_lsp.watching import too_large

    path = run.resolve_path(file, must_exist=True)
    rel = run.relpath(path)
    if not path.is_file():
        raise ToolError(f"'{rel}' is a directory; give a file", code="not_a_file")
    if (refusal := too_large(path, rel)) is not None:
        raise refusal
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"'{rel}' is not UTF-8 text", code="unreadable") from None
    return path, rel, text


def missing_arguments(args: LspArgs, action: str, *names: str) -> ToolError:
    """The error for an action called without arguments it needs (those of ``names`` that are None)."""
    missing = [n for n in names if getattr(args, n) is None]
    what = " and ".join(missing)
    hint = (
        " (the symbol as written on that line, e.g. symbol: 'parse_config'); a column is never guessed"
        if "symbol" in missing
        else ""
    )
    return ToolError(f"action {action} needs {what}{hint}", code="missing_argument", missing=missing)


def position(conn: Connection, text: str, spot: Spot) -> Any:
    lines = text_lines(text)
    source = lines[spot.line] if spot.line < len(lines) else ""
    return conn.lsp.Position(line=spot.line, character=to_units(source, spot.char, conn.encoding))


def still_indexing(conn: Connection, what: str) -> ToolError:
    """The error for an empty answer of a server that was not ready when asked (its state is said below it)."""
    return ToolError(f"{conn.server.id} answered no {what} yet", code="indexing")


IDENT_CHAR = re.compile(r"[\w$]")
OCCURRENCES_SHOWN = 10
SCAN_BYTES = 2_000_000  # a bigger file is not searched for leftover occurrences


def identifier_at(source_line: str, char: int, symbol: str) -> str:
    """The whole identifier the symbol (a substring) points into, e.g. 'iter_params' -> 'iter_params_for_processing'."""
    start, end = char, char + len(symbol)
    while start > 0 and IDENT_CHAR.match(source_line[start - 1]):
        start -= 1
    while end < len(source_line) and IDENT_CHAR.match(source_line[end]):
        end += 1
    return source_line[start:end] or symbol


def occurrences(
    conn: Connection,
    run: Run,
    name: str,
    skip: set[Path],
    files: list[Path] | None = None,
    texts: Mapping[Path, str | None] | None = None,
) -> list[tuple[str, int, str]]:
    """(file, line, text) of every whole-word occurrence of ``name`` in the server's source files under
    its root (``files`` when the caller has a current list, else scanned now), except in the files ``skip``.
    Files are read from disk, bounded; those of ``texts`` (a change not written yet) from there."""
    pattern = re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])")
    found = []
    texts = texts or {}
    for path in sorted(conn.watcher.scan() if files is None else files):
        if path in skip:
            continue
        rel = run.relpath(path)
        try:
            if path in texts:
                text = texts[path] or ""
            elif path.stat().st_size > SCAN_BYTES:
                continue
            else:
                text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if name not in text:
            continue
        for n, line in enumerate(split_lines(text), 1):
            if pattern.search(line):
                found.append((rel, n, line.strip()[:160]))
    return found


def occurrence_lines(found: list[tuple[str, int, str]]) -> list[str]:
    """The first occurrences as file:line: text, then a count per file for the rest."""
    lines = [f"  {f}:{n}: {text}" for f, n, text in found[:OCCURRENCES_SHOWN]]
    rest: dict[str, int] = {}
    for f, _, _ in found[OCCURRENCES_SHOWN:]:
        rest[f] = rest.get(f, 0) + 1
    if rest:
        listed = ", ".join(f"{f} ({k})" for f, k in list(rest.items())[:20])
        more = f" and {len(rest) - 20} more file(s)" if len(rest) > 20 else ""
        lines.append(f"  ... {len(found) - OCCURRENCES_SHOWN} more: {listed}{more}")
    return lines
