"""Benchmark of the debug family against a raw DAP client on the same adapter, in one run.

    uv run python benchmarks/debug_bench.py [--rounds N]

Measures, for debugpy and (when installed) lldb-dap:
- launch -> stopped: from starting the adapter to the stop at a breakpoint (tether: one `debug` launch call);
- a stack + scopes + variables round on a stopped program (tether: three `debug` calls).
The anchor is a minimal DAP sequence written here; it shares only the wire framing with the family.
Targets: ratio tether/raw <= 1.1 for each.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tether
from tether_debug.dap import encode, read_message

PY_APP = """\
def add(a, b):
    c = a + b
    return c


items = list(range(100))
total = add(2, 3)
print(total)
"""

C_APP = """\
#include <stdio.h>
int add(int a, int b) {
    int c = a + b;
    return c;
}
int main(void) {
    int values[3] = {1, 2, 3};
    printf("%d\\n", add(values[0], values[2]));
    return 0;
}
"""


ROUNDS_PER_STOP = 20


class Raw:
    """The anchor: a bare DAP conversation over an adapter's stdio."""

    def __init__(self, argv: list[str], cwd: Path, filters: list[str]) -> None:
        self.argv, self.cwd, self.filters = argv, cwd, filters
        self.seq = 0
        self.responses: dict[int, asyncio.Future] = {}
        self.events: asyncio.Queue = asyncio.Queue()

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=self.cwd, start_new_session=True
        )
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        while (msg := await read_message(self.proc.stdout)) is not None:
            if msg["type"] == "response":
                fut = self.responses.pop(msg["request_seq"])
                fut.set_result(msg)
            elif msg["type"] == "event":
                await self.events.put(msg)
            elif msg["type"] == "request":
                self.proc.stdin.write(encode({"type": "response", "seq": 0, "request_seq": msg["seq"], "command": msg["command"], "success": False}))

    def send(self, command: str, arguments: dict | None = None) -> asyncio.Future:
        self.seq += 1
        fut = asyncio.get_running_loop().create_future()
        self.responses[self.seq] = fut
        self.proc.stdin.write(encode({"type": "request", "seq": self.seq, "command": command, "arguments": arguments or {}}))
        return fut

    async def req(self, command: str, arguments: dict | None = None) -> dict:
        msg = await asyncio.wait_for(self.send(command, arguments), 30)
        assert msg["success"], msg
        return msg.get("body") or {}

    async def event(self, name: str) -> dict:
        while True:
            ev = await asyncio.wait_for(self.events.get(), 30)
            if ev["event"] == name:
                return ev

    async def launch_to_stop(self, adapter: str, launch: dict, source: Path, line: int) -> dict:
        await self.req("initialize", {"adapterID": adapter, "clientID": "raw", "linesStartAt1": True, "columnsStartAt1": True, "pathFormat": "path"})
        launched = self.send("launch", launch)
        await self.event("initialized")
        await self.req("setBreakpoints", {"source": {"path": str(source)}, "breakpoints": [{"line": line}]})
        await self.req("setExceptionBreakpoints", {"filters": self.filters})
        await self.req("configurationDone")
        await asyncio.wait_for(launched, 30)
        return await self.event("stopped")

    async def stop(self) -> None:
        with contextlib.suppress(TimeoutError, ConnectionError):
            await asyncio.wait_for(self.send("disconnect", {"terminateDebuggee": True}), 2)
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 2)
        except TimeoutError:
            pass
        from tether.procs import kill_tree

        kill_tree(self.proc.pid, 1.0)
        self.reader.cancel()


async def bench_adapter(name: str, root: Path, argv: list[str], launch: dict, program: str, source: str, line: int, rounds: int) -> dict:
    raw_launch, tether_launch, raw_round, tether_round = [], [], [], []
    async with tether.open_run(root, conversation_id="bench", options={"debug_stop_timeout": 30}) as run:
        await run.call("debug", {"action": "breakpoints", "file": source, "lines": [line]})
        for _ in range(rounds):
            # raw
            raw = Raw(argv, root, ["uncaught"] if name == "debugpy" else [])  # what tether sends too
            t = time.perf_counter()
            await raw.start()
            try:
                stopped = await raw.launch_to_stop(name, launch, root / source, line)
                raw_launch.append(time.perf_counter() - t)
                thread = stopped["body"]["threadId"]
                for _ in range(ROUNDS_PER_STOP):
                    t = time.perf_counter()
                    frames = (await raw.req("stackTrace", {"threadId": thread, "levels": 30}))["stackFrames"]
                    scopes = (await raw.req("scopes", {"frameId": frames[0]["id"]}))["scopes"]
                    await raw.req("variables", {"variablesReference": scopes[0]["variablesReference"]})
                    raw_round.append(time.perf_counter() - t)
            finally:  # the anchor's adapter and debuggee go whatever happened (tether's own go with its run)
                await raw.stop()
            # tether
            t = time.perf_counter()
            result = await run.call("debug", {"action": "launch", "program": program})
            tether_launch.append(time.perf_counter() - t)
            assert not result.is_error and result.data["stopped"], result.plain
            for _ in range(ROUNDS_PER_STOP):
                t = time.perf_counter()
                frames = (await run.call("debug", {"action": "stack"})).data["frames"]
                scopes = (await run.call("debug", {"action": "scopes", "frame_id": frames[0]["id"]})).data["scopes"]
                await run.call("debug", {"action": "variables", "reference": scopes[0]["reference"]})
                tether_round.append(time.perf_counter() - t)
            await run.call("debug", {"action": "terminate"})
    return {"launch": (raw_launch, tether_launch), "round": (raw_round, tether_round)}


def report(name: str, results: dict) -> None:
    for what, (raw, ours) in results.items():
        r, o = statistics.median(raw), statistics.median(ours)
        verdict = "ok" if o / r <= 1.1 else "OVER TARGET"
        label = "launch->stopped" if what == "launch" else "stack+scopes+variables"
        print(f"{name:8} {label:24} raw {r * 1000:8.1f} ms  tether {o * 1000:8.1f} ms  ratio {o / r:5.2f}  (target <= 1.10: {verdict}, n={len(raw)})")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "py"
        root.mkdir()
        (root / "pyproject.toml").write_text("[project]\nname = 'bench'\nversion = '0'\n")
        (root / "app.py").write_text(PY_APP)
        launch = {
            "type": "python", "program": str(root / "app.py"), "cwd": str(root), "python": [sys.executable],
            "console": "internalConsole", "subProcess": False, "justMyCode": True,
        }
        py = await bench_adapter("debugpy", root, [sys.executable, "-m", "debugpy.adapter"], launch, "app.py", "app.py", 2, rounds)
        report("debugpy", py)

        lldb = shutil.which("lldb-dap") or shutil.which("lldb-dap-19") or ("/usr/lib/llvm-19/bin/lldb-dap" if Path("/usr/lib/llvm-19/bin/lldb-dap").exists() else None)
        gcc = shutil.which("gcc") or shutil.which("cc")
        if lldb and gcc:
            croot = Path(tmp) / "c"
            croot.mkdir()
            (croot / "CMakeLists.txt").write_text("project(bench C)\n")
            (croot / "main.c").write_text(C_APP)
            cmd = [gcc, "-g", "-O0", "-o", str(croot / "demo"), str(croot / "main.c")]
            await asyncio.to_thread(subprocess.run, cmd, check=True)
            launch = {"program": str(croot / "demo"), "cwd": str(croot), "args": []}
            native = await bench_adapter("lldb", croot, [lldb], launch, "demo", "main.c", 3, rounds)
            report("lldb-dap", native)
        else:
            print("lldb-dap or gcc not installed: lldb skipped")


if __name__ == "__main__":
    asyncio.run(main())
