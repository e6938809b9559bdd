"""Bounding output for a model: cut, and say what was cut and how to see more.

`cap_text` and `cap_items` keep the head of a finished answer; `Tail` keeps the end of a stream
(a worker's stdout, a process's log) as it comes, in bounded memory.
"""

from __future__ import annotations

import codecs

DEFAULT_MAX_CHARS = 30_000


def cap_text(text: str, max_chars: int = DEFAULT_MAX_CHARS, how_to_see_more: str = "") -> str:
    """Keep the head of ``text``; when cut, end with a line that says how much and how to see more."""
    if len(text) <= max_chars:
        return text
    cut = text.rfind("\n", 0, max_chars)
    keep = text[: cut if cut > max_chars // 2 else max_chars]
    more = f" {how_to_see_more}" if how_to_see_more else ""
    return f"{keep}\n[output cut: showed {len(keep):,} of {len(text):,} characters.{more}]"


def cap_items(items: list, cap: int, noun: str, how_to_see_more: str = "") -> tuple[list, str]:
    """First ``cap`` items, and a note naming how many were left out (empty when none)."""
    if len(items) <= cap:
        return items, ""
    more = f" {how_to_see_more}" if how_to_see_more else ""
    return items[:cap], f"[{len(items) - cap} more {noun} not shown (showing {cap} of {len(items)}).{more}]"


class Tail:
    """Keeps the last ``max_chars`` characters of what is added (decoded as UTF-8, bad bytes replaced)."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.total = 0  # characters seen, kept or not
        self._parts: list[str] = []
        self._size = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, chunk: bytes) -> None:
        self._add(self._decoder.decode(chunk))

    def add_text(self, text: str) -> None:
        self._add(text)

    def _add(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        self._parts.append(text)
        self._size += len(text)
        if self._size > 2 * self.max_chars:  # compact now and then, not on every chunk
            kept = "".join(self._parts)[-self.max_chars :]
            self._parts, self._size = [kept], len(kept)

    def finish(self) -> None:
        self._add(self._decoder.decode(b"", final=True))

    @property
    def cut(self) -> int:
        """How many characters at the start are no longer kept."""
        return max(0, self.total - self.max_chars)

    def text(self) -> str:
        return "".join(self._parts)[-self.max_chars :]

    def render(self, what: str) -> str:
        """The kept text, preceded by a line saying what was cut when something was."""
        text = self.text()
        if not self.cut:
            return text
        return f"[{what} cut: showing the last {len(text):,} of {self.total:,} characters; the start is not kept]\n{text}"
