"""Workers in git worktrees of their own (real git in a temporary repository): what they see, what
they changed, vibe_merge landing it all or nothing, and the cleanup at close and after a SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tether
from worktree_support import branches, busy, git, read, vibe_server, wait_for, worktrees

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

# reads its briefing; obeys "@write PATH TEXT", "@delete PATH", "@show PATH", "@ls", "@result JSON", "@sleep S"
EDITOR = textwrap.dedent(
    """
    import json, os, sys, time
    for line in sys.stdin.read().splitlines():
        word, _, rest = line.partition(" ")
        if word == "@write":
            path, _, text = rest.partition(" ")
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w") as fh:
                fh.write(text.replace("\\\\n", "\\n") + "\\n")
        elif word == "@delete":
            os.unlink(rest)
        elif word == "@show":
            print(f"{rest}=" + (open(rest).read().strip() if os.path.exists(rest) else "(missing)"))
        elif word == "@ls":
            print("ls=" + ",".join(sorted(os.listdir("."))))
        elif word == "@result":
            with open(os.environ["TETHER_VIBE_RESULT"], "w") as fh:
                fh.write(rest)
        elif word == "@sleep":
            time.sleep(float(rest))
        elif word == "@env":
            print("worktree=" + os.environ.get("TETHER_VIBE_WORKTREE", ""))
            print("cwd=" + os.getcwd())
    print("edited")
    """
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.org")
    git(root, "config", "user.name", "dev")
    (root / "app.py").write_text("x = 1\n")
    (root / "lib.py").write_text("y = 1\n")
    (root / ".gitignore").write_text(".venv/\nbuild/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    (tmp_path / "editor.py").write_text(EDITOR)
    return root


@pytest.fixture
def editor(repo: Path) -> list[str]:
    return [sys.executable, str(repo.parent / "editor.py")]


async def finish(run, brief: str, **extra) -> dict:
    spawned = await run.call("vibe_spawn", {"brief": brief, "label": "edit", **extra})
    assert not spawned.is_error, spawned.plain
    done = await run.call("vibe_wait", {"worker_id": spawned.data["worker_id"], "timeout_seconds": 60})
    assert done.data["status"] == "done", done.plain
    return {"spawned": spawned, "done": done}


async def test_two_workers_on_one_file_the_second_merge_is_refused_naming_it(open_vibe, repo, editor):
    async with open_vibe(repo, {"fast": editor}) as run:
        one = await finish(run, "@write app.py x = 'one'\n@write new.py n = 1")
        await finish(run, "@write app.py x = 'two'\n@write lib.py y = 2")
        assert (repo / "app.py").read_text() == "x = 1\n"  # the root is untouched until a merge
        assert one["spawned"].data["isolation"] == "worktree" and "worktree" in one["spawned"].plain
        assert [(c["status"], c["path"]) for c in one["done"].data["changes"]] == [
            ("M", "app.py"),
            ("A", "new.py"),
        ]
        assert "M app.py (+1 -1)" in one["done"].plain and "A new.py (+1 -0)" in one["done"].plain

        merged = await run.call("vibe_merge", {"worker_id": "w1", "action": "apply"})
        assert not merged.is_error, merged.plain
        assert (repo / "app.py").read_text() == "x = 'one'\n" and (repo / "new.py").read_text() == "n = 1\n"
        assert merged.data["removed"] is True and "worktree and branch are being removed" in merged.plain

        refused = await run.call("vibe_merge", {"worker_id": "w2", "action": "apply"})
        assert (
            refused.is_error and refused.data["error"] == "conflict" and refused.data["paths"] == ["app.py"]
        )
        assert "app.py" in refused.plain and "Nothing was written" in refused.plain
        assert (repo / "app.py").read_text() == "x = 'one'\n" and (repo / "lib.py").read_text() == "y = 1\n"

        # the other file of w2 can still land alone; its worktree stays for what is left
        part = await run.call("vibe_merge", {"worker_id": "w2", "action": "apply", "paths": ["lib.py"]})
        assert not part.is_error, part.plain
        assert (repo / "lib.py").read_text() == "y = 2\n" and part.data["not_applied"] == ["app.py"]
        assert part.data["removed"] is False
        # w1's worktree and branch go in the background ("being removed"): on a loaded machine they may be
        # there still; once they are gone, w2's is the one left
        await wait_for(lambda: [b.rsplit("/", 1)[-1] for b in branches(repo)] == ["w2"])
        assert len(busy(repo)) == 1

        gone = await run.call("vibe_merge", {"worker_id": "w2", "action": "discard"})
        assert not gone.is_error and "being removed" in gone.plain
        await wait_for(lambda: busy(repo) == [] and branches(repo) == [])
        assert (repo / "app.py").read_text() == "x = 'one'\n"
    assert git(repo, "status", "--porcelain").split("\n")[0] == " M app.py"  # the user's index untouched
    assert worktrees(repo) == [str(repo)]  # the spare checkout went at close too


async def test_a_worker_sees_the_uncommitted_changes_and_the_linked_environment(open_vibe, repo, editor):
    (repo / "app.py").write_text("x = 'uncommitted'\n")  # tracked, modified
    (repo / "notes.py").write_text("fresh = True\n")  # untracked
    (repo / "build").mkdir()
    (repo / "build" / "out.o").write_text("ignored")  # ignored: not carried
    (repo / ".venv" / "bin").mkdir(parents=True)  # an ignored environment: linked in
    git(repo, "add", "app.py")  # staged, so the user's staging is there to keep
    async with open_vibe(repo, {"fast": editor}) as run:
        got = await finish(run, "@show app.py\n@show notes.py\n@ls\n@env")
        result = got["done"].data["result"]
        assert "app.py=x = 'uncommitted'" in result and "notes.py=fresh = True" in result
        listing = next(ln for ln in result.splitlines() if ln.startswith("ls="))
        assert listing == "ls=.git,.gitignore,.venv,app.py,lib.py,notes.py"  # no build/
        worktree = next(ln for ln in result.splitlines() if ln.startswith("worktree="))[len("worktree=") :]
        assert f"cwd={worktree}" in result and worktree != str(repo)
        assert "uncommitted changes" in got["spawned"].plain and ".venv" in got["spawned"].plain
        assert got["done"].data["changes"] == []  # the link is not a change of the worker's
    assert git(repo, "diff", "--cached", "--name-only") == "app.py\n"  # the user's staging as it was
    assert worktrees(repo) == [str(repo)] and branches(repo) == []  # nothing to keep: all gone


async def test_unmerged_work_is_committed_on_its_branch_at_close_and_named_by_the_next_run(
    open_vibe, repo, editor
):
    async with open_vibe(repo, {"fast": editor}) as run:
        await finish(run, "@write app.py x = 'kept'\n@delete lib.py")
    (branch,) = branches(repo)
    assert worktrees(repo) == [str(repo)]
    assert git(repo, "show", f"{branch}:app.py") == "x = 'kept'\n"
    assert "lib.py" not in git(repo, "ls-tree", "--name-only", branch)
    assert git(repo, "log", "-1", "--format=%an <%ae>", branch) == "tether vibe <vibe@tether.invalid>\n"
    assert (repo / "app.py").read_text() == "x = 1\n"
    async with open_vibe(repo, {"fast": editor}) as run:
        listed = await run.call("vibe_list")
        assert branch in listed.plain and listed.data["kept_branches"] == [branch]


async def test_merge_answers_with_the_diagnostics_it_introduced(repo, editor, monkeypatch):
    monkeypatch.setenv("TETHER_PLUGINS", "vibe,lsp")
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "sample"\nversion = "0"\n\n[tool.basedpyright]\ntypeCheckingMode = "standard"\n'
    )
    git(repo, "add", "pyproject.toml")
    git(repo, "commit", "-q", "-m", "a project")
    options = {"vibe": {"fast": editor}, "diagnostics_timeout": 120}  # a cold basedpyright on a busy machine
    async with tether.open_run(repo, modes={"vibe"}, options=options) as run:
        await finish(run, "@write app.py count: int = 'three'")
        merged = await run.call("vibe_merge", {"worker_id": "w1", "action": "apply"})
        assert not merged.is_error, merged.plain
        found = [(d["file"], d["severity"], d["code"]) for d in merged.data.get("diagnostics", [])]
        assert found == [("app.py", "error", "reportAssignmentType")], merged.plain
        assert "introduced 1 error(s)" in merged.plain


async def test_a_non_git_root_works_in_the_root_and_says_so(open_vibe, tmp_path, editor):
    plain = tmp_path / "plain"
    plain.mkdir()
    async with open_vibe(plain, {"fast": editor}) as run:
        got = await finish(run, "@write made.txt here")
        assert got["spawned"].data["isolation"] == "none"
        assert "isolation none" in got["spawned"].plain and "not in a git repository" in got["spawned"].plain
        assert (plain / "made.txt").read_text() == "here\n" and got["done"].data["changes"] is None
        asked = await run.call("vibe_spawn", {"brief": "x", "label": "y", "isolation": "worktree"})
        assert (
            asked.is_error
            and "git repository with a commit" in asked.plain
            and "isolation 'none'" in asked.plain
        )
        merge = await run.call("vibe_merge", {"worker_id": "w1", "action": "apply"})
        assert merge.is_error and "no worktree to merge" in merge.plain


async def test_bad_merges_are_one_paragraph_and_write_nothing(open_vibe, repo, editor):
    async with open_vibe(repo, {"fast": editor}) as run:
        spawned = await run.call("vibe_spawn", {"brief": "@write app.py x = 2\n@sleep 30", "label": "slow"})
        running = await run.call("vibe_merge", {"worker_id": "w1", "action": "apply"})
        assert running.is_error and "still running" in running.plain and "vibe_wait" in running.plain
        await wait_for(lambda: any(read(Path(w) / "app.py") == "x = 2\n" for w in busy(repo)))
        await run.call("vibe_kill", {"worker_id": spawned.data["worker_id"]})
        unknown = await run.call("vibe_merge", {"worker_id": "w1", "action": "apply", "paths": ["nope.py"]})
        assert unknown.is_error and "did not change nope.py" in unknown.plain and "app.py" in unknown.plain
        nobody = await run.call("vibe_merge", {"worker_id": "w9", "action": "apply"})
        assert nobody.is_error and "no worker with id 'w9'" in nobody.plain
        assert (repo / "app.py").read_text() == "x = 1\n"
    async with open_vibe(repo, {"fast": editor}, surface="plan") as run:
        hidden = await run.call("vibe_merge", {"worker_id": "w1", "action": "apply"})
        assert hidden.is_error and "unknown tool" in hidden.plain  # tier write: not on plan


async def test_the_json_result_is_the_data_and_a_bad_one_is_said(open_vibe, repo, editor):
    async with open_vibe(repo, {"fast": editor}, options={"vibe_isolation": "none"}) as run:
        good = await finish(run, '@result {"tests": 12, "passed": true}')
        assert good["done"].data["data"] == {"tests": 12, "passed": True}
        assert "$TETHER_VIBE_RESULT" in good["done"].plain and good["spawned"].data["isolation"] == "none"
        bad = await finish(run, "@result {not json")
        assert bad["done"].data["data"] is None and "not valid JSON" in bad["done"].plain
        assert "edited" in bad["done"].data["result"]


async def test_after_a_sigkill_the_next_run_keeps_the_work_and_leaves_no_worktree(open_vibe, repo, editor):
    script = repo.parent / "server.py"
    script.write_text(vibe_server(repo, editor, "@write app.py x = 'half done'\n@sleep 300"))
    server = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "spawned"
        await wait_for(lambda: any("half" in read(Path(w) / "app.py") for w in busy(repo)))
    finally:
        os.kill(server.pid, signal.SIGKILL)
        server.wait()
    assert len(busy(repo)) == 1  # left behind: its run never closed
    async with open_vibe(repo, {"fast": editor}) as run:
        assert worktrees(repo) == [str(repo)]
        (branch,) = branches(repo)
        assert git(repo, "show", f"{branch}:app.py") == "x = 'half done'\n"
        listed = await run.call("vibe_list")
        assert branch in listed.plain
    assert not list((repo / ".git" / "tether-vibe").iterdir())


async def test_a_live_runs_worktrees_are_not_swept_by_another_run(open_vibe, repo, editor):
    async with open_vibe(repo, {"fast": editor}) as first:
        await first.call("vibe_spawn", {"brief": "@write app.py x = 3\n@sleep 30", "label": "long"})
        await wait_for(lambda: len(busy(repo)) == 1)
        async with open_vibe(repo, {"fast": editor}) as second:
            await finish(second, "@show app.py")  # makes its own run folder: the sweep runs again
            assert len(busy(repo)) == 2
        assert len(busy(repo)) == 1  # the second's is gone, the first's still there
    assert worktrees(repo) == [str(repo)]
    (branch,) = branches(repo)  # the first's killed worker wrote app.py: kept on its branch
    assert git(repo, "show", f"{branch}:app.py") == "x = 3\n"


COMMITTER = (
    "import subprocess, sys\n"
    "sys.stdin.read()\n"
    "open('own.txt', 'w').write('mine\\n')\n"
    "ident = ['-c', 'user.name=w', '-c', 'user.email=w@example.org']\n"
    "subprocess.run(['git', *ident, 'add', 'own.txt'], check=True)\n"
    "subprocess.run(['git', *ident, 'commit', '-q', '-m', 'the worker commits'], check=True)\n"
    "open('after.txt', 'w').write('uncommitted\\n')\n"
    "print('on', subprocess.run(['git', 'branch', '--show-current'], capture_output=True, text=True).stdout)\n"
)


async def test_a_worker_in_the_spare_checkout_is_on_its_branch_and_its_commits_are_kept(open_vibe, repo):
    committer = [sys.executable, "-c", COMMITTER]
    async with open_vibe(repo, {"fast": committer}) as run:
        first = await finish(run, "commit")
        await wait_for(lambda: len(worktrees(repo)) == 3)  # the root, w1 and the spare checkout
        second = await finish(run, "commit")
    for got in (first, second):
        branch = got["done"].data["branch"]
        assert f"on {branch}" in got["done"].data["result"], got["done"].plain
        assert [(c["status"], c["path"]) for c in got["done"].data["changes"]] == [
            ("A", "after.txt"),
            ("A", "own.txt"),
        ]
        # the worker's own commit, then tether's of what it left uncommitted, on its branch
        log = git(repo, "log", "--format=%s", f"main..{branch}").splitlines()
        assert log == [
            "tether vibe: a worker's unmerged work, kept when its run closed",
            "the worker commits",
        ]
        assert git(repo, "show", f"{branch}:after.txt") == "uncommitted\n"
    assert worktrees(repo) == [str(repo)]
