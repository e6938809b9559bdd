"""debug inside the built-in sandbox (real bubblewrap, real Landlock): the adapter and the program run confined.

debugpy's adapter runs inside too (it talks to its debuggee over the sandbox's own loopback); delve
listens on TCP, which tether relays over stdio from inside. Landlock allows TCP by port only, not by
address: with the network off it cannot let an adapter reach its program over loopback and nothing
else, so debug refuses there, and runs confined (files, processes) with the network on.
"""

from __future__ import annotations

import sys

import pytest
import tether
from support import require_binary
from tether.testing import assert_model_error

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

PROBE = """\
import os, socket

def attempt(f):
    try:
        return f()
    except Exception as e:
        return type(e).__name__

key = attempt(lambda: open({key!r}).read())
outside = attempt(lambda: open({home_file!r}, "w").write("x"))
inside = attempt(lambda: open("made-by-debuggee.txt", "w").write("ok"))
hook = attempt(lambda: open(".git/hooks/pre-commit", "w").write("#!/bin/sh\\n"))
connect = attempt(lambda: socket.create_connection(("127.0.0.1", {port}), timeout=5))
secret = os.environ.get("FAKE_SERVICE_TOKEN")
print("done")
"""


async def test_a_debugged_python_program_is_confined(confined):
    (confined.root / "probe.py").write_text(
        PROBE.format(key=str(confined.key), home_file=str(confined.home / "x"), port=confined.port)
    )
    # Landlock: debug needs the network on (see the module docstring)
    options = confined.options(**confined.by_backend({}, {"sandbox_network": "on"}))
    async with tether.open_run(confined.root, conversation_id="c", options=options) as run:
        await run.call("debug", {"action": "breakpoints", "file": "probe.py", "lines": [15]})
        launched = await run.call("debug", {"action": "launch", "program": "probe.py"})
        assert not launched.is_error and launched.data["stopped"]["line"] == 15, launched.plain
        seen = {}
        for name in ("key", "outside", "inside", "hook", "connect", "secret"):
            r = await run.call("debug", {"action": "evaluate", "expression": f"str({name})"})
            seen[name] = r.data["result"]
        if seen["connect"][1:].startswith("<socket.socket"):
            seen["connect"] = "connected"
        assert seen == {
            "key": confined.by_backend("'FileNotFoundError'", "'PermissionError'"),
            "outside": confined.by_backend("'OSError'", "'PermissionError'"),
            "inside": "'2'",
            "hook": confined.by_backend("'OSError'", "'10'"),  # Landlock cannot protect .git's hooks
            "connect": confined.by_backend("'ConnectionRefusedError'", "connected"),
            "secret": "'None'",
        }, seen
        await run.call("debug", {"action": "terminate"})
    assert confined.accepted == confined.by_backend(0, 1) and not (confined.home / "x").exists()
    assert (confined.root / "made-by-debuggee.txt").read_text() == "ok"


# the relay is bubblewrap's: under Landlock debug runs with the network on, where delve's port is reached directly
@pytest.mark.parametrize("confined", ["bwrap"], indirect=True)
async def test_delve_is_relayed_from_inside_the_sandbox(confined):
    require_binary("dlv")
    require_binary("go")
    (confined.root / "go.mod").write_text("module example.com/demo\n\ngo 1.19\n")
    (confined.root / "main.go").write_text(
        'package main\n\nimport (\n\t"fmt"\n\t"os"\n)\n\nfunc main() {\n'
        f'\t_, err := os.ReadFile("{confined.key}")\n'
        '\tfmt.Println("read:", err != nil)\n}\n'
    )
    async with tether.open_run(
        confined.root,
        conversation_id="c",
        options=confined.options(debug_stop_timeout=120, debug_launch_timeout=240),
    ) as run:
        await run.call("debug", {"action": "breakpoints", "file": "main.go", "lines": [10]})
        launched = await run.call("debug", {"action": "launch", "program": "."})
        assert not launched.is_error and launched.data["stopped"]["line"] == 10, launched.plain
        err = await run.call("debug", {"action": "evaluate", "expression": "err != nil"})
        assert err.data["result"] == "true", err.plain
        ended = await run.call("debug", {"action": "continue"})
        assert "read: true" in ended.data["output"], ended.plain


async def test_under_landlock_without_network_a_launch_is_refused_and_says_why(tmp_path):
    from tether import sandbox

    sandbox.landlock_probe.cache_clear()
    (tmp_path / "app.py").write_text("open('ran.txt', 'w')\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'app'\nversion = '0'\n")
    options = {"sandbox": True, "sandbox_backend": "landlock"}
    async with tether.open_run(tmp_path, conversation_id="c", options=options) as run:
        refused = await run.call("debug", {"action": "launch", "program": "app.py"})
    assert refused.is_error and refused.data["error"] == "sandbox_unavailable", refused.plain
    assert "Landlock cannot tell loopback from the network" in refused.plain, refused.plain
    assert_model_error(refused, 'sandbox_network="on"')
    assert not (tmp_path / "ran.txt").exists()


@pytest.mark.parametrize("confined", ["bwrap"], indirect=True)
async def test_without_bubblewrap_a_sandboxed_launch_is_refused(confined, monkeypatch, tmp_path):
    from tether import sandbox

    (confined.root / "app.py").write_text("open('ran.txt', 'w')\n")
    empty = tmp_path / "bin"  # python3, no bwrap
    empty.mkdir()
    (empty / "python3").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", str(empty))
    sandbox.bwrap_problem.cache_clear()
    try:
        async with tether.open_run(confined.root, conversation_id="c", options=confined.options()) as run:
            refused = await run.call("debug", {"action": "launch", "program": "app.py"})
    finally:
        sandbox.bwrap_problem.cache_clear()
    assert refused.is_error and refused.data["error"] == "sandbox_unavailable", refused.plain
    assert_model_error(refused, "bubblewrap (bwrap) is not on PATH")
    assert not (confined.root / "ran.txt").exists()


@pytest.mark.parametrize("confined", ["bwrap"], indirect=True)  # Landlock: debug needs the network on
async def test_a_debuggees_connection_the_egress_proxy_refused_is_said_in_the_next_answer(confined):
    (confined.root / "fetch.py").write_text(
        "import urllib.request\n"
        "try:\n"
        "    urllib.request.urlopen('https://github.com/', timeout=30)\n"
        "except OSError as e:\n"
        "    print('refused', e)\n"
        "done = True\n"
    )
    options = confined.options(sandbox_network=["pypi.org"])
    async with tether.open_run(confined.root, conversation_id="c", options=options) as run:
        await run.call("debug", {"action": "breakpoints", "file": "fetch.py", "lines": [6]})
        launched = await run.call("debug", {"action": "launch", "program": "fetch.py"})
        assert not launched.is_error and launched.data["stopped"]["line"] == 6, launched.plain
        said = launched.plain + (await run.call("debug", {"action": "output"})).plain
        assert "[sandbox: blocked 1 connection: github.com:443 (not in sandbox_network)" in said, said
        await run.call("debug", {"action": "terminate"})
