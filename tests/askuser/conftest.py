"""Fixtures of the askuser tests: a real process on a pseudo-terminal, and runs with a harness port."""

from __future__ import annotations

import fcntl
import os
import re
import select
import subprocess
import termios
import time
from pathlib import Path

import pytest


def _take_ctty() -> None:  # runs in the child after setsid: the pty on fd 0 becomes its controlling terminal
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class PtyProcess:
    """A child whose controlling terminal (and stdin, stderr) is a pty we drive; stdout is a separate pipe."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], stdin_tty: bool = True) -> None:
        self.master, slave = os.openpty()
        self.screen = ""  # what has not been matched yet
        self.history = ""  # everything the terminal showed
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=slave if stdin_tty else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=slave,
            start_new_session=True,
            preexec_fn=_take_ctty if stdin_tty else _take_ctty_from_stderr,
        )
        os.close(slave)

    def _pump(self, wait: float) -> None:
        if self.master < 0:
            return
        ready, _, _ = select.select([self.master], [], [], wait)
        if ready:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                chunk = b""
            text = chunk.decode("utf-8", errors="replace").replace("\r", "")
            self.screen += text
            self.history += text

    def expect(self, pattern: str, timeout: float = 15.0) -> re.Match:
        """Wait until the terminal shows ``pattern`` (a regex) after what was already matched."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.screen)
            if m:
                self.screen = self.screen[m.end() :]
                return m
            if time.monotonic() > deadline:
                raise AssertionError(f"terminal never showed {pattern!r}; it showed:\n{self.screen}")
            self._pump(0.05)

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def hang_up(self) -> None:
        os.close(self.master)
        self.master = -1

    def finish(self, timeout: float = 20.0) -> tuple[int, str]:
        out, _ = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out.decode()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        if self.proc.stdout:
            self.proc.stdout.close()
        if self.proc.stdin:
            self.proc.stdin.close()
        if self.master >= 0:
            os.close(self.master)
            self.master = -1


def _take_ctty_from_stderr() -> None:
    fcntl.ioctl(2, termios.TIOCSCTTY, 0)


@pytest.fixture(autouse=True)
def only_askuser(monkeypatch):
    """Runs load this family alone: other families' state cannot change what these tests see."""
    monkeypatch.setenv("TETHER_PLUGINS", "askuser")
    monkeypatch.delenv("TETHER_APPROVAL_BY_CARD", raising=False)
    monkeypatch.delenv("TETHER_ASK_USER_TIMEOUT", raising=False)


@pytest.fixture
def pty_spawn(tmp_path, no_leftover_processes):
    """``pty_spawn(argv, env=..., stdin_tty=True)`` -> a `PtyProcess` killed after the test."""
    spawned: list[PtyProcess] = []

    def spawn(argv: list[str], env: dict[str, str] | None = None, stdin_tty: bool = True) -> PtyProcess:
        full_env = {**os.environ, "TETHER_PLUGINS": "askuser", **(env or {})}
        p = PtyProcess(argv, tmp_path, full_env, stdin_tty)
        spawned.append(p)
        return p

    yield spawn
    for p in spawned:
        p.close()
