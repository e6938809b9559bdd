"""The debuggee's stdout/stderr as a session keeps it until it is read: whole lines, bounded.

The lines are kept in the core's `tether.output.Tail` (the latest OUTPUT_KEEP characters, what came
before them counted); what is particular to a debuggee is how its streams are merged into lines.
"""

from __future__ import annotations

from collections import deque

from tether.output import Tail

OUTPUT_KEEP = 1_000_000  # characters of unread output kept; older output is dropped and counted
LINE_KEEP = 100_000  # characters kept of one stream's unfinished line; earlier ones are cut, said in the line


class OutputBuffer:
    """The debuggee's stdout/stderr since the last read, bounded in memory (oldest dropped, counted).

    Streams are merged a whole line at a time: an adapter that reads stdout and stderr on two
    threads (debugpy's launcher) hands over a line in pieces with the other stream's text between
    them ("done" ... a traceback ... " 90"). A stream's unfinished line waits for its newline (or
    for the next read, where it is given as a line of its own) before it joins the rest. Lines of
    two streams may still come in another order than they were written: the adapter reads them
    apart, and their order is lost there. An unfinished line keeps only its last LINE_KEEP
    characters; the line says how many before them were cut.
    """

    def __init__(self) -> None:
        self._lines = Tail(OUTPUT_KEEP)  # the finished lines since the last read
        self._unfinished: dict[str, _Line] = {}  # stream -> the start of a line still being written
        self.closed = False  # after `terminated`: lldb-dap floods output while it dies

    def add(self, text: str, stream: str = "") -> None:
        if self.closed or not text:
            return
        text = text.replace("\r\n", "\n")  # lldb-dap runs it on a pty
        lines, newline, rest = text.rpartition("\n")
        if newline:
            started = self._unfinished.pop(stream, None)
            self._lines.add_text((started.text() if started else "") + lines + newline)
        if rest:
            self._unfinished.setdefault(stream, _Line()).add(rest)

    def take(self) -> tuple[str, int]:
        """The output since the last read, and how many characters before it were dropped; then empty."""
        for line in self._unfinished.values():  # a prompt without its newline is output too
            self._lines.add_text(line.text() + "\n")  # ended: another stream's piece does not join its line
        self._unfinished.clear()
        text, dropped = self._lines.text(), self._lines.cut
        self._lines = Tail(OUTPUT_KEEP)
        return text, dropped


class _Line:
    """One stream's line still being written: its pieces, at most LINE_KEEP characters (the latest)."""

    def __init__(self) -> None:
        self.pieces: deque[str] = deque()
        self.size = 0
        self.cut = 0

    def add(self, piece: str) -> None:
        self.pieces.append(piece)
        self.size += len(piece)
        while self.size > LINE_KEEP:
            excess = self.size - LINE_KEEP
            first = self.pieces[0]
            if len(first) <= excess:
                self.pieces.popleft()
                self.size -= len(first)
                self.cut += len(first)
            else:
                self.pieces[0] = first[excess:]
                self.size -= excess
                self.cut += excess

    def text(self) -> str:
        said = f"[{self.cut:,} earlier characters of this line cut] " if self.cut else ""
        return said + "".join(self.pieces)
