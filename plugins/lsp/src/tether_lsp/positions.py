"""Positions the model can get right: a line plus a substring of the symbol, never a column.

A model asked for a column guesses, and a wrong guess lands on another symbol of the same line: an
answer that looks right and is about something else. So the column is found here, and ambiguity is
refused with the occurrences listed instead of guessed.
"""

from __future__ import annotations

import functools
from typing import Any

import attrs
from tether.files import split_lines
from tether.tools import ToolError


def _ident(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


@functools.lru_cache(maxsize=16)
def text_lines(text: str) -> tuple[str, ...]:
    """`split_lines` of a text, kept for the few texts an answer reads again and again (the open document's:
    finding the symbol, its position, the source lines shown; a str caches its hash, so a hit costs no read of
    the text). Splitting a 3,000-line C file took a third of a `callers` answer, five times over."""
    return tuple(split_lines(text))


@attrs.frozen
class Spot:
    line: int  # 0-based
    char: int  # 0-based index in code points


def find_symbol(text: str, line: int, symbol: str, occurrence: int | None, rel: str) -> Spot:
    """The position of ``symbol`` on 1-based ``line`` of ``text``, or a ToolError naming the fix."""
    lines = text_lines(text)
    if line > len(lines):
        raise ToolError(
            f"line {line} is beyond the end of '{rel}', which has {len(lines)} line(s); give a line between 1 and {len(lines)}",
            code="line_out_of_range",
            lines=len(lines),
        )
    source = lines[line - 1]
    starts = []
    i = source.find(symbol)
    while i >= 0:
        starts.append(i)
        i = source.find(symbol, i + 1)
    if not starts:
        raise ToolError(
            f"'{symbol}' does not occur on line {line} of '{rel}', which reads: {source.strip()[:200]!r}. "
            "Give the line where the symbol is written and a substring of it exactly as it appears there.",
            code="symbol_not_on_line",
            line_text=source,
        )
    if occurrence is not None:
        if occurrence > len(starts):
            raise ToolError(
                f"occurrence {occurrence} asked, but '{symbol}' occurs {len(starts)} time(s) on line {line} of '{rel}'; "
                f"give occurrence between 1 and {len(starts)}",
                code="occurrence_out_of_range",
                occurrences=len(starts),
            )
        return Spot(line - 1, starts[occurrence - 1])
    if len(starts) == 1:
        return Spot(line - 1, starts[0])

    def whole(s: int) -> bool:
        end = s + len(symbol)
        left_ok = not _ident(symbol[0]) or s == 0 or not _ident(source[s - 1])
        right_ok = not _ident(symbol[-1]) or end >= len(source) or not _ident(source[end])
        return left_ok and right_ok

    wholes = [s for s in starts if whole(s)]
    if len(wholes) == 1:
        return Spot(line - 1, wholes[0])
    listed = "; ".join(
        f"occurrence {n} at column {s + 1}: ...{source[max(0, s - 12) : s + len(symbol) + 12].strip()}..."
        for n, s in enumerate(starts, 1)
    )
    raise ToolError(
        f"'{symbol}' occurs {len(starts)} times on line {line} of '{rel}' ({listed}). "
        "Give a longer substring that occurs once, or pass occurrence (1-based) to pick one.",
        code="ambiguous_symbol",
        columns=[s + 1 for s in starts],
    )


@functools.cache
def _codec(encoding: str) -> Any:
    from pygls.workspace.position_codec import PositionCodec

    return PositionCodec(encoding)  # "utf-8", "utf-16" (also for anything unknown) or "utf-32"


def to_units(source_line: str, char: int, encoding: str) -> int:
    """A code-point index on a line as the server counts it (UTF-16 code units unless utf-8/utf-32 was negotiated)."""
    if source_line.isascii():  # one unit per character in every encoding (pygls' codec walks each one)
        return min(char, len(source_line))
    return _codec(encoding).client_num_units(source_line[:char])


def from_units(source_line: str, units: int, encoding: str) -> int:
    """The code-point index of a server's character offset on a line (clamped to the line).

    pygls' codec clamps an offset past the end to the last character, not the end, and writes the
    clamped value into the position it was given: the end is handled here, on a position of our own.
    """
    if source_line.isascii():  # one unit per character in every encoding
        return min(units, len(source_line))
    from lsprotocol.types import Position

    codec = _codec(encoding)
    if units >= codec.client_num_units(source_line):
        return len(source_line)
    return codec.position_from_client_units([source_line], Position(line=0, character=units)).character
