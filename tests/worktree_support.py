"""What the vibe worktree tests ask of a repository with real git: its worktrees, the workers' branches,
and a file's text; and a bounded wait for a condition."""

from __future__ import annotations

import asyncio
import subprocess
import textwrap
import time
from pathlib import Path


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True, timeout=60
    ).stdout


def worktrees(root: Path) -> list[str]:
    text = git(root, "worktree", "list", "--porcelain")
    return [ln.split(" ", 1)[1] for ln in text.splitlines() if ln.startswith("worktree ")]


def busy(root: Path) -> list[str]:
    """The worktrees workers work in, on their branches (not the spare checkout, detached, that a run
    keeps ready for its next spawn)."""
    text = git(root, "worktree", "list", "--porcelain")
    return [
        block.split("\n")[0].split(" ", 1)[1]
        for block in text.strip().split("\n\n")[1:]
        if "\nbranch refs/heads/tether/vibe/" in block
    ]


def branches(root: Path) -> list[str]:
    return git(root, "for-each-ref", "--format=%(refname:short)", "refs/heads/tether/").split()


def read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


async def wait_for(condition, bound: float = 60.0) -> None:
    deadline = time.monotonic() + bound
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        await asyncio.sleep(0.05)


def vibe_server(root: Path, command: list[str], brief: str) -> str:
    """A script that opens a vibe run over ``root`` whose fast worker is ``command``, spawns it with
    ``brief``, prints "spawned" and waits: a server for a test to SIGKILL mid-work."""
    opts = {"vibe": {"fast": command}}
    return textwrap.dedent(
        f"""
        import asyncio, tether
        from tether_vibe import plugin

        async def main():
            async with tether.open_run({str(root)!r}, modes={{"vibe"}}, options={opts!r}, load_entry_points=False, plugins=[plugin]) as run:
                await run.call("vibe_spawn", {{"brief": {brief!r}, "label": "k"}})
                print("spawned", flush=True)
                await asyncio.sleep(300)

        asyncio.run(main())
        """
    )
