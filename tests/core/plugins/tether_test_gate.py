"""A harness policy that holds every `write` at approval until the test opens the gate, loaded with
`-p tether_test_gate`: each approval appends a line to $GATE_DIR/asked, then waits for $GATE_DIR/open."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tether import hookimpl


@hookimpl
async def tether_approve(run, tool, arguments, paths):
    if tool.name != "write":
        return None
    gate = Path(os.environ["GATE_DIR"])
    with (gate / "asked").open("a") as fh:
        fh.write(f"{arguments['path']}\n")
    for _ in range(6000):  # at most 10 minutes; the test opens it within seconds
        if (gate / "open").exists():
            return None
        await asyncio.sleep(0.1)
    return "the test never opened the gate"
