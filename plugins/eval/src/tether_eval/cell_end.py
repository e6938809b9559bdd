"""What a cell keeps of its output, and the notes its end adds.

Whatever a cell prints, it keeps the head (2/3 of ``eval_max_output_chars``) and the tail (1/3) of
its stream output and at most MAX_DISPLAYS displays; a ``clear_output`` drops what the cell showed
before it (after the next output with ``wait=True``, as Jupyter does), so a cell that clears and
redraws keeps only its last frame. Output that changes nothing (an empty stream message, a clear of
nothing) is not kept and does not count as activity. When the cell ends, notes say what was dropped
and what may be missing (see `tether_eval.cell`).
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import attrs

from tether_eval import timing

MAX_DISPLAYS = 50  # display messages kept per cell (each may hold an image)


@attrs.define
class CellEnd:
    """How a cell ended, with the messages it produced (in order)."""

    status: str  # ok | timeout (while running) | interrupted (state kept) | stuck (interrupt failed) | died
    messages: list[dict[str, Any]]
    reply: dict[str, Any] | None = None
    tool_calls: int = 0
    inputs: list[str] = attrs.field(factory=list)  # prompts of plain input() calls (answered empty)
    replied: bool = False
    idle: bool = False
    kept_chars: int = 0  # stream characters kept at the head
    tail: collections.deque = attrs.field(
        factory=collections.deque
    )  # after the head is full: the latest messages
    tail_chars: int = 0
    dropped_chars: int = 0
    displays: int = 0
    dropped_displays: int = 0
    clear_pending: bool = False  # a clear_output(wait=True): clear when the next output arrives
    spent: str = ""  # which budget ran out: inactivity | total
    idle_lost: bool = False  # the reply came, the idle never did: iopub dropped messages of a flood
    barrier: tuple[str, asyncio.Queue] | None = None  # the kernel_info sent after the reply (Deno)
    barrier_lost: bool = False  # the kernel did not answer the barrier: output sent late may be missing
    barrier_answered: bool = False  # its shell reply came (then only its iopub idle was missing)
    printed: bool = False  # stream output came (then the marker follows the barrier, Deno)
    tail_lost: bool = False  # the marker's tokens did not come back within the cell's budget
    after_lost: bool = False  # the cell before this one ended with tail_lost

    def add(self, msg: dict[str, Any], limit: int) -> bool:
        """Keep the head (2/3 of ``limit``) and the tail (1/3) of a cell's output, whatever the cell prints.

        Returns whether what the model will see changed: an empty stream message or a clear of
        nothing does not, so a flood of them neither grows the cell's memory nor counts as activity.
        """
        if msg["msg_type"] == "clear_output":
            if msg["content"].get("wait"):
                self.clear_pending = True
                return False
            return self._clear()
        if msg["msg_type"] == "stream":
            if not msg["content"].get("text"):
                return False
            self.printed = True
        if self.clear_pending:
            self._clear()
        self._store(msg, limit)
        return True

    def _clear(self) -> bool:
        had = bool(self.messages or self.tail or self.dropped_displays)
        self.messages.clear()
        self.tail.clear()
        self.kept_chars = self.tail_chars = self.dropped_chars = self.displays = self.dropped_displays = 0
        self.clear_pending = False
        return had

    def _store(self, msg: dict[str, Any], limit: int) -> None:
        keep = limit * 2 // 3 if not self.tail else limit // 3
        size = len(msg["content"].get("text", "")) if msg["msg_type"] == "stream" else 0
        if msg["msg_type"] in ("display_data", "update_display_data"):
            self.displays += 1
            if self.displays > MAX_DISPLAYS:  # a loop displaying figures: what the model can use is few
                self.dropped_displays += 1
                return
        if not self.tail and self.kept_chars + size <= keep:
            self.kept_chars += size
            self.messages.append(msg)
            return
        if not self.tail and size and self.kept_chars < keep:  # fill the head with the start of a big message
            room = keep - self.kept_chars
            text = msg["content"]["text"]
            self.messages.append({**msg, "content": {**msg["content"], "text": text[:room]}})
            self.kept_chars = keep
            msg = {**msg, "content": {**msg["content"], "text": text[room:]}}
            size -= room
        keep = limit // 3
        self.tail.append((msg, size))
        self.tail_chars += size
        while self.tail_chars > keep and self.tail:
            front, front_size = self.tail[0]
            excess = self.tail_chars - keep
            if front_size <= excess:
                self.tail.popleft()  # wholly older than the tail we keep
                self.tail_chars -= front_size
                self.dropped_chars += front_size
                continue
            text = front["content"]["text"]  # keep the end of the oldest message
            self.tail[0] = (
                {**front, "content": {**front["content"], "text": text[excess:]}},
                front_size - excess,
            )
            self.tail_chars -= excess
            self.dropped_chars += excess

    def finish(self) -> None:
        if self.dropped_chars:
            note = (
                f"\n[... {self.dropped_chars:,} characters of output dropped (showing the first {self.kept_chars:,} and "
                f"the last {self.tail_chars:,} received); write it to a file and read parts of it, or print less ...]\n"
            )
            self.messages.append({"msg_type": "stream", "content": {"name": "stdout", "text": note}})
        self.messages.extend(m for m, _ in self.tail)
        self.tail.clear()
        if self.dropped_displays:
            note = f"[{self.dropped_displays} more display(s) not kept: the cell displayed more than {MAX_DISPLAYS}]\n"
            self.messages.append({"msg_type": "stream", "content": {"name": "stdout", "text": note}})
        if self.idle_lost:
            note = (
                "[the cell sent messages faster than they could be read and the kernel dropped some of them: "
                "output may be missing here; print less often, or write it to a file]\n"
            )
            self.messages.append({"msg_type": "stream", "content": {"name": "stderr", "text": note}})
        if self.barrier_lost:
            why = (
                f"answered, but its confirmation on the output channel did not follow within {timing.SETTLE:g} s "
                "(messages of a flood may have been dropped)"
                if self.barrier_answered
                else f"did not confirm within {timing.BARRIER_WAIT:g} s that it had sent all of this cell's output "
                "(the machine may be busy)"
            )
            note = (
                f"[the kernel {why}: the cell's result or its last lines may be missing here; "
                "show what you need in a new cell]\n"
            )
            self.messages.append({"msg_type": "stream", "content": {"name": "stderr", "text": note}})
        if self.tail_lost:
            note = (
                "[output kept arriving (a timer, or a flood) until this cell's time budget ran out, or the "
                f"kernel went {timing.SETTLE:g} s silent before it confirmed the cell's output was all sent: its result "
                "or its last lines may be missing here, and may show under the next cell; print less, write "
                "it to a file, or stop the timer]\n"
            )
            self.messages.append({"msg_type": "stream", "content": {"name": "stderr", "text": note}})
        if self.after_lost:
            note = "[the cell before this one was still printing when it ended: output above may be its]\n"
            self.messages.insert(0, {"msg_type": "stream", "content": {"name": "stderr", "text": note}})
