"""vibe workers inside the built-in sandbox (real bubblewrap, real Landlock): the worker's command runs confined."""

from __future__ import annotations

import sys

import pytest

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

PROBE = """\
import os, socket, sys
sys.stdin.read()

def attempt(f):
    try:
        return f()
    except Exception as e:
        return type(e).__name__

print("key", attempt(lambda: open({key!r}).read()))
print("outside", attempt(lambda: open({home_file!r}, "w").write("x")))
print("inside", attempt(lambda: open("made-by-worker.txt", "w").write("ok")))
print("connect", attempt(lambda: socket.create_connection(("127.0.0.1", {port}), timeout=5)))
print("secret", os.environ.get("FAKE_SERVICE_TOKEN"))
"""


def results(text: str) -> dict[str, str]:
    return dict(
        line.split(" ", 1)
        for line in text.splitlines()
        if line.split(" ")[0] in {"key", "outside", "inside", "connect", "secret"}
    )


async def test_a_worker_runs_confined(confined, open_vibe):
    (confined.root / "probe.py").write_text(
        PROBE.format(key=str(confined.key), home_file=str(confined.home / "x"), port=confined.port)
    )
    async with open_vibe(
        confined.root, {"fast": [sys.executable, "probe.py"]}, options=confined.options()
    ) as run:
        await run.call("vibe_spawn", {"brief": "probe", "label": "probe"})
        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 60})
        assert done.data["status"] == "done", done.plain
    assert results(done.data["result"]) == {
        "key": confined.by_backend("FileNotFoundError", "PermissionError"),
        "outside": confined.by_backend("OSError", "PermissionError"),
        "inside": "2",
        "connect": confined.by_backend("ConnectionRefusedError", "PermissionError"),
        "secret": "None",
    }
    assert confined.accepted == 0 and (confined.root / "made-by-worker.txt").read_text() == "ok"


async def test_a_workers_network_and_api_key_follow_their_own_options(confined, open_vibe):
    (confined.root / "probe.py").write_text(
        PROBE.format(key=str(confined.key), home_file=str(confined.home / "x"), port=confined.port)
    )
    options = confined.options(sandbox_worker_network="on", sandbox_pass_env=["FAKE_SERVICE_TOKEN"])
    async with open_vibe(confined.root, {"fast": [sys.executable, "probe.py"]}, options=options) as run:
        await run.call("vibe_spawn", {"brief": "probe", "label": "probe"})
        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 60})
    seen = results(done.data["result"])
    assert (
        seen["connect"].startswith("<socket.socket")
        and seen["secret"] == "s3cret"
        and seen["key"] == confined.by_backend("FileNotFoundError", "PermissionError")
    )
    assert confined.accepted == 1


@pytest.mark.parametrize("confined", ["bwrap"], indirect=True)
async def test_without_bubblewrap_a_sandboxed_worker_is_refused(confined, open_vibe, monkeypatch, tmp_path):
    from tether import sandbox

    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    sandbox.bwrap_problem.cache_clear()
    try:
        async with open_vibe(
            confined.root,
            {"fast": [sys.executable, "-c", "open('ran.txt', 'w')"]},
            options=confined.options(),
        ) as run:
            refused = await run.call("vibe_spawn", {"brief": "b", "label": "l"})
            assert refused.is_error and refused.data["error"] == "sandbox_unavailable", refused.plain
            assert "bubblewrap (bwrap) is not on PATH" in refused.plain
            assert (await run.call("vibe_list")).data["workers"] == []
    finally:
        sandbox.bwrap_problem.cache_clear()
    assert not (confined.root / "ran.txt").exists()


async def test_a_sandboxed_worker_in_a_worktree_works_there_not_in_the_root(confined, open_vibe):
    import subprocess

    (confined.root / "app.py").write_text("x = 1\n")
    ident = ["-c", "user.name=dev", "-c", "user.email=dev@example.org"]
    subprocess.run(["git", "add", "-A"], cwd=confined.root, check=True)
    subprocess.run(["git", *ident, "commit", "-q", "-m", "init"], cwd=confined.root, check=True)
    edit = "import os, sys; sys.stdin.read(); open('app.py', 'w').write('x = 2\\n'); print(os.getcwd())"
    async with open_vibe(
        confined.root, {"fast": [sys.executable, "-c", edit]}, options={"sandbox": True}
    ) as run:
        await run.call("vibe_spawn", {"brief": "edit", "label": "edit"})
        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 60})
        assert done.data["status"] == "done", done.plain
        assert done.data["result"].strip() != str(confined.root)  # it ran in its worktree
        assert (confined.root / "app.py").read_text() == "x = 1\n"
        assert [c["path"] for c in done.data["changes"]] == ["app.py"]
        merged = await run.call("vibe_merge", {"worker_id": "w1", "action": "apply"})
        assert not merged.is_error, merged.plain
    assert (confined.root / "app.py").read_text() == "x = 2\n"


WRITES = """\
import json, subprocess, sys
sys.stdin.read()
root = {root!r}
out = {{}}

def attempt(name, f):
    try:
        out[name] = f()
    except OSError as e:
        out[name] = type(e).__name__

attempt("root_file", lambda: open(root + "/app.py", "w").write("x = 666\\n"))
attempt("root_new", lambda: open(root + "/new.txt", "w").write("x"))
attempt("hook", lambda: open(root + "/.git/hooks/post-commit", "w").write("#!/bin/sh\\n"))
attempt("config", lambda: open(root + "/.git/config", "a").write("\\n"))
attempt("here", lambda: open("app.py", "w").write("x = 2\\n"))
ident = ["-c", "user.name=w", "-c", "user.email=w@example.org"]
done = subprocess.run(["git", *ident, "commit", "-q", "-am", "worker commit"], capture_output=True, text=True)
out["commit"] = [done.returncode, done.stderr[-300:]]
print(json.dumps(out))
"""


def committed_root(confined) -> None:
    import subprocess

    (confined.root / "app.py").write_text("x = 1\n")
    ident = ["-c", "user.name=dev", "-c", "user.email=dev@example.org"]
    subprocess.run(["git", "add", "-A"], cwd=confined.root, check=True, timeout=30)
    subprocess.run(["git", *ident, "commit", "-q", "-m", "init"], cwd=confined.root, check=True, timeout=30)


async def test_a_sandboxed_worker_in_a_worktree_writes_its_worktree_and_commits_but_not_the_root(
    confined, open_vibe
):
    import json
    import subprocess

    committed_root(confined)
    probe = [sys.executable, "-c", WRITES.format(root=str(confined.root))]
    async with open_vibe(confined.root, {"fast": probe}, options=confined.options()) as run:
        spawned = await run.call("vibe_spawn", {"brief": "write", "label": "w", "isolation": "worktree"})
        assert not spawned.is_error, spawned.plain
        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 60})
        assert done.data["status"] == "done", done.plain
        got = json.loads(done.data["result"].splitlines()[-1])
        branch = done.data["branch"]
        log = subprocess.run(
            ["git", "log", "-1", "--format=%s", branch],
            cwd=confined.root,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    refused = confined.by_backend("OSError", "PermissionError")  # EROFS / EACCES
    assert (confined.root / "app.py").read_text() == "x = 1\n"
    assert not (confined.root / "new.txt").exists()
    assert not (confined.root / ".git" / "hooks" / "post-commit").exists()
    assert got["root_file"] == refused and got["root_new"] == refused
    assert got["hook"] == refused and got["config"] == refused
    assert got["here"] == 6 and got["commit"][0] == 0, got
    assert log == "worker commit"
    # the policy line says it: the worktree is writable, the root is not
    assert "the root and everything else read-only" in spawned.plain, spawned.plain
    assert "the root and everything else read-only" in done.data["sandbox"]


async def test_a_sandboxed_worker_with_isolation_none_still_writes_the_root(confined, open_vibe):
    import json

    committed_root(confined)
    probe = [sys.executable, "-c", WRITES.format(root=str(confined.root))]
    async with open_vibe(confined.root, {"fast": probe}, options=confined.options()) as run:
        spawned = await run.call("vibe_spawn", {"brief": "write", "label": "w", "isolation": "none"})
        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 60})
        assert done.data["status"] == "done", done.plain
        assert "root read-write" in spawned.plain, spawned.plain
    got = json.loads(done.data["result"].splitlines()[-1])
    assert got["root_file"] == 8 and got["root_new"] == 1
    assert (confined.root / "new.txt").read_text() == "x"


@pytest.mark.parametrize("confined", ["bwrap"], indirect=True)
async def test_a_harness_envelope_that_cannot_narrow_is_said_so(confined, open_vibe):
    from tether import hookimpl
    from tether.sandbox import Envelope

    class Harness:
        @hookimpl
        def tether_envelope(self, run, purpose):  # an older harness: it knows nothing of `writable`
            return Envelope("harness box", wrap=list, policy="the harness's own rules")

    committed_root(confined)
    cmd = [sys.executable, "-c", "import sys; sys.stdin.read()"]
    async with open_vibe(confined.root, {"fast": cmd}, plugins=[Harness()]) as run:
        spawned = await run.call("vibe_spawn", {"brief": "b", "label": "l", "isolation": "worktree"})
        await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 60})
    assert "sandboxed in harness box (the harness's own rules)" in spawned.plain, spawned.plain
    assert "did not say it makes only the worktree writable" in spawned.plain, spawned.plain
