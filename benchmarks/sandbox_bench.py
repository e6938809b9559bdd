"""The built-in sandbox against the host, side by side in one process, samples interleaved.

Run: uv run python benchmarks/sandbox_bench.py  (prints medians and each ratio against its target)

Anchor = the same run without the sandbox (run option sandbox=false), against each backend
(sandbox_backend=bwrap, landlock; under Landlock the debug launch runs with the network on, which
debug needs there). Measured: a kernel's start to
ready (Python; JavaScript, whose TCP goes through the relay when sandboxed) (target <= 1.15x), a `1+1`
cell through the eval tool (<= 1.1x), a tool() round trip timed inside the kernel (<= 1.1x), and a
debug launch to the first stop under debugpy (<= 1.1x); and a 10 MB download from a local server
through the egress proxy against direct from the same server (<= 1.2x).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs
import tether
from tether import Tier, Tool, arg
from tether_eval.hookspecs import tether_eval_kernels

STARTS = 9
CELLS = 100
BRIDGE_CALLS = 300
LAUNCHES = 9
DOWNLOADS = 21
DOWNLOAD_BYTES = 10 * 1024 * 1024
D = "benchmark a cell inside the sandbox"
APP = "def add(a, b):\n    c = a + b\n    return c\n\nprint(add(1, 2))\n"


@attrs.frozen
class EchoArgs:
    text: str = arg("what to echo")


class Echo:
    @tether.hookimpl
    def tether_register_tools(self, run, register):
        register(Tool("echo", Tier.READ, "echo text", EchoArgs, lambda ctx, a: a.text, family="bench"))


MODES = (None, "bwrap", "landlock")  # None: the host, the anchor


def _run(root: Path, mode: str | None, **options):
    opts = {"sandbox": mode is not None, **({"sandbox_backend": mode} if mode else {}), **options}
    return tether.open_run(root, conversation_id="bench", plugins=[Echo()], options=opts)


async def kernel_start(root: Path, mode: str | None, language: str) -> float:
    async with _run(root, mode) as run:
        factory = run.resource(tether_eval_kernels)
        started = time.perf_counter()
        await factory.get(language)
        return time.perf_counter() - started


async def cells_and_bridge(root: Path) -> tuple[dict, dict]:
    """Every run open at once, samples rotating between them, in rotating order."""
    code = (
        "import time, json\nts = []\n"
        f"for i in range({BRIDGE_CALLS // 10}):\n"
        "    t = time.perf_counter(); tool('echo', text='x'); ts.append(time.perf_counter() - t)\n"
        "print('TIMES', json.dumps(ts))\n"
    )
    cell = {m: [] for m in MODES}
    calls = {m: [] for m in MODES}
    async with _run(root, None) as host, _run(root, "bwrap") as bwrap, _run(root, "landlock") as landlock:
        runs = list(zip(MODES, (host, bwrap, landlock), strict=True))
        for _, run in runs:
            await run.call("eval", {"code": "0", "description": D})
        for i in range(CELLS):
            # rotated: the run that goes after another pays for its trailing work (measured ~0.4 ms)
            for mode, run in runs[i % 3 :] + runs[: i % 3]:
                started = time.perf_counter()
                r = await run.call("eval", {"code": "1+1", "description": D})
                cell[mode].append(time.perf_counter() - started)
                assert "2" in r.plain, r.plain
                if i % 10 == 0:
                    r = await run.call("eval", {"code": code, "description": D})
                    line = next(x for x in r.plain.splitlines() if x.startswith("TIMES "))
                    calls[mode] += json.loads(line[6:])
    return cell, calls


async def launch(root: Path, mode: str | None) -> float:
    # under Landlock debug needs the network on (it cannot tell loopback TCP from the network)
    async with _run(root, mode, **({"sandbox_network": "on"} if mode == "landlock" else {})) as run:
        await run.call("debug", {"action": "breakpoints", "file": "app.py", "lines": [2]})
        started = time.perf_counter()
        r = await run.call("debug", {"action": "launch", "program": "app.py"})
        took = time.perf_counter() - started
        assert r.data["stopped"]["line"] == 2, r.plain
        await run.call("debug", {"action": "terminate"})
        return took


def report(name: str, samples: dict, target: float) -> None:
    h = statistics.median(samples[None])
    for mode in [m for m in samples if m is not None]:
        b = statistics.median(samples[mode])
        ratio = b / h
        verdict = "ok" if ratio <= target else "OVER"
        print(
            f"{name:34s} {mode:8s} host {h * 1000:8.2f} ms   sandboxed {b * 1000:8.2f} ms   ratio {ratio:5.2f}x "
            f"(target <= {target:.2f}x: {verdict})"
        )


def egress_download(paced: bool = False) -> dict:
    """A 10 MB GET from a local server through the egress proxy against direct, samples alternating.

    The server and the client are processes of their own, as a real upstream and a sandboxed client are:
    a server thread in this process would share the proxy's GIL, which no real upstream does. ``paced``:
    the server sends at most 1 Gbit/s (1 MiB each 8.4 ms), as an upstream across a fast link does; on
    loopback, unpaced, the proxy's second hop is CPU the 2 cores share with the server and the client."""
    from tether.egress import Egress

    server_code = (
        "import http.server, os, sys, time\n"
        f"body = os.urandom({DOWNLOAD_BYTES})\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200)\n"
        "        self.send_header('Content-Length', str(len(body)))\n"
        "        self.end_headers()\n"
        "        for i in range(0, len(body), 1 << 20):\n"
        "            t = time.perf_counter()\n"
        "            self.wfile.write(body[i : i + (1 << 20)])\n"
        f"            time.sleep(max(0.0, {0.0084 if paced else 0.0} - (time.perf_counter() - t)))\n"
        "    def log_message(self, *a):\n"
        "        pass\n"
        "s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)\n"
        "print(s.server_address[1], flush=True)\n"
        "s.serve_forever()\n"
    )
    server = subprocess.Popen([sys.executable, "-c", server_code], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline())
    proxy = Egress(["files.bench.test"], resolve=lambda host, _: ("127.0.0.1", port))
    client = (
        "import json, sys, time, urllib.request\n"
        "via = urllib.request.build_opener(urllib.request.ProxyHandler({'http': sys.argv[1]}))\n"
        "direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))\n"
        "out = {'direct': [], 'proxy': []}\n"
        f"for i in range({DOWNLOADS}):\n"
        "    for mode in (('direct', 'proxy') if i % 2 else ('proxy', 'direct')):\n"
        "        url = 'http://files.bench.test/blob' if mode == 'proxy' else sys.argv[2]\n"
        "        t = time.perf_counter()\n"
        "        with (via if mode == 'proxy' else direct).open(url, timeout=60) as r:\n"
        f"            assert len(r.read()) == {DOWNLOAD_BYTES}\n"
        "        out[mode].append(time.perf_counter() - t)\n"
        "print(json.dumps(out))\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", client, f"http://127.0.0.1:{proxy.port}", f"http://127.0.0.1:{port}/blob"],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        got = json.loads(done.stdout)
        samples = {None: got["direct"], "proxy": got["proxy"]}
    finally:
        proxy.close()
        server.kill()
        server.wait()
    return samples


async def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="sandbox-bench-"))
    (root / "pyproject.toml").write_text("[project]\nname = 'bench'\nversion = '0'\n")
    (root / "app.py").write_text(APP)
    for language in ("python", "javascript"):
        starts = {m: [] for m in MODES}
        for _ in range(STARTS):  # interleaved: a busy machine weighs on every side alike
            for mode in MODES:
                starts[mode].append(await kernel_start(root, mode, language))
        report(f"kernel start -> ready ({language})", starts, 1.15)
    cell, calls = await cells_and_bridge(root)
    report("1+1 cell (python)", cell, 1.10)
    report("tool() round trip (python)", calls, 1.10)
    launches = {m: [] for m in MODES}
    for _ in range(LAUNCHES):
        for mode in MODES:
            launches[mode].append(await launch(root, mode))
    report("debug launch -> first stop (debugpy)", launches, 1.10)
    report("10 MB download via egress proxy", egress_download(), 1.20)
    report("10 MB download via egress proxy, 1 Gbit/s upstream", egress_download(paced=True), 1.20)


if __name__ == "__main__":
    print(f"python {sys.version.split()[0]}; medians")
    if sys.argv[1:] == ["egress"]:  # the download rows alone
        report("10 MB download via egress proxy", egress_download(), 1.20)
        report("10 MB download via egress proxy, 1 Gbit/s upstream", egress_download(paced=True), 1.20)
    else:
        asyncio.run(main())
