"""A worker cannot make tether's git run a program of its own (real git, real worker processes).

tether runs git on the host, unconfined, in a worker's worktree (to read its changes, to keep them at
close and after a SIGKILL, to merge). The worker may write that worktree and its own git dir, so it
can rewrite the worktree's ``.git`` file, its git dir's ``commondir``, ``config.worktree`` or index to
point git at a config of its own whose clean filter (named by a ``.gitattributes`` of the worker's)
writes a marker outside the worktree. The marker must never appear, and tether still reports the
worker's real changes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tether.testing import FAULT_MARKERS, assert_model_error
from worktree_support import branches, busy, git, read, vibe_server, wait_for, worktrees

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


# argv: VARIANT MARKER [sleep]. Changes app.py, asks for the filter "evil" on every file, then points
# git at a config of its own defining it (a command that writes MARKER), as VARIANT says.
PLANT = textwrap.dedent(
    """
    import os, sys, time
    variant, marker = sys.argv[1], sys.argv[2]
    sys.stdin.read()
    with open("app.py", "w") as fh:
        fh.write("x = 'worker'\\n")
    with open(".gitattributes", "w") as fh:
        fh.write("* filter=evil diff=evil\\n")
    gitdir = open(".git").read().split("gitdir: ", 1)[1].strip()  # its own git dir
    common = os.path.realpath(os.path.join(gitdir, open(os.path.join(gitdir, "commondir")).read().strip()))
    evil = (
        "[filter \\"evil\\"]\\n\\tclean = \\"touch '" + marker + "'; cat\\"\\n\\tsmudge = cat\\n"
        "[diff \\"evil\\"]\\n\\ttextconv = \\"touch '" + marker + "'; cat\\"\\n"
        "[core]\\n\\tfsmonitor = \\"touch '" + marker + "'\\"\\n\\thooksPath = hooks\\n"
    )
    fake = os.path.join(gitdir, "fake")  # a git dir of its own, objects borrowed from the real one
    os.makedirs(os.path.join(fake, "refs"), exist_ok=True)
    os.makedirs(os.path.join(fake, "objects", "info"), exist_ok=True)
    with open(os.path.join(fake, "objects", "info", "alternates"), "w") as fh:
        fh.write(os.path.join(common, "objects") + "\\n")
    with open(os.path.join(fake, "HEAD"), "w") as fh:
        fh.write("ref: refs/heads/main\\n")
    with open(os.path.join(fake, "config"), "w") as fh:
        fh.write("[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n" + evil)
    if variant == "gitfile":  # the worktree's .git names the fake git dir
        with open(".git", "w") as fh:
            fh.write("gitdir: " + fake + "\\n")
    elif variant == "commondir":  # its git dir's commondir names the fake repository
        with open(os.path.join(gitdir, "commondir"), "w") as fh:
            fh.write(fake + "\\n")
    elif variant == "worktree-config":  # read when the repository has extensions.worktreeConfig
        with open(os.path.join(gitdir, "evil.config"), "w") as fh:
            fh.write(evil)
        with open(os.path.join(gitdir, "config.worktree"), "w") as fh:
            fh.write("[include]\\n\\tpath = evil.config\\n")
    elif variant == "index-garbage":  # an index git cannot read
        with open(os.path.join(gitdir, "index"), "wb") as fh:
            fh.write(b"DIRC not an index at all")
    elif variant == "index-outside":  # an index naming a file outside the worktree (git add would read it)
        import hashlib, struct
        name = os.path.relpath(os.path.join(os.path.dirname(marker), "secret.txt")).encode()
        entry = struct.pack(">10I", *[0] * 6, 0o100644, 0, 0, 0) + bytes(20) + struct.pack(">H", len(name))
        entry += name + bytes(8 - (len(entry) + len(name)) % 8)
        body = b"DIRC" + struct.pack(">II", 2, 1) + entry
        with open(os.path.join(gitdir, "index"), "wb") as fh:
            fh.write(body + hashlib.sha1(body).digest())
    elif variant == "start-tree":  # the start's tree object rewritten: it names a path outside
        import binascii, subprocess, zlib
        tree = subprocess.run(["git", "rev-parse", "HEAD^{tree}"], capture_output=True, text=True).stdout.strip()
        blob = subprocess.run(["git", "rev-parse", "HEAD:app.py"], capture_output=True, text=True).stdout.strip()
        body = b"100644 ../../outside.txt\\0" + binascii.unhexlify(blob)
        path = os.path.join(common, "objects", tree[:2], tree[2:])
        os.unlink(path)
        with open(path, "wb") as fh:
            fh.write(zlib.compress(b"tree %d\\0" % len(body) + body))
    elif variant == "index-device":  # an index that never ends
        os.unlink(os.path.join(gitdir, "index"))
        os.symlink("/dev/zero", os.path.join(gitdir, "index"))
    with open("planted.txt", "w") as fh:
        fh.write(variant + "\\n")
    print("planted", variant, flush=True)
    if "sleep" in sys.argv[3:]:
        time.sleep(300)
    """
)
REDIRECTS = ["gitfile", "commondir", "worktree-config"]
WORKER_CHANGES = [("A", ".gitattributes"), ("M", "app.py"), ("A", "planted.txt")]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.org")
    git(root, "config", "user.name", "dev")
    (root / "app.py").write_text("x = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def planter(variant: str, marker: Path, *more: str) -> list[str]:
    return [sys.executable, "-c", PLANT, variant, str(marker), *more]


def enable_worktree_config(repo: Path) -> None:
    git(repo, "config", "core.repositoryformatversion", "1")
    git(repo, "config", "extensions.worktreeConfig", "true")


@pytest.mark.parametrize("variant", [*REDIRECTS, "index-garbage", "index-device", "index-outside"])
async def test_a_worker_that_redirects_its_git_runs_nothing_on_the_host(open_vibe, repo, tmp_path, variant):
    marker = tmp_path / "pwned"
    secret = tmp_path / "secret.txt"  # beside the repository: never to be read into it
    secret.write_text("the user's secret, not the worker's to read\n")
    secret_id = git(tmp_path, "hash-object", str(secret)).strip()
    if variant == "worktree-config":
        enable_worktree_config(repo)
    async with open_vibe(repo, {"fast": planter(variant, marker)}) as run:
        spawned = await run.call("vibe_spawn", {"brief": "plant", "label": "evil"})
        assert not spawned.is_error, spawned.plain
        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 60})
        assert done.data["status"] == "done", done.plain
        assert f"planted {variant}" in done.data["result"]
        assert not marker.exists(), "vibe_wait ran the worker's filter on the host"
        assert not any(marker in done.plain for marker in FAULT_MARKERS), done.plain
        assert [(c["status"], c["path"]) for c in done.data["changes"]] == WORKER_CHANGES, done.plain

        listed = await run.call("vibe_list")
        assert not listed.is_error and not marker.exists()
        assert [(c["status"], c["path"]) for c in listed.data["workers"][0]["changes"]] == WORKER_CHANGES

        # app.py lands; what is left stays in the worktree, kept on its branch at close
        merged = await run.call("vibe_merge", {"worker_id": "w1", "action": "apply", "paths": ["app.py"]})
        assert not merged.is_error, merged.plain
        assert (repo / "app.py").read_text() == "x = 'worker'\n" and merged.data["removed"] is False
        assert not marker.exists(), "vibe_merge ran the worker's filter on the host"
    assert not marker.exists(), "the run's close ran the worker's filter on the host"
    assert worktrees(repo) == [str(repo)]
    (branch,) = branches(repo)
    assert git(repo, "show", f"{branch}:planted.txt") == f"{variant}\n"
    assert git(repo, "show", f"{branch}:app.py") == "x = 'worker'\n"
    assert git(repo, "log", "-1", "--format=%an", branch) == "tether vibe\n"
    lookup = subprocess.run(["git", "cat-file", "-e", secret_id], cwd=repo, capture_output=True, timeout=60)
    assert lookup.returncode != 0, "git read a file outside the worktree into the repository"


@pytest.mark.parametrize("variant", REDIRECTS)
async def test_the_sweep_after_a_sigkill_runs_nothing_of_the_worker_and_keeps_its_work(
    open_vibe, repo, tmp_path, variant
):
    marker = tmp_path / "pwned"
    if variant == "worktree-config":
        enable_worktree_config(repo)
    script = tmp_path / "server.py"
    script.write_text(vibe_server(repo, planter(variant, marker, "sleep"), "plant"))
    server = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "spawned"
        await wait_for(lambda: any(read(Path(w) / "planted.txt") for w in busy(repo)))
    finally:
        os.kill(server.pid, signal.SIGKILL)
        server.wait()
    async with open_vibe(repo, {"fast": planter(variant, marker)}) as run:
        assert not marker.exists(), "the sweep ran the worker's filter on the host"
        assert worktrees(repo) == [str(repo)]
        (branch,) = branches(repo)
        assert git(repo, "show", f"{branch}:app.py") == "x = 'worker'\n"
        listed = await run.call("vibe_list")
        assert branch in listed.plain
    assert not marker.exists()
    assert not list((repo / ".git" / "tether-vibe").iterdir())


async def test_a_sandboxed_worker_cannot_reach_the_host_through_its_git_dir(confined, open_vibe, tmp_path):
    """The same from inside the built-in sandbox, where the worker may write its git dir but nothing
    outside its worktree: the marker is where only unconfined git could write it."""
    marker = tmp_path / "pwned-from-the-sandbox"
    (confined.root / "app.py").write_text("x = 1\n")
    ident = ["-c", "user.name=dev", "-c", "user.email=dev@example.org"]
    subprocess.run(["git", "add", "-A"], cwd=confined.root, check=True, timeout=30)
    subprocess.run(["git", *ident, "commit", "-q", "-m", "init"], cwd=confined.root, check=True, timeout=30)
    options = confined.options()
    async with open_vibe(confined.root, {"fast": planter("commondir", marker)}, options=options) as run:
        await run.call("vibe_spawn", {"brief": "plant", "label": "evil", "isolation": "worktree"})
        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 60})
        assert done.data["status"] == "done", done.plain
        assert "planted commondir" in done.data["result"], done.plain
        assert [(c["status"], c["path"]) for c in done.data["changes"]] == WORKER_CHANGES, done.plain
        assert not marker.exists()
    assert not marker.exists()
    (branch,) = branches(confined.root)
    assert git(confined.root, "show", f"{branch}:app.py") == "x = 'worker'\n"


def test_planting_works_on_plain_git(repo, tmp_path):
    """The attack is real: plain git in the planted worktree runs the worker's filter (what tether's
    git did before it named the repository itself)."""
    marker = tmp_path / "pwned"
    work = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", "--detach", str(work), "HEAD")
    subprocess.run(planter("commondir", marker), cwd=work, input="", text=True, timeout=60, check=True)
    assert not marker.exists()
    git(work, "add", "-A")
    assert marker.exists()


async def test_a_change_git_names_outside_the_worktree_is_not_read_nor_merged(open_vibe, repo, tmp_path):
    """Its start's tree object rewritten (the repository's objects are the worker's to write), git would
    name a path outside the worktree as changed: tether says it cannot read the change, and a merge is
    one paragraph that writes nothing."""
    marker = tmp_path / "pwned"
    async with open_vibe(repo, {"fast": planter("start-tree", marker)}) as run:
        await run.call("vibe_spawn", {"brief": "plant", "label": "evil"})
        done = await run.call("vibe_wait", {"worker_id": "w1", "timeout_seconds": 60})
        assert done.data["status"] == "done" and "planted start-tree" in done.data["result"], done.plain
        assert done.data["changes"] is None and "could not be read" in done.plain, done.plain
        assert "outside the worktree" in done.plain, done.plain
        assert not any(marker in done.plain for marker in FAULT_MARKERS), done.plain
        merged = await run.call("vibe_merge", {"worker_id": "w1", "action": "apply"})
        assert_model_error(merged, "could not be read")
        assert len(merged.plain.splitlines()) == 1, merged.plain
        assert (repo / "app.py").read_text() == "x = 1\n" and not (tmp_path / "outside.txt").exists()
    assert not marker.exists() and not (tmp_path / "outside.txt").exists()
    (branch,) = branches(repo)  # what it holds is still kept on its branch
    assert git(repo, "show", f"{branch}:app.py") == "x = 'worker'\n"
