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
