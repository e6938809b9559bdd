"""Nothing is left behind: not when the server is SIGKILLed, not what leaves the session, not stale directories.

Real families (eval's Python and Deno kernels, a vibe worker, debugpy) start the processes.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import tether
from strays import BARE_CELL, CELL, DAEMON, Serve, cell_pids, wait_gone
from tether.procs import ADOPT_POLL_ENV, alive, private_dir


def _cwd(p) -> Path:
    try:
        return Path(p.cwd())
    except psutil.Error:
        return Path("/")


def run_pids(result) -> list[int]:
    assert not result.is_error, result.plain
    return cell_pids(result.plain)


def served(server: Serve, tool: str, arguments: dict) -> str:
    error, text = server.call(tool, arguments)
    assert not error, text
    return text


def test_sigkill_of_serve_leaves_no_kernel_worker_cell_process_or_private_dir(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\nversion = '0'\n")
    (root / "worker.py").write_text("import sys, time\nsys.stdin.read()\ntime.sleep(300)\n")
    vibe = json.dumps({"fast": [sys.executable, str(root / "worker.py")]})
    before = {p.pid for p in psutil.process_iter()}
    server = Serve(root, f"vibe={vibe}")
    try:
        served(
            server,
            "eval",
            {"code": "1 + 1", "language": "javascript", "description": "add one and one in JavaScript"},
        )
        text = served(server, "eval", {"code": CELL, "description": "start children that leave the session"})
        own, daemon = [int(x) for x in text.strip().splitlines()[-1].split()]
        served(server, "vibe_spawn", {"brief": "work", "label": "w"})
        deadline = time.monotonic() + 10
        tree: list[int] = []
        while time.monotonic() < deadline:  # the worker, both kernels and the cell's children are up
            tree = [p.pid for p in psutil.Process(server.proc.pid).children(recursive=True)]
            if len(tree) >= 5:
                break
            time.sleep(0.05)
        mine = {*tree, own, daemon}
        dirs = [p for p in Path(tempfile.gettempdir()).glob("tether-run-*") if (p / "eval").exists()]
        ours = [d for d in dirs if (d / ".owner").read_text().split()[0] == str(server.proc.pid)]
        assert ours, "the run's private directory exists while it runs"
    finally:
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait()
    assert wait_gone(mine) == []
    assert not [p for p in psutil.process_iter() if p.pid not in before and _cwd(p).is_relative_to(root)]
    assert not any(d.exists() for d in ours)


def test_a_stale_private_dir_is_removed_by_the_next_run(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    created = psutil.Process(dead.pid).create_time()
    dead.wait()
    stale = Path(tempfile.mkdtemp(prefix="tether-run-"))
    (stale / ".owner").write_text(f"{dead.pid} {created}\n")
    (stale / "eval").mkdir()
    busy = Path(private_dir("tether-run-"))  # ours, alive: must stay
    try:
        with tether.open_run_sync(tmp_path, load_entry_points=False) as run:
            fresh = run.private_dir()
            assert not stale.exists() and busy.exists() and fresh.exists()
        assert not fresh.exists()
    finally:
        import shutil

        shutil.rmtree(busy, ignore_errors=True)


@pytest.mark.usefixtures("no_leftover_processes")
async def test_what_a_cell_starts_outside_its_session_dies_at_reset_and_at_close(tmp_path):
    async with tether.open_run(tmp_path, load_entry_points=False, plugins=[_eval_plugin()]) as run:
        first = run_pids(
            await run.call("eval", {"code": CELL, "description": "start children that leave the session"})
        )
        assert all(alive(p) for p in first)
        reset = await run.call(
            "eval", {"code": "", "reset": True, "description": "restart the interpreter from scratch now"}
        )
        assert not reset.is_error
        assert wait_gone(first, 10) == []  # at reset, not only at close
        second = run_pids(
            await run.call("eval", {"code": CELL, "description": "start children that leave the session"})
        )
    assert wait_gone(second, 10) == []


@pytest.mark.usefixtures("no_leftover_processes")
async def test_a_debuggees_setsid_daemon_dies_at_terminate(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\nversion = '0'\n")
    pidfile = tmp_path / "daemon.pid"
    (tmp_path / "app.py").write_text(
        "import subprocess, sys\n"
        f"pid = subprocess.run([sys.executable, '-c', {DAEMON!r}], capture_output=True, text=True).stdout.strip()\n"
        f"open({str(pidfile)!r}, 'w').write(pid)\n"
        "print('daemon', pid)\n"
    )
    from tether_debug import plugin

    async with tether.open_run(
        tmp_path, load_entry_points=False, plugins=[plugin], conversation_id="c"
    ) as run:
        await run.call("debug", {"action": "breakpoints", "file": "app.py", "lines": [4]})
        launched = await run.call("debug", {"action": "launch", "program": "app.py"})
        assert not launched.is_error and (launched.data or {})["stopped"]["line"] == 4, launched.plain
        daemon = int(pidfile.read_text())
        assert alive(daemon)
        ended = await run.call("debug", {"action": "terminate"})
        assert not ended.is_error
        assert wait_gone([daemon], 10) == []  # at terminate, before the run closes


def _eval_plugin():
    from tether_eval import plugin

    return plugin


def _bare_daemon(pid: int) -> bool:
    """The daemon is up, re-executed with an empty environment (it carries no tag to be found by)."""
    try:
        p = psutil.Process(pid)
        return "time.sleep(300)" in " ".join(p.cmdline()) and p.environ() == {}
    except psutil.Error:
        return False


def test_a_daemon_that_cleared_its_environment_dies_when_tether_call_ends(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\nversion = '0'\n")
    args = json.dumps({"code": BARE_CELL, "description": "start a daemon with an empty environment"})
    out = subprocess.run(
        [sys.executable, "-m", "tether.cli", "call", "eval", args, "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    daemon = int(next(x for x in out.stdout.split() if x.isdigit()))
    assert wait_gone([daemon], 20) == [], "the daemon outlived the run"


def test_a_daemon_that_cleared_its_environment_dies_when_serve_closes(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\nversion = '0'\n")
    server = Serve(tmp_path)
    try:
        text = served(
            server, "eval", {"code": BARE_CELL, "description": "start a daemon with an empty environment"}
        )
        daemon = int(text.split()[-1])
        deadline = time.monotonic() + 20
        while not _bare_daemon(daemon) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _bare_daemon(daemon)
        # orphaned, it is now a child of the server (a subreaper), not of init
        assert psutil.Process(daemon).ppid() == server.proc.pid
        assert server.proc.stdin is not None
        server.proc.stdin.close()  # the client leaves: the run closes
        server.proc.wait(30)
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()
    assert wait_gone([daemon], 20) == [], "the daemon outlived the server"


def test_a_daemon_that_cleared_its_environment_dies_when_serve_is_sigkilled(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\nversion = '0'\n")
    # the keeper's own look for adopted orphans comes only after the kill: the end of the cell's call
    # must have told it about the daemon
    monkeypatch.setenv(ADOPT_POLL_ENV, "600")
    server = Serve(tmp_path)
    try:
        text = served(
            server, "eval", {"code": BARE_CELL, "description": "start a daemon with an empty environment"}
        )
        daemon = int(text.split()[-1])
    finally:
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait()
    assert wait_gone([daemon], 20) == [], "the daemon outlived the SIGKILLed server"


SPAWNS_WHEN_STOPPED = """
import signal, subprocess, sys, time
spawned = []
def spawn(*_):
    spawned.append(1)
signal.signal(signal.SIGTERM, spawn)
print("ready", flush=True)
for _ in range(6000):  # bounded, so a failed stop cannot leave it spawning for ever
    if spawned and len(spawned) < 200:  # told to stop: start children until killed, as a build tool might
        spawned.append(subprocess.Popen(["sleep", "120"]))
    time.sleep(0.02)
"""


async def test_stop_process_also_stops_children_started_during_the_grace_before_sigkill(tmp_path):
    """The first look at what to stop is a snapshot: what a stopping process starts after it is found too."""
    import asyncio

    from tether.procs import tagged

    async with tether.open_run(tmp_path) as run:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", SPAWNS_WHEN_STOPPED, stdout=asyncio.subprocess.PIPE, env=run.child_env()
        )
        run.track_process(proc)
        assert proc.stdout is not None
        assert (await asyncio.wait_for(proc.stdout.readline(), 60)) == b"ready\n"
        await run.stop_process(proc, grace=0.5)
        await proc.wait()
        left = tagged(run.id)
        assert left == [], [p.cmdline() for p in left]


HOLDS_A_SCRATCH_DIR = """
import sys, time
import tether
with tether.open_run_sync(sys.argv[1], load_entry_points=False) as run:
    print(run.scratch_dir(run.root, ".scratch-"), flush=True)
    time.sleep(300)
"""


def _hold_a_scratch_dir(root: Path, wrapper: tuple[str, ...] = ()) -> tuple[subprocess.Popen, Path]:
    proc = subprocess.Popen(
        [*wrapper, sys.executable, "-c", HOLDS_A_SCRATCH_DIR, str(root)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        path = Path(proc.stdout.readline().strip())
        assert path.is_dir() and path.parent == root and path.name.startswith(".scratch-")
    except BaseException:
        _kill(proc)
        raise
    return proc, path


def _kill(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()


def test_a_scratch_dir_is_removed_by_its_keeper_after_a_sigkill_or_by_the_next_run_if_both_died(tmp_path):
    # the process alone is killed: its keeper removes the folder
    proc, first = _hold_a_scratch_dir(tmp_path)
    _kill(proc)
    deadline = time.monotonic() + 30
    while first.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not first.exists(), "the keeper of a SIGKILLed process left its scratch directory"

    # killed with its keeper (the OOM killer, a container stopped): the kernel drops their locks, the next run removes it
    proc, left = _hold_a_scratch_dir(tmp_path)
    try:
        keepers = [p for p in psutil.Process(proc.pid).children() if "procs.py" in " ".join(p.cmdline())]
        assert len(keepers) == 1
        keepers[0].send_signal(signal.SIGKILL)
        psutil.wait_procs(keepers, 30)
    finally:
        _kill(proc)
    assert left.exists()
    busy = Path(private_dir(".scratch-", str(tmp_path)))  # ours, alive: must stay
    with tether.open_run_sync(tmp_path, load_entry_points=False) as run:
        fresh = run.scratch_dir(tmp_path, ".scratch-")
        assert not left.exists() and busy.exists() and fresh.exists()
    assert not fresh.exists()  # at close
    assert [p.name for p in tmp_path.iterdir()] == [busy.name]
    shutil.rmtree(busy)


def _sweep_in_a_thread(root: Path) -> None:
    """run.scratch_dir(root) in a thread, so that a sweep that blocks fails the test instead of hanging it."""
    import threading

    made: list[Path] = []

    def make() -> None:
        with tether.open_run_sync(root, load_entry_points=False) as run:
            made.append(run.scratch_dir(root, ".scratch-"))

    worker = threading.Thread(target=make, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the sweep of stale scratch directories blocked"
    assert len(made) == 1 and not made[0].exists()


def _dead_owner() -> str:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    created = psutil.Process(dead.pid).create_time()
    dead.wait()
    return f"{dead.pid} {created}\n"


def test_the_sweep_skips_a_fifo_symlinked_or_malformed_owner_and_folders_not_ours(tmp_path):
    """Nothing blocks, nothing is followed, nothing raises, nothing of someone else's is removed."""
    import os

    dead = _dead_owner()
    elsewhere = tmp_path / "elsewhere"  # what a followed symlink would lead to: a dead owner's folder
    elsewhere.mkdir()
    (elsewhere / ".owner").write_text(dead)
    root = tmp_path / "root"
    root.mkdir()
    kept = {
        "fifo": lambda d: os.mkfifo(d / ".owner"),
        "link": lambda d: (d / ".owner").symlink_to(elsewhere / ".owner"),
        "garbage": lambda d: (d / ".owner").write_text("x 1\n"),
        "negative": lambda d: (d / ".owner").write_text("-1 0\n"),
        "huge": lambda d: (d / ".owner").write_text(f"{10**30} 0\n"),
        "nan": lambda d: (d / ".owner").write_text(f"{dead.split()[0]} nan\n"),
        "long": lambda d: (d / ".owner").write_text(dead + " " * 200),
        "empty": lambda d: (d / ".owner").write_text(""),
        "a-folder": lambda d: (d / ".owner").mkdir(),
    }
    for name, make in kept.items():
        (root / f".scratch-{name}").mkdir()
        make(root / f".scratch-{name}")
    names = [*(f".scratch-{n}" for n in kept), ".scratch-dirlink"]
    (root / ".scratch-dirlink").symlink_to(elsewhere, target_is_directory=True)
    if os.getuid() == 0:  # a dead owner's folder, but another user's: never ours to remove
        (root / ".scratch-other").mkdir()
        (root / ".scratch-other" / ".owner").write_text(dead)
        os.chown(root / ".scratch-other", 65534, 65534)
        names.append(".scratch-other")
    (root / ".scratch-stale").mkdir()  # the one stale folder of ours: it goes
    (root / ".scratch-stale" / ".owner").write_text(dead)

    _sweep_in_a_thread(root)
    assert sorted(p.name for p in root.iterdir()) == sorted(names)
    assert (elsewhere / ".owner").read_text() == dead


def test_a_scratch_dir_of_a_live_owner_is_kept_also_in_another_pid_namespace(tmp_path):
    """The pid in `.owner` means nothing outside the owner's pid namespace: its lock on `.owner` does."""
    if subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode:
        pytest.skip("unshare of a pid namespace is not allowed here")
    plain, first = _hold_a_scratch_dir(tmp_path)
    try:
        inside, second = _hold_a_scratch_dir(
            tmp_path, ("unshare", "--pid", "--fork", "--mount-proc", "--kill-child")
        )
        try:
            pid = int((second / ".owner").read_text().split()[0])
            assert pid != inside.pid  # the owner's pid as its namespace sees it, not ours
            _sweep_in_a_thread(tmp_path)
            assert first.is_dir() and second.is_dir()
        finally:
            _kill(inside)
    finally:
        _kill(plain)


def test_a_scratch_dir_prefix_must_be_a_plain_name(tmp_path):
    with tether.open_run_sync(tmp_path, load_entry_points=False) as run:
        for bad in ("", "a/b-"):
            with pytest.raises(ValueError, match="non-empty name"):
                run.scratch_dir(tmp_path, bad)
    assert list(tmp_path.iterdir()) == []


FORKS_FOREVER = """
trap '' TERM
d=${1:-0}
[ "$d" -ge 100 ] && exec sleep 120
sleep 0.05
bash "$0" $((d+1)) &
exec sleep 120
"""


async def test_stop_process_ends_a_chain_that_ignores_sigterm_and_keeps_forking(tmp_path):
    """Each generation ignores SIGTERM (inherited) and starts the next: looking again must converge."""
    import asyncio

    from tether.procs import tagged

    script = tmp_path / "chain.sh"
    script.write_text(FORKS_FOREVER)
    async with tether.open_run(tmp_path) as run:
        proc = await asyncio.create_subprocess_exec("bash", str(script), env=run.child_env())
        run.track_process(proc)
        deadline = time.monotonic() + 60
        while len(tagged(run.id)) < 6:  # a few generations are up
            assert time.monotonic() < deadline, "the chain never grew"
            await asyncio.sleep(0.05)
        await run.stop_process(proc, grace=0.5)
        left = tagged(run.id)
        assert left == [], [p.cmdline() for p in left]


async def test_a_scratch_dir_removed_early_lets_go_of_its_lock_here_and_in_the_keeper(tmp_path):
    """Each debug launch makes one: removed at the session's end, its lock must not stay open until the run
    closes (a long run would run out of file descriptors, in its process and in the keeper)."""
    import asyncio
    import os

    def holders(path: Path, pid: int) -> int:
        owner = str(path / ".owner")
        count = 0
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                count += os.readlink(fd) == owner
            except OSError:
                pass
        return count

    async with tether.open_run(tmp_path) as run:
        scratch = run.scratch_dir(tmp_path, "scratch-")
        keeper = run._keep().proc
        assert keeper is not None
        deadline = time.monotonic() + 60
        while holders(scratch, keeper.pid) == 0:  # the keeper took its lock
            assert time.monotonic() < deadline, "the keeper never held the scratch directory"
            await asyncio.sleep(0.05)
        assert holders(scratch, os.getpid()) == 1
        run.remove_scratch_dir(scratch)
        assert not scratch.exists() and holders(scratch, os.getpid()) == 0
        while holders(scratch, keeper.pid):  # told to forget it: its lock goes too
            assert time.monotonic() < deadline, "the keeper kept the lock of a removed scratch directory"
            await asyncio.sleep(0.05)


def test_a_scratch_dir_whose_owner_cannot_be_written_is_not_left(tmp_path, monkeypatch):
    """A folder without its `.owner` would never be swept (not ours): a failure to write it removes it."""
    import errno
    import fcntl

    from tether import procs

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(OSError):
        procs.private_dir("scratch-", str(tmp_path))
    assert not list(tmp_path.glob("scratch-*"))


def test_the_sweep_lets_a_family_save_a_dead_owners_folder_first_and_keeps_it_when_that_fails(tmp_path):
    from tether import procs

    busy = Path(private_dir("w-", str(tmp_path)))  # alive: never handed to the callback
    dead = _dead_owner()
    for name in ("saved", "unsaved"):
        (tmp_path / f"w-{name}").mkdir()
        (tmp_path / f"w-{name}" / ".owner").write_text(dead)
    seen: list[str] = []

    def save(path: str) -> None:
        seen.append(Path(path).name)
        assert (Path(path) / ".owner").exists()  # called before anything is removed
        if path.endswith("unsaved"):
            raise OSError("disk full")

    procs.sweep_stale("w-", str(tmp_path), save)
    assert sorted(seen) == ["w-saved", "w-unsaved"]
    assert not (tmp_path / "w-saved").exists() and (tmp_path / "w-unsaved").exists() and busy.exists()
    procs.release(str(busy))


ESCAPES_THEN_WAITS = """
import subprocess, sys
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(300)"],
    start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
open(sys.argv[1], "w").write(str(child.pid))
sys.stdin.read()
"""


async def test_what_a_child_started_before_it_was_tracked_is_stopped_with_it(tmp_path):
    """A process the run started and tracked only later (on a loaded machine, over a second later) had
    already started a child of its own in a session of its own: found by its tag all the same. The run
    dated what it looks for by its first tracking, not by its beginning, and such a child looked older
    than the run and was left running."""
    import asyncio

    from tether.procs import process_clock

    async with tether.open_run(tmp_path) as run:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            ESCAPES_THEN_WAITS,
            str(tmp_path / "pid"),
            stdin=asyncio.subprocess.PIPE,
            env=run.child_env(),
        )
        escaped = None
        try:
            deadline = time.monotonic() + 60
            while not (tmp_path / "pid").exists() or not (tmp_path / "pid").read_text():
                assert time.monotonic() < deadline, "the child never started its own"
                await asyncio.sleep(0.05)
            escaped = int((tmp_path / "pid").read_text())
            born = psutil.Process(escaped).create_time()
            while process_clock() < born + 1.5:  # its child is well older than the first tracking
                await asyncio.sleep(0.05)
            run.track_process(proc)
            proc.stdin.close()
            await asyncio.wait_for(proc.wait(), 60)  # its parent has exited: only its tag ties it to the run
            await run.stop_process(proc, grace=0.5)
            assert not wait_gone([escaped], 10), "the child started before the tracking outlived the stop"
        finally:
            if escaped is not None and alive(escaped):
                psutil.Process(escaped).kill()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def test_a_child_that_leaves_the_session_just_after_the_run_began_is_stopped_whatever_the_wall_clock(
    tmp_path, monkeypatch
):
    """What a tracked process started is found by its tag among the processes created since the run began.
    psutil dates a process by the boot time (whole seconds) plus its start since boot, and the wall clock can
    be a second and more ahead of that: the run's start taken from the wall clock made a child started just
    after it look older, and it was left running."""
    import asyncio

    import tether.procs

    wall = time.time
    monkeypatch.setattr(tether.procs.time, "time", lambda: wall() + 1.5)  # the wall clock 1.5 s ahead
    async with tether.open_run(tmp_path) as run:
        # the parent waits to be tracked (its tag is read from its environment, which a process gone
        # cannot show: a loaded machine let one that exits at once go before it was tracked)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            ESCAPES_THEN_WAITS,
            str(tmp_path / "pid"),
            stdin=asyncio.subprocess.PIPE,
            env=run.child_env(),
        )
        run.track_process(proc)
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 60)  # its parent has exited: only its tag ties it to the run now
        escaped = int((tmp_path / "pid").read_text())
        try:
            await run.stop_process(proc, grace=0.5)
            assert not wait_gone([escaped], 10), "the child that left the session outlived its parent's stop"
        finally:
            if alive(escaped):
                psutil.Process(escaped).kill()
