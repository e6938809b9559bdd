"""Helpers of the `tether serve` tests: `from serve_support import http_server`."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys


@contextlib.contextmanager
def http_server(root, bind="127.0.0.1:0", *args, **env):
    proc = subprocess.Popen(
        [sys.executable, "-m", "tether.cli", "serve", "--root", str(root), "--http", bind, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **env),
    )
    try:
        line = proc.stderr.readline()  # the server says where it listens once the socket is bound
        found = re.search(r"at (http://\S+/mcp)", line)
        assert found, (
            f"no address on stderr: {line!r} {proc.stderr.read() if proc.poll() is not None else ''}"
        )
        yield proc, found.group(1).replace("0.0.0.0", "127.0.0.1")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        proc.stdout.close()
        proc.stderr.close()
