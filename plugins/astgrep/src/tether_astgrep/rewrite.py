"""Rewriting matches with a template: metavariables substituted, indentation carried over.

Two rules differ from ast-grep on purpose:

- A metavariable in the template that the pattern does not define is an error (ast-grep writes an
  empty string, issue #2863).
- A match replaces only the code from its start to where the pattern's last element matched. With
  ast-grep's smart matching a pattern may match a node that goes on past the pattern (a one-statement
  block pattern matches a longer block; `if $C: a()` matches an `if` with an `else`); ast-grep's
  rewrite replaces the whole node and so deletes the code the pattern never mentioned (issue #2856).
  Here that code stays where it was, and the result says how many matches had such a tail.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from tether_astgrep.matcher import Match

_VAR = re.compile(r"\$\$\$([A-Z_][A-Z0-9_]*)|\$\$?([A-Z_][A-Z0-9_]*)")  # $$$A, $A, and $$A
_CODE = re.compile(r"\w")


def template_names(template: str) -> list[str]:
    return list(dict.fromkeys(m.group(1) or m.group(2) for m in _VAR.finditer(template)))


def _line_indent(src: bytes, byte: int) -> str:
    start = src.rfind(b"\n", 0, byte) + 1
    line = src[start:byte]
    ws = len(line) - len(line.lstrip(b" \t"))
    return line[:ws].decode("utf-8", "replace")


def _reindent(text: str, old: str, new: str) -> str:
    """Shift the lines after the first by the difference between two indentations (as ast-grep does).

    Lines keep their indentation relative to each other: a line less indented than the capture's
    first one (an `else:` taken along) moves by the same amount. Blank lines stay blank.
    """
    delta = len(new) - len(old)
    if delta == 0:
        return text
    lines = text.split("\n")
    out = [lines[0]]
    for line in lines[1:]:
        if delta > 0:
            out.append(new[-delta:] + line if line else line)
        elif line[:-delta].strip() == "" and len(line) >= -delta:
            out.append(line[-delta:])
        else:
            out.append(line)
    return "\n".join(out)


def render(template: str, match: Match, src: bytes) -> str:
    base = _line_indent(src, match.start_byte)
    out: list[str] = []
    for i, line in enumerate(template.split("\n")):
        landing = base + line[: len(line) - len(line.lstrip(" \t"))]  # the indentation where it lands
        pieces: list[str] = []
        pos = 0
        for m in _VAR.finditer(line):
            pieces.append(line[pos : m.start()])
            cap = match.captures.get(m.group(1) or m.group(2))
            if cap is not None and cap.text:
                # a $$$ capture may end in a whitespace token (Go's newline terminator): substituted,
                # it would leave a blank line before what the template puts after it
                text = cap.text.rstrip() if cap.multi else cap.text
                if "\n" in text:
                    text = _reindent(text, _line_indent(src, cap.start_byte), landing)
                pieces.append(text)
            pos = m.end()
        pieces.append(line[pos:])
        rendered = "".join(pieces)
        out.append(base + rendered if i and rendered else rendered)
    return "\n".join(out)


@attrs.frozen
class Rewritten:
    content: bytes
    replacements: int
    kept_tails: int  # matches whose node went on past the pattern: that code was kept


def apply(src: bytes, matches: Sequence[Match], template: str) -> Rewritten:
    """Replace every non-overlapping match (the outer one wins) by the rendered template."""
    pieces: list[bytes] = []
    pos = 0
    count = tails = 0
    for m in sorted(matches, key=lambda m: (m.start_byte, -m.end_byte)):
        if m.start_byte < pos:
            continue  # inside a match already replaced
        pieces.append(src[pos : m.start_byte])
        pieces.append(render(template, m, src).encode())
        end = m.end_of_pattern
        if _CODE.search(src[end : m.end_byte].decode("utf-8", "replace")):
            tails += 1
        pos = end
        count += 1
    pieces.append(src[pos:])
    return Rewritten(b"".join(pieces), count, tails)
