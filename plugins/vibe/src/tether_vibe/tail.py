"""A bounded tail of a byte stream: the last N characters of a worker's stdout or stderr, and how much came."""

from __future__ import annotations

import codecs


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
