"""Child processes of a run: one stop routine, and a keeper that stops them even if we are killed.

Every process an exec family starts carries a tag in its environment (`Run.child_env`): the run's id
and a serial, inherited by whatever it starts, also by what leaves the session (a double-forked
`setsid` daemon, a `start_new_session` child) and by what is orphaned when its parent exits. The run
tracks the processes it starts (`Run.track_process`); stopping one (`Run.stop_process`) or closing
the run stops, with `stop` below, the tree, the process group of a session leader, and every process
carrying the tag. A process that clears its environment (the tag with it), leaves the session and
loses its parent escapes that; the `tether` command therefore makes its process a subreaper
(`adopt_orphans`): such an orphan becomes a child of tether's own process instead of init's, and
every child of that process the run has not stopped otherwise is stopped with the run. Inside the
sandbox (`tether.sandbox`) the pid namespace takes it down as well.

The keeper is a small process per run (this file run as a script: stdlib and psutil only) that is
told what the run tracks, and under a subreaper notes the orphans it adopts as they come (every
ADOPT_POLL s). When its stdin ends, because the run closed or because the process that runs tether
died (SIGKILL included), it stops all of it and removes the run's private and scratch directories
(`private_dir`; one left because the keeper was killed too, the lock on its `.owner` gone with both,
is removed by the next run that makes one of the same name in the same place).

Nothing here reaps (waits for) a process: a family's asyncio child watcher may own it and must see
its exit status. Dead processes are told apart by status instead (a zombie counts as stopped).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger("tether.procs")

STRAGGLER_LOOK = 2.0  # how long a stop keeps looking for tagged processes started while it stopped
POLL = 0.02  # the longest pause between checks while waiting for processes to die
TAG = "TETHER_PROC"  # the environment variable that names the run and the process a child descends from
KEEPER_WAIT = 15.0  # how long closing a run waits for its keeper
ADOPT_POLL = 0.25  # how often the keeper of a subreaper's run notes the orphans it adopted
# the keeper's ADOPT_POLL instead, in seconds: a test makes it long, to see that the end of a call tells the keeper
ADOPT_POLL_ENV = "TETHER_ADOPT_POLL"
PR_SET_CHILD_SUBREAPER = 36  # prctl(2)
_adopting = False  # this process is a subreaper (`adopt_orphans`)


def adopt_orphans() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``).

    For a process tether owns (the ``tether`` command), never a harness's: every child of this
    process that a closing run has not stopped otherwise is then taken for an orphan of the run's (a
    daemon that left its session and cleared its environment) and stopped with it. False where the
    system has no such thing.
    """
    global _adopting
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _adopting = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _adopting = False
    return _adopting


def process(pid: int) -> Any | None:
    """A psutil handle that remembers the creation time, so a reused pid is never mistaken for ours."""
    import psutil  # imported here: only tracking and stopping need it

    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _gone(p: Any) -> bool:
    import psutil

    try:
        return not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    p = process(pid)
    return p is not None and not _gone(p)


def tree(root: Any) -> list:
    """A process and its living descendants (psutil handles)."""
    import psutil

    if _gone(root):
        return []
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return [root]


def group_members(pgid: int) -> list:
    """Live (non-zombie) processes of process group ``pgid``."""
    import psutil

    try:
        os.killpg(pgid, 0)  # cheap: is anything (even a zombie) left in the group?
    except ProcessLookupError:
        return []
    except OSError:
        pass  # EPERM: something is there; look
    out = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and not _gone(p):
                out.append(p)
        except (OSError, psutil.Error):
            pass
    return out


def process_clock(since_boot: float | None = None) -> float:
    """Now, on the clock of psutil's ``create_time``: the boot time plus the time since boot. The wall clock
    (time.time) is off it by up to a second and more (the boot time is whole seconds, and the wall clock
    drifts from it), so a child started just after a run began could look older than the run and be left
    running. With ``since_boot`` (a CLOCK_BOOTTIME reading taken earlier), that moment instead of now."""
    import psutil

    try:
        return psutil.boot_time() + (
            time.clock_gettime(time.CLOCK_BOOTTIME) if since_boot is None else since_boot
        )
    except (AttributeError, OSError):  # no boot-time clock (macOS): its create_time is the wall clock's
        return time.time()


def tagged(prefix: str, since: float = 0.0) -> list:
    """Live processes whose environment tag starts with ``prefix`` (created at or after ``since``, a
    `process_clock` time)."""
    import psutil

    out = []
    for p in psutil.process_iter(["create_time"]):
        try:
            if (p.info["create_time"] or 0) + 1 < since or p.pid == os.getpid():
                continue
            value = p.environ().get(TAG, "")
        except (psutil.Error, OSError):
            continue
        if (value == prefix or value.startswith(prefix + ".")) and not _gone(p):
            out.append(p)
    return out


def stop(
    procs: Iterable[Any], groups: Iterable[int] = (), grace: float = 2.0, spare: Iterable[int] = ()
) -> None:
    """The one stop routine: SIGTERM processes and process groups, SIGKILL what is left after ``grace`` s.

    Blocking and bounded (``grace`` + 2 s at most). Our own process group and those in ``spare``
    (the harness's) are never signalled as a group.
    """
    import psutil

    procs = list(procs)
    groups = set(groups) - {os.getpgrp(), *spare}
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        members = {p.pid: p for p in procs}
        for g in groups:
            members.update((m.pid, m) for m in group_members(g))
        procs = [p for p in members.values() if not _gone(p)]
        if not procs:
            return
        for g in groups:
            try:
                os.killpg(g, sig)
            except OSError:
                pass
        for p in procs:  # a member may have left its group: signal it by pid as well
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass
        deadline, pause = time.monotonic() + wait, 0.001
        while time.monotonic() < deadline and any(not _gone(p) for p in procs):
            time.sleep(pause)  # most processes die within a millisecond or two of SIGTERM
            pause = min(pause * 2, POLL)


def kill_tree(root: int | Any, grace: float = 2.0) -> None:
    """Stop a process, its descendants and their process groups (the group of each member)."""
    top = process(root) if isinstance(root, int) else root
    if top is None:
        return
    procs = tree(top)
    groups = set()
    for p in procs:
        try:
            groups.add(os.getpgid(p.pid))
        except OSError:
            pass
    stop(procs, groups, grace)


# -- what a run tracks ---------------------------------------------------------------------------------


class Tracked:
    """The processes of one run: handles, the groups of session leaders, and the tags they carry.

    With ``adopter`` (the pid of a subreaper: tether's own process), its children too, but those in
    ``exempt`` (the keeper): orphans it adopted, noted by `note_adopted` while it lives.
    """

    def __init__(
        self, run_tag: str, spare: Iterable[int] = (), adopter: int | None = None, began: float | None = None
    ) -> None:
        self.run_tag = run_tag
        # what create_time is compared with (see process_clock): when the run began (``began``, its
        # CLOCK_BOOTTIME reading), not when it first tracked a process, which can be long after it started
        # one: a loaded machine let a child's own child be created over a second before
        self.since = process_clock(began)
        self.spare = set(spare)
        self.procs: dict[int, tuple[Any, str | None, int | None]] = {}  # pid -> (handle, tag, group)
        self.dirs: list[str] = []
        self.adopter = adopter
        self.exempt = {os.getpid()}
        self.adopted: dict[int, Any] = {}  # pid -> handle (its creation time guards against pid reuse)

    def note_adopted(self) -> list:
        """The adopter's children created since the run's first process (noted, so they outlive it)."""
        import psutil

        if self.adopter is None:
            return []
        try:
            children = psutil.Process(self.adopter).children()
        except psutil.Error:
            return list(self.adopted.values())
        for p in children:
            try:
                if (
                    p.pid not in self.exempt
                    and p.pid not in self.adopted
                    and p.create_time() + 1 >= self.since
                ):
                    self.adopted[p.pid] = p
            except psutil.Error:
                pass
        return list(self.adopted.values())

    def track(self, pid: int, tag: str | None = None) -> None:
        handle = process(pid)
        if handle is None:
            return
        try:
            group = os.getpgid(pid) if os.getsid(pid) == pid else None  # a session leader: its group goes too
        except OSError:
            group = None
        if tag is None:
            try:
                tag = handle.environ().get(TAG)
            except Exception:  # noqa: BLE001 - psutil.Error or OSError: no tag to follow
                tag = None
        self.procs[pid] = (handle, tag if tag and tag.startswith(self.run_tag) else None, group)

    def stop_one(self, pid: int, grace: float) -> None:
        """Stop a tracked process, its tree, its group when it led a session, and what carries its tag."""
        entry = self.procs.get(pid)
        if entry is None:
            kill_tree(pid, grace)
            return
        handle, tag, group = entry
        procs = tree(handle) + (tagged(tag, self.since) if tag else [])
        self._stop_with_tag(procs, {group} if group else set(), grace, tag)

    def stop_all(self, grace: float) -> None:
        procs = [p for handle, _, _ in self.procs.values() for p in tree(handle)]
        procs += tagged(self.run_tag, self.since)
        procs += [p for orphan in self.note_adopted() for p in tree(orphan)]
        groups = {g for _, _, g in self.procs.values() if g}
        self._stop_with_tag(procs, groups, grace, self.run_tag)
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)
            release(d)
        self.procs.clear()
        self.dirs.clear()
        self.adopted.clear()

    def _stop_with_tag(self, procs: list, groups: set, grace: float, tag: str | None) -> None:
        """`stop`, then the stragglers that carry ``tag``: frozen as found, then killed without grace.

        The first look is a snapshot: a process that ignores SIGTERM may start children during the
        grace before its SIGKILL, and a child between fork and exec when its parent was killed runs on
        (a `go build` killed by the OOM killer leaves its compilers so). A frozen (SIGSTOP) process
        starts nothing more, so looking again until every tagged process is frozen converges whatever
        the fork rate; the looking is bounded by STRAGGLER_LOOK all the same, and what survives is logged.
        """
        import psutil

        stop(procs, groups, grace, self.spare)
        if not tag:
            return
        frozen: dict[int, Any] = {}
        deadline = time.monotonic() + STRAGGLER_LOOK
        try:
            while time.monotonic() < deadline:
                more = [p for p in tagged(tag, self.since) if p.pid not in frozen]
                if not more:
                    break
                now = []
                for p in more:
                    try:
                        p.suspend()
                    except psutil.Error:
                        continue
                    frozen[p.pid] = p
                    now.append(p)
                # SIGSTOP is sent, not yet taken: one in the middle of a fork may still start a child
                # after the next look, so that look waits until each has stopped (or is gone)
                _wait_stopped(now, deadline)
                if not now:  # none could be frozen (not allowed): look again after a pause, not at once
                    time.sleep(POLL)
        finally:  # whatever happened while looking, nothing frozen is left stopped: a stopped process
            if frozen:  # left behind is worse than a running one
                stop(frozen.values(), (), 0.0, self.spare)
                left = [p.pid for p in frozen.values() if not _gone(p)]
                if left:
                    log.warning("processes %s (tag %s) did not end after SIGKILL", left, tag)


def _wait_stopped(procs: list, deadline: float) -> None:
    """Wait, until ``deadline`` at most, for each process to be stopped (SIGSTOP taken) or gone."""
    import psutil

    def settled(p: Any) -> bool:
        try:
            return p.status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP, psutil.STATUS_ZOMBIE)
        except psutil.Error:
            return True

    pause = 0.0005
    while procs and time.monotonic() < deadline:
        procs = [p for p in procs if not settled(p)]
        if procs:
            time.sleep(pause)
            pause = min(pause * 2, POLL)


class Keeper:
    """The run's side of its keeper process; without one (it could not start) the run stops things itself."""

    def __init__(self, run_tag: str, grace: float, began: float | None = None) -> None:
        self.local = Tracked(run_tag, {os.getpgrp()}, os.getpid() if _adopting else None, began)
        self.grace = grace
        self.proc: subprocess.Popen | None = None
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    __file__,
                    run_tag,
                    str(os.getpgrp()),
                    str(grace),
                    str(self.local.since),
                    str(self.local.adopter or 0),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C to the harness's group must not stop the keeper first
                close_fds=True,
            )
        except OSError:
            self.proc = None
        else:
            self.local.exempt.add(self.proc.pid)

    def _tell(self, message: dict[str, Any]) -> None:
        if self.proc is None or self.proc.stdin is None:
            return
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass

    def track(self, pid: int, tag: str | None = None) -> None:
        self.local.track(pid, tag)
        entry = self.local.procs.get(pid)
        if entry is not None:
            self._tell({"track": pid, "tag": entry[1]})

    def note_adopted(self) -> None:
        """Tell the keeper of orphans this process (a subreaper) adopted since it last looked."""
        if self.local.adopter is None:
            return
        known = set(self.local.adopted)
        for p in self.local.note_adopted():
            if p.pid not in known:
                self._tell({"track": p.pid, "tag": None})

    def remove_at_close(self, path: str) -> None:
        self.local.dirs.append(path)
        self._tell({"dir": path})

    def remove_now(self, path: str) -> None:
        """Remove a directory of `remove_at_close` now, and let go of it here and in the keeper."""
        shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(ValueError):
            self.local.dirs.remove(path)
        release(path)
        self._tell({"forget": path})

    def stop_one(self, pid: int, grace: float) -> None:
        self.local.stop_one(pid, grace)

    def close(self) -> None:
        """Stop everything tracked, then let the keeper check and exit (blocking, bounded)."""
        self.local.stop_all(self.grace)
        if self.proc is None:
            return
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(KEEPER_WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- private directories ------------------------------------------------------------------------------


def private_dir(
    prefix: str, parent: str | None = None, before_remove: Callable[[str], None] | None = None
) -> str:
    """A new directory named ``prefix*`` in ``parent`` (the temporary directory unless given); stale
    ones there (their owner died) are removed first (see `sweep_stale` for ``before_remove``).

    The owner is written into the directory's ``.owner``, and this process holds a shared flock on
    it (`hold`; so does the keeper once told) for the directory's life, so the next run can tell a
    directory left by a process that was killed along with its keeper (the kernel dropped their
    locks) from one that is in use, also by a process in another pid namespace.
    """
    if not prefix or os.sep in prefix or "\0" in prefix:
        raise ValueError(f"a scratch directory's prefix must be a non-empty name without '/', got {prefix!r}")
    base = tempfile.gettempdir() if parent is None else parent
    sweep_stale(prefix, base, before_remove)
    path = tempfile.mkdtemp(prefix=prefix, dir=base)
    me = process(os.getpid())
    fd = None
    try:
        fd = os.open(os.path.join(path, ".owner"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)  # before the content: a sweep never sees it written and unlocked
        os.write(fd, f"{os.getpid()} {me.create_time() if me is not None else 0}\n".encode())
    except OSError:  # (a full disk): a folder without its owner would never be swept, so it goes now
        if fd is not None:
            os.close(fd)
        shutil.rmtree(path, ignore_errors=True)
        raise
    _held[path] = fd
    return path


_held: dict[str, int] = {}  # directory -> the open `.owner` this process holds its shared lock on
OWNER_MAX = 100  # the longest `.owner` a sweep reads; a longer one is not ours
PID_MAX = 1 << 22  # the largest pid Linux gives (pid_max's limit)


def _owner_file(path: str, flags: int) -> int | None:
    """``path/.owner`` opened, when ``path`` is a real directory of ours and ``.owner`` a regular file
    in it: never through a symlink, never blocking (a FIFO is opened without waiting, then refused)."""
    try:
        folder = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if os.fstat(folder).st_uid != os.getuid():
            return None
        fd = os.open(".owner", flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def hold(path: str) -> None:
    """Take a shared lock on a private directory's ``.owner`` for as long as this process keeps it."""
    if path in _held:
        return
    fd = _owner_file(path, os.O_RDONLY)
    if fd is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return
    _held[path] = fd


def release(path: str) -> None:
    fd = _held.pop(path, None)
    if fd is not None:
        os.close(fd)


def _stale(fd: int) -> bool:
    """True when nothing holds the lock on this ``.owner`` (taken, exclusively, by the caller) and the
    owner it names is dead; False for what is in use, and for what is not ours (malformed)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # its owner holds it (in whatever pid namespace), or the filesystem has no locks
    try:
        text = os.read(fd, OWNER_MAX + 1)
        fields = text.decode("ascii").split()
        if len(text) > OWNER_MAX or len(fields) != 2:
            return False
        pid, created = int(fields[0]), float(fields[1])
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return False
    if not 0 < pid <= PID_MAX or not math.isfinite(created):
        return False
    # a folder of an owner killed with its keeper has no lock left; one made without a lock (an older
    # tether) still names a live owner here: the pid and its creation time (a reused pid is not it)
    import psutil

    owner = process(pid)
    if owner is None or _gone(owner):
        return True
    try:
        return abs(owner.create_time() - created) >= 1
    except psutil.Error:  # it ended while we looked
        return True


def sweep_stale(prefix: str, base: str, before_remove: Callable[[str], None] | None = None) -> None:
    """Remove the directories ``prefix*`` in ``base`` whose owner died (see `private_dir`).

    ``before_remove(path)`` is called first, under the folder's lock, to save what must outlive it
    (a family's unfinished work); when it raises, the folder is left for a later sweep.
    """
    try:
        names = [n for n in os.listdir(base) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        path = os.path.join(base, name)
        fd = _owner_file(path, os.O_RDONLY)
        if fd is None:
            continue  # not one of ours, or being created
        try:
            if _stale(fd):
                if before_remove is not None:
                    try:
                        before_remove(path)
                    except Exception:  # kept: the next sweep tries again
                        log.warning(
                            "could not save what %s holds; left for a later sweep", path, exc_info=True
                        )
                        continue
                shutil.rmtree(path, ignore_errors=True)  # under the lock: a symlinked folder is refused
        finally:
            os.close(fd)


def _keep(run_tag: str, spare: int, grace: float, since: float, adopter: int) -> None:
    """The keeper's loop: remember what the run tells, stop all of it when stdin ends or the run's process died.

    The parent is watched as well as stdin: a process forked without exec (a multiprocessing pool)
    may hold our stdin open after the process that runs tether died.
    """
    import select

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    parent = os.getppid()
    kept = Tracked(run_tag, {spare}, adopter or None)
    kept.since = since
    try:
        poll = float(os.environ.get(ADOPT_POLL_ENV, ADOPT_POLL))
    except ValueError:
        poll = ADOPT_POLL
    fd, pending = sys.stdin.fileno(), b""
    while os.getppid() == parent:
        kept.note_adopted()  # before it dies with its adopter: then init has them
        if not select.select([fd], [], [], poll if adopter else 1.0)[0]:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "track" in message:
                kept.track(int(message["track"]), message.get("tag"))
            elif "dir" in message:
                kept.dirs.append(str(message["dir"]))
                hold(kept.dirs[-1])  # the folder stays locked until both we and the run are gone
            elif "forget" in message:  # the run removed it: its lock and its place here go too
                with contextlib.suppress(ValueError):
                    kept.dirs.remove(str(message["forget"]))
                release(str(message["forget"]))
    kept.stop_all(grace)


if __name__ == "__main__":
    _keep(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
