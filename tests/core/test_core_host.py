"""The `tether` console script: tools, call and serve, the latter driven by the official MCP client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from tether.procs import alive
from tether.testing import assert_no_traceback

TETHER = [sys.executable, "-m", "tether.cli"]


def tether_cmd(*args, root, env=None, input=None):
    return subprocess.run(
        [*TETHER, *args, "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        input=input,
    )


def test_tools_json_lists_tools_with_tiers_and_schemas(tmp_path):
    out = tether_cmd("tools", "--json", root=tmp_path)
    assert out.returncode == 0, out.stderr
    listing = json.loads(out.stdout)
    read = next(t for t in listing["tools"] if t["name"] == "read")
    assert read == {
        "name": "read",
        "family": "files",
        "tier": "read",
        "description": "Read a text file under the root, with line numbers.",
        "input_schema": read["input_schema"],
    }
    schema = read["input_schema"]
    assert schema["required"] == ["path"] and schema["additionalProperties"] is False
    assert schema["properties"]["offset"] == {
        "description": "First line to show (1-based).",
        "type": "integer",
        "minimum": 1,
        "default": 1,
    }
    assert all(set(u) == {"family", "reason"} for u in listing["unavailable"])


def test_a_reader_that_goes_away_gets_no_traceback(tmp_path):
    # `tether tools | head -1`: the reader closed its end before tether wrote
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [*TETHER, "tools", "--root", str(tmp_path)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 141
    assert proc.stderr == ""


def test_tools_on_plan_surface_hide_write_tools(tmp_path):
    names = {
        t["name"]
        for t in json.loads(tether_cmd("tools", "--json", "--surface", "plan", root=tmp_path).stdout)["tools"]
    }
    assert "read" in names and not names & {"write", "edit", "apply_patch"}


def test_call_exit_codes_and_json_shape(tmp_path):
    ok = tether_cmd(
        "call", "write", json.dumps({"path": "a.txt", "content": "hi\n"}), "--json", root=tmp_path
    )
    assert ok.returncode == 0, ok.stderr
    body = json.loads(ok.stdout)
    assert (
        body["is_error"] is False and body["content"][0]["type"] == "text" and body["data"]["path"] == "a.txt"
    )
    assert (tmp_path / "a.txt").read_text() == "hi\n"

    err = tether_cmd("call", "read", '{"path": "missing.txt"}', root=tmp_path)
    assert err.returncode == 1 and "no such file: 'missing.txt'" in err.stdout

    for bad in (
        ["call", "read", "{not json"],
        ["call", "read", "[1]"],
        ["call", "read", "--surface", "nope"],
        ["bogus"],
    ):
        usage = tether_cmd(*bad, root=tmp_path)
        assert usage.returncode == 2, bad
        assert usage.stderr.startswith("tether: ")
        assert_no_traceback(usage.stderr, "stderr")

    refused = tether_cmd(
        "call", "write", '{"path": "b.txt", "content": "x"}', "--surface", "plan", root=tmp_path
    )
    assert (
        refused.returncode == 1
        and "unknown tool 'write'" in refused.stdout
        and not (tmp_path / "b.txt").exists()
    )


def _server(root, extra_env=None):
    env = dict(os.environ, **(extra_env or {}))
    return StdioServerParameters(
        command=sys.executable, args=["-m", "tether.cli", "serve", "--root", str(root)], env=env
    )


async def test_serve_speaks_mcp_to_the_official_client(tmp_path):
    (tmp_path / "hello.txt").write_text("hello\n")
    async with stdio_client(_server(tmp_path)) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "tether"
        await session.send_ping()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert tools["read"].annotations.read_only_hint is True
        assert tools["write"].annotations.destructive_hint is True
        assert tools["read"].input_schema["required"] == ["path"]

        result = await session.call_tool("read", {"path": "hello.txt"})
        assert result.is_error is False
        assert result.content[0].text == "     1\thello"
        assert result.meta["tether/data"]["total_lines"] == 1

        bad = await session.call_tool("read", {"path": "../outside"})
        assert bad.is_error is True and "outside the root" in bad.content[0].text

        invalid = await session.call_tool("read", {"path": 3})
        assert invalid.is_error is True and "path: expected string, got integer 3" in invalid.content[0].text


async def test_serve_sends_progress_and_end_of_stdin_reaps_children(tmp_path, plugin_site):
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async with (
        stdio_client(_server(tmp_path, {"PROCFAM_ON": "1"})) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        slow = await session.call_tool("proc_slow", {"steps": 3}, progress_callback=on_progress)
        assert slow.content[0].text == "done after 3 steps"
        spawned = await session.call_tool("proc_spawn", {})
        pid = spawned.meta["tether/data"]["pid"]
        assert alive(pid)
    # leaving the context closes the server's stdin: the run must close and kill the tree
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)
    assert [p[0] for p in progress] == [1, 2, 3] and progress[-1][2] == "step 3"


def test_serve_stdout_carries_only_protocol(tmp_path):
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
    ]
    proc = subprocess.Popen(
        [*TETHER, "serve", "--root", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in lines))
        proc.stdin.flush()
        replies = [json.loads(proc.stdout.readline()) for _ in range(3)]
        proc.stdin.close()
        assert proc.wait(timeout=20) == 0
        assert proc.stdout.read() == ""  # nothing but protocol replies, nothing after them
    finally:
        proc.kill()
    assert [r.get("id") for r in replies] == [1, 2, 3]
    assert (
        replies[2]["result"]["isError"] is True
        and "unknown tool 'nope'" in replies[2]["result"]["content"][0]["text"]
    )


def test_call_shows_progress_on_a_terminal_and_not_in_piped_output(tmp_path, plugin_site):
    import pty

    env = dict(os.environ, PROCFAM_ON="1", TETHER_PLUGINS="procfam")
    pid, fd = pty.fork()
    if pid == 0:  # the child: `tether call` with its stdout and stderr on the pseudo-terminal
        os.execve(
            sys.executable, [*TETHER, "call", "proc_slow", '{"steps": 3}', "--root", str(tmp_path)], env
        )
    chunks = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    screen = b"".join(chunks).decode()
    assert os.waitstatus_to_exitcode(status) == 0
    assert "[33%] step 1" in screen and "[100%] step 3" in screen
    assert screen.rstrip().endswith("done after 3 steps")

    piped = tether_cmd("call", "proc_slow", '{"steps": 3}', root=tmp_path, env=env)
    assert piped.returncode == 0 and piped.stdout == "done after 3 steps\n" and piped.stderr == ""


def test_run_options_from_the_command_line(tmp_path):
    (tmp_path / "big.txt").write_text("x" * 5000)
    capped = tether_cmd(
        "call", "read", '{"path": "big.txt"}', "--option", "max_output_chars=1000", root=tmp_path
    )
    assert capped.returncode == 0 and "[output cut: showed" in capped.stdout
    bad = tether_cmd("call", "read", '{"path": "big.txt"}', "--option", "novalue", root=tmp_path)
    assert bad.returncode == 2 and "--option takes KEY=VALUE" in bad.stderr


def test_a_policy_module_with_p_and_blocking_with_no(tmp_path):
    plugins = os.path.join(os.path.dirname(__file__), "plugins")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([plugins, os.environ.get("PYTHONPATH", "")])}
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    refused = tether_cmd(
        "call",
        "write",
        '{"path": "pyproject.toml", "content": "x"}',
        "-p",
        "tether_test_policy",
        "--json",
        root=tmp_path,
        env=env,
    )
    assert refused.returncode == 1, refused.stderr
    assert (
        "pyproject.toml is protected by the harness's policy"
        in json.loads(refused.stdout)["content"][0]["text"]
    )
    assert (tmp_path / "pyproject.toml").read_text() == "[project]\nname = 'x'\n"
    # the plugin's own surface is accepted by --surface; -p no:NAME keeps a family out
    listing = tether_cmd(
        "tools",
        "--json",
        "--surface",
        "review",
        "--plugin",
        "tether_test_policy",
        "-p",
        "no:astgrep",
        root=tmp_path,
        env=env,
    )
    assert listing.returncode == 0, listing.stderr
    tools = {t["name"]: t for t in json.loads(listing.stdout)["tools"]}
    assert {"read", "write", "edit", "apply_patch"} <= set(tools) and "ast_grep" not in tools
    assert {t["tier"] for t in tools.values()} <= {"read", "write"}
    unknown = tether_cmd("tools", "--surface", "review", root=tmp_path)  # without the plugin: no such surface
    assert unknown.returncode == 2 and "unknown surface 'review'" in unknown.stderr
    missing = tether_cmd("tools", "-p", "no_such_policy_module", root=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.strip().startswith(
        "tether: -p no_such_policy_module: the plugin module cannot be imported"
    )
