"""Processes that try to outlive tether, and a raw client of `tether serve` to kill under them.

Shared by tests/core/test_core_leftovers.py and benchmarks/fault_campaign.py (which puts this folder
on sys.path).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tether.procs import alive

# a process that double-forks into a daemon of its own session and prints the daemon's pid; with the
# argument CLEAR, the daemon also drops its whole environment (the run's tag with it) by re-executing
DAEMON = textwrap.dedent(
    """
    import os, sys, time
    if os.fork():
        os._exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
    print(os.getpid(), flush=True)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    if "CLEAR" in sys.argv:
        os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)"], {})
    time.sleep(300)
    """
)
# a cell that starts a child in a session of its own and a double-forked setsid daemon: their pids
CELL = (
    "import subprocess, sys\n"
    "own = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True)\n"
    f"daemon = subprocess.run([sys.executable, '-c', {DAEMON!r}], capture_output=True, text=True).stdout.strip()\n"
    "print(own.pid, daemon)\n"
)
# a cell that starts a daemon that also clears its environment: its pid
BARE_CELL = (
    "import subprocess, sys\n"
    f"print(subprocess.run([sys.executable, '-c', {DAEMON!r}, 'CLEAR'], capture_output=True, text=True).stdout.strip())\n"
)


def wait_gone(pids, timeout: float = 20.0) -> list[int]:
    """The pids still alive after ``timeout`` seconds (waited for, not slept)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not [p for p in pids if alive(p)]:
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def cell_pids(text: str) -> list[int]:
    """The pids a cell printed: its last line that starts with a number."""
    line = next(x for x in reversed(text.splitlines()) if x.strip() and x.split()[0].isdigit())
    return [int(x) for x in line.split()]


class Serve:
    """`tether serve` over stdio, raw JSON-RPC: enough to call tools, send garbage, signal and kill it."""

    def __init__(self, root: Path, *options: str) -> None:
        args = [sys.executable, "-m", "tether.cli", "serve", "--root", str(root), "--vibe"]
        for o in options:
            args += ["--option", o]
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.ids = 0
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "0"},
            },
        )
        self.send_line(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def send_line(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def answer(self, wanted) -> dict:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError("the server closed its stdout")
            message = json.loads(line)
            if "method" not in message and message.get("id") == wanted:
                return message

    def request(self, method: str, params) -> dict:
        self.ids += 1
        self.send_line(json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}))
        message = self.answer(self.ids)
        return message.get("result", message)

    def call(self, tool: str, arguments: dict) -> tuple[bool, str]:
        """Whether the call failed, and its text."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments})
        return bool(result.get("isError")), "\n".join(b.get("text", "") for b in result.get("content", []))

    def close(self) -> None:
        """Kill the server if it still runs, and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
