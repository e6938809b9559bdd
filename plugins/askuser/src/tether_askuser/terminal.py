"""The terminal port: the card on the controlling terminal (``/dev/tty``), never on stdout.

stdout may carry data (``tether call --json | jq``), so the card is written to and the answer read
from the controlling terminal. Reading is asynchronous (the event loop watches the tty), so a
timeout or a cancelled call stops waiting at once. Input typed before the card appeared is flushed,
so a stray Enter cannot answer a question nobody has read. One card at a time per terminal.

Two traps are wrapped: a process in the background of its terminal is stopped by the kernel
(SIGTTIN/SIGTTOU) the moment it reads or flushes the tty, which would freeze the call beyond any
timeout, so a background process refuses the card instead; and text from the model (the question,
an approval card's arguments) could carry escape sequences that redraw the screen and hide what is
asked, so control characters are shown escaped, never sent raw.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import termios

from tether_askuser.card import Answer, Question, parse_typed, render_card
from tether_askuser.port import PortDisconnected

TTY = "/dev/tty"


class TerminalPort:
    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd
        self._buf = b""
        self._lock = asyncio.Lock()
        self._reading: tuple[asyncio.AbstractEventLoop, asyncio.Future] | None = None
        self.target = "terminal"
        # nothing else may draw on the terminal while a card waits (no progress lines)
        self.owns_terminal = True

    @classmethod
    def open(cls, path: str = TTY) -> TerminalPort | None:
        """The port on the controlling terminal, or None when the process has none."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            return None
        if not os.isatty(fd):
            os.close(fd)
            return None
        os.set_blocking(fd, False)  # our own open file description: stdin's flags are untouched
        return cls(fd)

    def close(self) -> None:
        """Release a question still waiting (it ends as disconnected), then the terminal."""
        fd, self._fd = self._fd, None
        reading, self._reading = self._reading, None
        if reading is not None and fd is not None:
            loop, ready = reading
            loop.remove_reader(fd)  # before the fd number is freed and possibly reused
            if not ready.done():
                ready.set_exception(PortDisconnected("the run closed while the question was waiting"))
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    async def ask(self, question: Question) -> Answer:
        async with self._lock:
            fd = self._require()
            try:
                foreground = os.tcgetpgrp(fd) == os.getpgrp()
            except OSError as exc:
                raise PortDisconnected(f"the terminal is gone ({exc.strerror})") from None
            if not foreground:
                raise PortDisconnected(
                    "this process runs in the background of its terminal, where nobody can answer (bring it to "
                    "the foreground with fg to be asked)"
                )
            try:
                termios.tcflush(fd, termios.TCIFLUSH)
            except termios.error as exc:
                raise PortDisconnected(f"the terminal is gone ({exc})") from None
            self._buf = b""
            done = False
            try:
                await self._write(f"\n{shown(render_card(question))}\n{question.how_to_answer()}\n> ")
                while True:
                    line = await self._read_line()
                    got = parse_typed(question, line)
                    if isinstance(got, Answer):
                        done = True
                        # the answer was given; a terminal gone since does not undo it
                        with contextlib.suppress(PortDisconnected):
                            await self._write(_receipt(got))
                        return got
                    await self._write(f"{got}\n> ")
            finally:
                if not done and self._fd is not None:
                    # timed out or cancelled: tell the human the card is no longer waiting (best effort)
                    with contextlib.suppress(OSError):
                        os.write(self._fd, b"\n[this question is closed: no answer was taken]\n")

    def _require(self) -> int:
        if self._fd is None:
            raise PortDisconnected("the terminal port is closed")
        return self._fd

    async def _write(self, text: str) -> None:
        data = text.replace("\n", "\r\n").encode()  # the tty may be in raw output mode
        while data:
            try:
                n = os.write(self._require(), data)
            except BlockingIOError:
                await asyncio.sleep(0.05)  # output stopped (^S): the caller's timeout bounds this
                continue
            except OSError as exc:
                raise PortDisconnected(f"the terminal went away ({exc.strerror})") from None
            data = data[n:]

    async def _read_line(self) -> str:
        loop = asyncio.get_running_loop()
        while b"\n" not in self._buf and b"\r" not in self._buf:
            fd = self._require()
            ready = loop.create_future()
            loop.add_reader(fd, _wake, ready)
            self._reading = (loop, ready)
            try:
                await ready
            finally:
                if self._fd == fd:  # close() already removed it otherwise
                    loop.remove_reader(fd)
                self._reading = None
            fd = self._require()
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:
                continue
            except OSError as exc:  # EIO: the terminal hung up
                raise PortDisconnected(f"the terminal hung up ({exc.strerror})") from None
            if not chunk:
                # end of input (^D or a closed terminal): nobody can answer here, fail closed
                raise PortDisconnected(
                    "the terminal closed its input (end of file) before an answer was typed"
                )
            self._buf += chunk
        cut = min(i for i in (self._buf.find(b"\n"), self._buf.find(b"\r")) if i >= 0)
        end = cut + 2 if self._buf[cut : cut + 2] == b"\r\n" else cut + 1  # raw mode: Enter is \r, maybe \r\n
        line, self._buf = self._buf[:cut], self._buf[end:]
        return line.decode("utf-8", errors="replace")


def _wake(ready: asyncio.Future) -> None:
    if not ready.done():
        ready.set_result(None)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: str) -> str:
    """Text safe to write to a terminal: control characters (escape sequences) made visible."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def _receipt(answer: Answer) -> str:
    if answer.action == "skip":
        return "Skipped.\n"
    parts = [json.dumps(list(answer.selected), ensure_ascii=False)] if answer.selected else []
    if answer.text is not None:
        parts.append(json.dumps(answer.text, ensure_ascii=False))
    return shown(f"Answer sent: {' '.join(parts)}") + "\n"
