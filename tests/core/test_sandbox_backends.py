"""The built-in envelope's two backends, process by process: the escapes each must stop, and what only one can.

Each test wraps a small Python probe with the run's envelope (real bubblewrap, real Landlock and
seccomp) and reads what it could do; the host side (a TCP listener, a UDP socket) counts what arrived.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading

import pytest
import tether
from tether import sandbox

PROBE = r"""
import ctypes, json, os, socket, sys
out = {}
def attempt(name, f):
    try:
        out[name] = f()
    except OSError as e:
        out[name] = type(e).__name__
spec = json.loads(sys.argv[1])
attempt("key", lambda: open(spec["key"]).read())
attempt("outside", lambda: open(spec["outside"], "w").write("x"))
attempt("inside", lambda: open("made-inside.txt", "w").write("ok"))
attempt("tcp", lambda: bool(socket.create_connection(("127.0.0.1", spec["tcp"]), timeout=5)))
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"out", ("127.0.0.1", spec["udp"]))
    return "sent"
attempt("udp", udp)
attempt("udp6", lambda: bool(socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)))
attempt("raw", lambda: bool(socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)))
attempt("sctp", lambda: bool(socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132)))
def bind_any():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return "bound"
attempt("bind", bind_any)
attempt("environ", lambda: bool(open(f"/proc/{spec['host_pid']}/environ").read()))
def signal_host():
    os.kill(spec["host_pid"], 0)
    return "signalled"
attempt("signal", signal_host)
libc = ctypes.CDLL(None, use_errno=True)
out["userns"] = "refused" if libc.unshare(0x10000000) != 0 else "made"
out["mount"] = "refused" if libc.mount(b"none", b"/mnt", b"tmpfs", 0, None) != 0 else "made"
with open("/proc/self/status") as fh:
    out["caps"] = [line.split()[1] for line in fh if line.startswith("CapEff")][0]
out["nnp"] = [line.split()[1] for line in open("/proc/self/status") if line.startswith("NoNewPrivs")][0]
out["secret"] = os.environ.get("FAKE_SERVICE_TOKEN")
print(json.dumps(out))
"""


@pytest.fixture
def listeners():
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.2)
    seen = {"tcp": 0, "udp": 0}

    def accept() -> None:
        while True:
            try:
                conn, _ = tcp.accept()
            except OSError:
                return
            seen["tcp"] += 1
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    yield tcp.getsockname()[1], udp, seen
    tcp.close()
    udp.close()


def probe(confined, listeners, **options) -> tuple[dict, dict, str]:
    tcp_port, udp, seen = listeners
    spec = {
        "key": str(confined.key),
        "outside": str(confined.home / "outside.txt"),
        "tcp": tcp_port,
        "udp": udp.getsockname()[1],
        "host_pid": os.getpid(),
    }
    with tether.open_run_sync(
        confined.root, load_entry_points=False, options=confined.options(**options)
    ) as run:
        envelope = sandbox.envelope(run, "kernel")
        assert envelope is not None and envelope.refusal is None, envelope
        argv = list(envelope.wrap([sys.executable, "-I", "-c", PROBE, json.dumps(spec)]))
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, cwd=confined.root, check=False
        )
        assert done.returncode == 0, done.stderr
        try:
            while udp.recv(64):
                seen["udp"] += 1
        except OSError:
            pass
        return json.loads(done.stdout.splitlines()[-1]), seen, envelope.policy


def test_with_the_network_off_neither_backend_lets_a_process_out(confined, listeners):
    got, seen, policy = probe(confined, listeners)
    bwrap = confined.backend == "bwrap"
    assert got["key"] == ("FileNotFoundError" if bwrap else "PermissionError")
    assert got["outside"] == ("OSError" if bwrap else "PermissionError")  # EROFS / EACCES
    assert got["inside"] == 2 and (confined.root / "made-inside.txt").read_text() == "ok"
    assert got["tcp"] == ("ConnectionRefusedError" if bwrap else "PermissionError")
    # bubblewrap: a datagram goes out into a namespace of its own, where nothing listens; Landlock cannot
    # govern UDP, so seccomp refuses the socket itself
    assert got["udp"] == ("sent" if bwrap else "PermissionError")
    assert got["udp6"] == (True if bwrap else "PermissionError")
    assert got["sctp"] in (("PermissionError",) if not bwrap else (True, "OSError", "PermissionError"))
    assert got["raw"] == "PermissionError"  # no capabilities on either
    assert got["bind"] == ("bound" if bwrap else "PermissionError")  # Landlock: only its relay ports
    assert got["userns"] == "refused" and got["mount"] == "refused"
    assert got["caps"] == "0000000000000000" and got["nnp"] == "1"
    assert got["secret"] is None
    assert seen == {"tcp": 0, "udp": 0}
    assert not (confined.home / "outside.txt").exists()
    assert ("no network" in policy) and ("Landlock ABI" in policy) == (not bwrap)


def test_host_processes_are_out_of_reach_on_both_backends(confined, listeners):
    got, _, _ = probe(confined, listeners)
    if confined.backend == "bwrap":
        # a pid namespace of its own: the host's pid names nothing (or another process inside)
        assert got["environ"] in ("FileNotFoundError", "PermissionError", True)
        assert got["signal"] in ("ProcessLookupError", "signalled")
    else:
        # no pid namespace: the host's process is there, but Landlock's ptrace rule and signal scope keep it
        # out of reach (the policy line says host processes are visible)
        assert got["environ"] == "PermissionError" and got["signal"] == "PermissionError"


def test_with_the_network_on_both_backends_reach_the_host_and_still_guard_files(confined, listeners):
    got, seen, policy = probe(confined, listeners, sandbox_network="on")
    assert got["tcp"] is True and got["udp"] == "sent" and seen == {"tcp": 1, "udp": 1}
    assert got["key"] in ("FileNotFoundError", "PermissionError") and got["inside"] == 2
    assert "network on" in policy


def test_the_policy_line_says_what_landlock_cannot_confine(confined):
    with tether.open_run_sync(confined.root, load_entry_points=False, options=confined.options()) as run:
        policy = sandbox.envelope(run, "kernel").policy
    if confined.backend == "bwrap":
        assert (
            policy.startswith("root read-write except .git hooks and config") and "no host sockets" in policy
        )
        return
    for said in (
        "its .git hooks and config included (Landlock cannot make them read-only inside it)",
        "the host's /tmp too, readable: not private",
        "host Unix sockets reachable by path (Landlock cannot hide them)",
        "no pid namespace",
    ):
        assert said in policy, policy


@pytest.mark.parametrize("confined", ["bwrap"], indirect=True)
def test_sandbox_backend_bwrap_refuses_where_bubblewrap_cannot_start(confined, monkeypatch, tmp_path):
    stub = tmp_path / "stub-bin"
    stub.mkdir()
    (stub / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
    )
    (stub / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{stub}{os.pathsep}{os.environ['PATH']}")
    sandbox.bwrap_problem.cache_clear()
    try:
        with tether.open_run_sync(confined.root, load_entry_points=False, options=confined.options()) as run:
            forced = sandbox.envelope(run, "kernel")
        with tether.open_run_sync(confined.root, load_entry_points=False, options={"sandbox": True}) as run:
            auto = sandbox.envelope(run, "kernel")
    finally:
        sandbox.bwrap_problem.cache_clear()
    assert forced.refusal is not None and "setting up uid map: Permission denied" in forced.refusal
    assert "apparmor_restrict_unprivileged_userns=0" in forced.refusal
    assert auto.refusal is None and auto.name == "landlock"
    assert auto.policy.startswith("bubblewrap could not start (bwrap: setting up uid map: Permission denied)")


def test_sandbox_backend_is_checked_at_open(tmp_path):
    from tether.options import OptionsError

    with (
        pytest.raises(OptionsError, match="sandbox_backend"),
        tether.open_run_sync(
            tmp_path, load_entry_points=False, options={"sandbox": True, "sandbox_backend": "seatbelt"}
        ),
    ):
        pass


WORKTREE_PROBE = r"""
import json, subprocess, sys
top, root = sys.argv[1:3]
out = {}
def attempt(name, f):
    try:
        out[name] = f()
    except OSError as e:
        out[name] = type(e).__name__
attempt("root_file", lambda: open(root + "/app.py", "w").write("x = 666\n"))
attempt("hook", lambda: open(top + "/.git/hooks/pre-commit", "w").write("#!/bin/sh\n"))
attempt("config", lambda: open(top + "/.git/config", "a").write("\n"))
attempt("here", lambda: open("app.py", "w").write("x = 2\n"))
ident = ["-c", "user.name=w", "-c", "user.email=w@example.org"]
def commit(where):
    done = subprocess.run(["git", *ident, "-C", where, "commit", "-q", "-am", "inside"], capture_output=True, text=True)
    return done.returncode
out["commit_here"] = commit(".")
out["commit_root"] = commit(root)
print(json.dumps(out))
"""


@pytest.mark.parametrize("sub", [False, True], ids=["top", "subfolder"])
def test_a_process_given_a_worktree_writes_it_and_commits_there_but_not_the_root(confined, tmp_path, sub):
    ident = ["-c", "user.name=dev", "-c", "user.email=dev@example.org"]
    top = confined.root
    root = top / "pkg" if sub else top
    root.mkdir(exist_ok=True)
    (root / "app.py").write_text("x = 1\n")
    subprocess.run(["git", "add", "-A"], cwd=top, check=True, timeout=30)
    subprocess.run(["git", *ident, "commit", "-q", "-m", "init"], cwd=top, check=True, timeout=30)
    work = top / ".git" / "elsewhere" / "w1"  # a linked worktree in the git dir, as vibe makes them
    subprocess.run(["git", "worktree", "add", "-q", "-b", "side", str(work)], cwd=top, check=True, timeout=30)
    cwd = work / "pkg" if sub else work
    with tether.open_run_sync(root, load_entry_points=False, options=confined.options()) as run:
        envelope = sandbox.envelope(run, "worker", writable=work)
        assert envelope is not None and envelope.writable == work
        argv = ["env", "-C", str(cwd), "--", sys.executable, "-I", "-c", WORKTREE_PROBE, str(top), str(root)]
        done = subprocess.run(
            list(envelope.wrap(argv)), capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr
        got = json.loads(done.stdout.splitlines()[-1])
        assert sandbox.envelope(run, "worker").writable == root  # none asked: the root, as before
    refused = "OSError" if confined.backend == "bwrap" else "PermissionError"
    assert got == {
        "root_file": refused,
        "hook": refused,
        "config": refused,
        "here": 6,
        "commit_here": 0,
        "commit_root": 128,  # git cannot take the root's index lock
    }, got
    assert (root / "app.py").read_text() == "x = 1\n"
    assert not (top / ".git" / "hooks" / "pre-commit").exists()
    shown = subprocess.run(
        ["git", "log", "-1", "--format=%s", "side"], cwd=top, capture_output=True, text=True, check=True
    )
    assert shown.stdout.strip() == "inside"
    assert (
        f"its working directory {os.path.relpath(work, root)}, the repository's git objects, refs and logs"
        in envelope.policy
    )
    assert "the root and everything else read-only" in envelope.policy, envelope.policy


def test_a_writable_folder_that_is_not_a_worktree_of_the_root_gets_no_git_rights(confined, tmp_path):
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    (elsewhere / ".git").write_text(f"gitdir: {confined.root / '.git'}\n")  # points at the root's git dir
    with tether.open_run_sync(confined.root, load_entry_points=False, options=confined.options()) as run:
        envelope = sandbox.envelope(run, "worker", writable=elsewhere)
        probe = "import sys; open(sys.argv[1] + '/.git/HEAD', 'a').write('')"
        argv = [sys.executable, "-I", "-c", probe, str(confined.root)]
        done = subprocess.run(
            list(envelope.wrap(argv)), capture_output=True, text=True, timeout=120, check=False
        )
    assert done.returncode != 0 and ("Read-only" in done.stderr or "Permission" in done.stderr)
    assert "not a git worktree" in envelope.policy, envelope.policy


def test_a_worktree_whose_git_file_names_another_worktrees_git_dir_gets_no_git_rights(confined):
    ident = ["-c", "user.name=dev", "-c", "user.email=dev@example.org"]
    top = confined.root
    (top / "app.py").write_text("x = 1\n")
    subprocess.run(["git", "add", "-A"], cwd=top, check=True, timeout=30)
    subprocess.run(["git", *ident, "commit", "-q", "-m", "init"], cwd=top, check=True, timeout=30)
    works = [top / ".git" / "elsewhere" / name for name in ("w1", "w2")]
    for work in works:
        subprocess.run(["git", "worktree", "add", "-q", "-b", work.name, str(work)], cwd=top, check=True)
    w1, w2 = works
    other = (w2 / ".git").read_text()
    (w1 / ".git").write_text(other)  # w1, on an earlier run, pointed its .git at w2's git dir
    with tether.open_run_sync(top, load_entry_points=False, options=confined.options()) as run:
        envelope = sandbox.envelope(run, "worker", writable=w1)
        own = top / ".git" / "worktrees" / "w2"
        probe = "import sys; open(sys.argv[1] + '/HEAD', 'a').write('')"
        done = subprocess.run(
            list(envelope.wrap([sys.executable, "-I", "-c", probe, str(own)])),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode != 0 and ("Read-only" in done.stderr or "Permission" in done.stderr), done.stderr
    assert "not a git worktree" in envelope.policy, envelope.policy
