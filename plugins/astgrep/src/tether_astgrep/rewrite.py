"""Rewriting matches with a template: metavariables substituted, indentation carried over.

Two rules differ from ast-grep on purpose:

- A metavariable in the template that the pattern does not define is an error (ast-grep writes an
  empty string, issue #2863).
- A match replaces only the code from its start to where the pattern's last element matched. With
  ast-grep's smart matching a pattern may match a node that goes on past the pattern (a one-statement
  block pattern matches a longer block; `if $C: a()` matches an `if` with an `else`); ast-grep's
  rewrite replaces the whole node and so deletes the code the pattern never mentioned (issue #2856).
  Here that code stays where it was, and the result names each match that had such a tail (a kept
  closing token, like the `)` of `app.call(env)` past the pattern `app.$A env`, is one too).

A rewrite never drops bytes the pattern did not account for: a match whose replaced code holds an
ERROR node the matcher skipped (syntax the grammar does not know, like Kotlin's `$$"`) outside every
capture is left as it is and named (`unparsed_inside`). Whether the rewritten file parses as well as
before is checked by the caller (`added_errors`).
"""

from __future__ import annotations

import bisect
import collections
import re
from collections.abc import Sequence
from typing import Any

import attrs

from tether_astgrep.matcher import Match

_VAR = re.compile(r"\$\$\$([A-Z_][A-Z0-9_]*)|\$\$?([A-Z_][A-Z0-9_]*)")  # $$$A, $A, and $$A
_TAIL = re.compile(rb"[^\s;]")  # a kept `;` (a terminator the pattern left out) is no tail


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
    # where (in the new content) replacements start whose match went on past the pattern
    tails: tuple[int, ...]
    # each replacement: (old start, old end, new start, new end), in order
    spans: tuple[tuple[int, int, int, int], ...] = ()

    def old_place(self, byte: int) -> tuple[int, int]:
        """Where a byte of the old content went: (-1, its offset in the new content) when no replacement
        covered it, else (the replacement's index, 0)."""
        # the last replacement starting at or before the byte
        i = bisect.bisect_right(self.spans, byte, key=lambda s: s[0]) - 1
        if i < 0:
            return (-1, byte)
        _, old_end, _, new_end = self.spans[i]
        return (i, 0) if byte < old_end else (-1, byte + new_end - old_end)

    def new_place(self, byte: int) -> tuple[int, int]:
        """The same for a byte of the new content: (the replacement's index, 0) inside one."""
        i = bisect.bisect_right(self.spans, byte, key=lambda s: s[2]) - 1
        return (i, 0) if i >= 0 and byte < self.spans[i][3] else (-1, byte)


def apply(src: bytes, matches: Sequence[Match], template: str) -> Rewritten:
    """Replace every non-overlapping match (the outer one wins) by the rendered template."""
    pieces: list[bytes] = []
    pos = written = 0
    count = 0
    tails: list[int] = []
    spans: list[tuple[int, int, int, int]] = []
    for m in sorted(matches, key=lambda m: (m.start_byte, -m.end_byte)):
        if m.start_byte < pos:
            continue  # inside a match already replaced
        before = src[pos : m.start_byte]
        new = render(template, m, src).encode()
        pieces += (before, new)
        end = m.end_of_pattern
        start = written + len(before)
        if _TAIL.search(src, end, m.end_byte):
            tails.append(start)
        spans.append((m.start_byte, end, start, start + len(new)))
        written = start + len(new)
        pos = end
        count += 1
    pieces.append(src[pos:])
    return Rewritten(b"".join(pieces), count, tuple(tails), tuple(spans))


def _errors_in(root: Any, start: int, end: int) -> list:
    """ERROR nodes overlapping [start, end), outermost only."""
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        if node.end_byte <= start or node.start_byte >= end or not node.has_error:
            continue
        if node.is_error:
            out.append(node)
        else:
            stack.extend(node.children)
    return out


def unparsed_inside(root: Any, match: Match) -> bool:
    """Whether replacing ``match`` would drop code the grammar could not parse and no capture holds."""
    if not root.has_error:
        return False
    caps = [(c.start_byte, c.end_byte) for c in match.captures.values() if c.end_byte > c.start_byte]
    for err in _errors_in(root, match.start_byte, match.end_of_pattern):
        if not any(s <= err.start_byte and err.end_byte <= e for s, e in caps):
            return True
    return False


def _culprit(err: Any) -> Any:
    """The first token an ERROR node (or an ERROR inside it) could not fit: where the error is.

    An ERROR node often spans from far above the fault (a whole module), with the well-formed code
    before the fault as its children; the stray token itself is a direct child of an ERROR node.
    """
    stack = [err]
    while stack:
        node = stack.pop()
        if node.child_count == 0:
            parent = node.parent
            if parent is not None and parent.is_error:
                return node
            continue
        stack.extend(c for c in reversed(node.children) if c.child_count == 0 or c.has_error)
    return err


def syntax_errors(root: Any) -> list[tuple[int, int, str]]:
    """(byte, line, what) of every syntax error (lines 1-based), in source order.

    All of them: the walk goes only down subtrees that hold an error and stops at each ERROR node (whose
    culprit is looked for inside it alone), so its cost is bounded by the tree's size.
    """
    out: list[tuple[int, int, str]] = []
    stack = [root] if root.has_error else []
    while stack:
        node = stack.pop()
        if node.is_error:
            token = _culprit(node)
            text = (token.text or b"").decode("utf-8", "replace")
            shown = " ".join(text.split())
            what = f"unexpected {shown[:40]!r}" if shown else "syntax error"
            out.append((token.start_byte, token.start_point[0] + 1, what))
        elif node.is_missing:
            out.append((node.start_byte, node.start_point[0] + 1, f"missing {node.type!r}"))
        elif node.has_error:
            stack.extend(reversed(node.children))
    return out


def added_errors(old_root: Any, new_root: Any, done: Rewritten) -> list[tuple[int, str]]:
    """(line, what) of the syntax errors of the new content that the old one did not have.

    A file that had errors before may keep them: an error of the new content is old when the old
    content had one with the same description at the same place (moved by the replacements before
    it), or inside the same replacement (an error in a capture moves with it). tree-sitter's error
    recovery is not local, so an added error can also show as an old one moving elsewhere, or as an
    error around code the rewrite did not touch: both count as added.
    """
    left = collections.Counter((done.old_place(byte), what) for byte, _, what in syntax_errors(old_root))
    added = []
    for byte, line, what in syntax_errors(new_root):
        key = (done.new_place(byte), what)
        if left[key] > 0:
            left[key] -= 1
        else:
            added.append((line, what))
    return added
