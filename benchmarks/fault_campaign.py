"""The fault campaign of issue 18, re-runnable: every fault the issue lists, driven against this tree.

Each fault is driven as the issue found it (a run, `tether call`, or `tether serve` over stdio) and
judged on four counts:

- LOST: data lost or corrupted on disk (a write that said "done" and is not there, bytes it did not
  touch changed, a half-applied multi-file write);
- HUNG: no answer within the fault's bound;
- LEFT: a process, the run's private directory or a temp file of ours still there afterwards, or
  memory a closed run keeps;
- WRONG: an answer that is not what the issue asks for (a traceback or "a fault of the tool" for bad
  input, a write that looks clean when diagnostics failed, unbounded data, a read surface that runs
  the checkout's code).

    uv run python benchmarks/fault_campaign.py            # every fault
    uv run python benchmarks/fault_campaign.py 3 7 11     # some of them (by item number)

CI drives every fault of this list through tests/test_faults.py (with 4 kills of the SIGKILL-mid-write
fault; ``TETHER_FAULTS=all`` there makes its 15); this script replays the whole list
by hand, with its timings. Exit status 0 when every count is 0. A fault that cannot be driven here (no mount, no cargo) says
"skipped" and why. Everything happens under a fresh temporary folder, removed at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import psutil
import tether
import tether.files
from tether.testing import open_test_run

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from strays import (  # pyright: ignore[reportMissingImports] - tests/ is put on sys.path just above
    CELL,
    DAEMON,
    Serve,
    cell_pids,
    wait_gone,
)

PY = sys.executable
BOUND = 120.0  # seconds a fault may take before it counts as hung
KILLS = 15  # SIGKILLs of a 400-file apply_patch (fault 4)
KINDS = ("LOST", "HUNG", "LEFT", "WRONG")
SERVERS: set[int] = set()  # every `tether serve` the campaign started (owners of private directories)

# the cell of the campaign: a child in its own session, a double-forked setsid daemon and one that also
# clears its environment (the run's tag with it): their pids
CLEARING_CELL = CELL.replace(
    "print(own.pid, daemon)\n",
    f"bare = subprocess.run([sys.executable, '-c', {DAEMON!r}, 'CLEAR'], capture_output=True, text=True).stdout\n"
    "print(own.pid, daemon, bare.strip())\n",
)


class Findings:
    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, kind: str, what: str) -> None:
        assert kind in KINDS
        self.items.append((kind, what))

    def check(self, ok: bool, kind: str, what: str) -> None:
        if not ok:
            self.add(kind, what)


def project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0"\n')
    return root


def one_paragraph_error(result, f: Findings, what: str) -> None:
    text = result.plain
    f.check(result.is_error, "WRONG", f"{what}: answered as a success: {text[:120]!r}")
    f.check("Traceback" not in text, "WRONG", f"{what}: a traceback in the answer")
    f.check("fault of the tool" not in text, "WRONG", f"{what}: 'a fault of the tool': {text[:160]!r}")
    f.check("\n\n" not in text.strip(), "WRONG", f"{what}: more than one paragraph: {text[:160]!r}")


def serve(root: Path, *options: str) -> Serve:
    server = Serve(root, *options)
    SERVERS.add(server.proc.pid)
    return server


# -- data lost or corrupted ----------------------------------------------------------------------------


async def f01_rename_line_model(base: Path, f: Findings) -> None:
    root = project(base / "r")
    src = b"def helper(x):\n    return x\n\ndef main():\n    # c\x0c p\n    # s \xe2\x80\xa8 h\n    return helper(2)\n"
    (root / "f.py").write_bytes(src)
    async with open_test_run(root, only=["lsp"]) as run:
        r = await run.call("lsp_rename", {"file": "f.py", "line": 1, "symbol": "helper", "new_name": "h2"})
    got = (root / "f.py").read_bytes()
    f.check(not r.is_error, "WRONG", f"lsp_rename failed: {r.plain[:200]}")
    f.check(got == src.replace(b"helper", b"h2"), "LOST", f"lsp_rename edited the wrong place: {got!r}")


async def f02_patch_keeps_untouched_bytes(base: Path, f: Findings) -> None:
    root = project(base / "r")
    (root / "c.txt").write_bytes(b"one\r\ntwo\r\n")
    (root / "s.py").write_bytes("a = 'x\u2028y'\n\x0c\nz = 1\n".encode())
    patch = (
        "--- a/c.txt\n+++ b/c.txt\n@@ -1,2 +1,3 @@\n one\n-two\n+one\n+TWO\n"
        "--- a/s.py\n+++ b/s.py\n@@ -3 +3 @@\n-z = 1\n+z = 2\n"
    )
    async with open_test_run(root, only=[], plugins=[tether.files]) as run:
        r = await run.call("apply_patch", {"patch": patch})
    f.check(not r.is_error, "WRONG", f"apply_patch failed: {r.plain[:200]}")
    got = (root / "c.txt").read_bytes()
    f.check(got == b"one\r\none\r\nTWO\r\n", "LOST", f"CRLF file rewritten: {got!r}")
    got = (root / "s.py").read_bytes()
    f.check(got == "a = 'x\u2028y'\n\x0c\nz = 2\n".encode(), "LOST", f"U+2028 / form feed rewritten: {got!r}")


async def f03_resolve_race_and_two_writers(base: Path, f: Findings) -> None:
    root = project(base / "r")
    lost = 0
    async with open_test_run(root, only=["astgrep"], plugins=[tether.files]) as run:
        for i in range(60):
            (root / "m.py").write_text("x.append(1)\n")
            staged = await run.call(
                "ast_edit", {"pattern": "$X.append($Y)", "rewrite": "$X.extend([$Y])", "path": "m.py"}
            )
            mine = f"y = {i}\n"

            async def late(delay=(i % 5) / 1000, mine=mine):
                await asyncio.sleep(delay)
                return await run.call("write", {"path": "m.py", "content": mine})

            accepted, written = await asyncio.gather(
                run.call("resolve", {"edit_id": (staged.data or {}).get("edit_id"), "action": "accept"}),
                late(),
            )
            final = (root / "m.py").read_text()
            if not written.is_error and not accepted.is_error and final != mine:
                lost += 1
    f.check(lost == 0, "LOST", f"resolve overwrote a later write in {lost} of 60 races")
    # two processes, 20 edits each, appending their own line before END (retried when refused)
    (root / "log.txt").write_text("END\n")
    worker = textwrap.dedent(
        """
        import sys, tether, tether.files
        name, root = sys.argv[1], sys.argv[2]
        done = 0
        with tether.open_run_sync(root, plugins=[tether.files], load_entry_points=False) as run:
            while done < 20:
                r = run.call("edit", {"path": "log.txt", "old_string": "END\\n",
                                      "new_string": f"{name}-{done}\\nEND\\n"})
                if not r.is_error:
                    done += 1
                elif "changed" not in r.plain and "lock" not in r.plain:
                    print("ERROR", r.plain, flush=True)
                    break
        print("DONE", done, flush=True)
        """
    )
    procs = [
        subprocess.Popen([PY, "-c", worker, n, str(root)], stdout=subprocess.PIPE, text=True)
        for n in ("a", "b")
    ]
    outs = [p.communicate(timeout=BOUND)[0] for p in procs]
    claimed = sum(int(o.split("DONE")[-1]) for o in outs if "DONE" in o)
    lines = (root / "log.txt").read_text().splitlines()
    f.check(claimed == 40, "WRONG", f"two writers: {claimed} of 40 edits done ({outs})")
    f.check(
        len(lines) - 1 == claimed, "LOST", f"two writers: {claimed} edits said done, {len(lines) - 1} on disk"
    )


def _patch_400(root: Path) -> str:
    hunks = []
    for i in range(400):
        (root / "many" / f"f{i:03}.txt").write_text(f"old {i}\n")
        hunks.append(f"--- a/many/f{i:03}.txt\n+++ b/many/f{i:03}.txt\n@@ -1 +1 @@\n-old {i}\n+new {i}\n")
    return "".join(hunks)


async def f04_sigkill_mid_write(base: Path, f: Findings) -> None:
    root = project(base / "r")
    (root / "many").mkdir()
    patch = _patch_400(root)
    argv = [PY, "-m", "tether.cli", "call", "apply_patch", json.dumps({"patch": patch}), "--root", str(root)]
    t0 = time.monotonic()
    first = subprocess.run(argv, capture_output=True, text=True, timeout=BOUND, check=False)
    whole = time.monotonic() - t0
    applied = {(root / "many" / f"f{i:03}.txt").read_text() for i in range(400)} == {
        f"new {i}\n" for i in range(400)
    }
    if first.returncode != 0 or not applied:
        f.add(
            "WRONG", f"the uninterrupted 400-file patch did not apply: {(first.stdout + first.stderr)[:200]}"
        )
        return None
    rng = random.Random(18)
    half = 0
    outcomes: list[str] = []
    for _ in range(KILLS):
        _patch_400(root)
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 1.1) * whole)  # from the interpreter's start to past the write's end
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        async with open_test_run(root, only=[], plugins=[tether.files]):
            pass  # opening a run recovers the root
        texts = {(root / "many" / f"f{i:03}.txt").read_text().split()[0] for i in range(400)}
        outcomes.append("/".join(sorted(texts)))
        if len(texts) != 1:
            half += 1
        stray = [p.name for p in root.rglob("*") if ".tether-" in p.name]
        f.check(not stray, "LEFT", f"SIGKILL mid-write left {len(stray)} temp files: {stray[:3]}")
    f.check(half == 0, "LOST", f"{half} of {KILLS} SIGKILLed 400-file patches left half-applied")
    print(
        f"      (one uninterrupted 400-file patch took {whole:.2f} s; after the {KILLS} kills: {outcomes.count('old')} old, {outcomes.count('new')} new)"
    )


async def f05_disk_full(base: Path, f: Findings) -> str | None:
    mnt = base / "small"
    mnt.mkdir()
    if shutil.which("mount") is None or (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True
        ).returncode
    ):
        return "cannot mount a tmpfs here"
    try:
        root = project(mnt)
        async with open_test_run(root, only=[], plugins=[tether.files]) as run:
            r = await run.call("write", {"path": "big.txt", "content": "x" * 1_000_000})
        one_paragraph_error(r, f, "write on a full disk")
        f.check(
            "disk is full" in r.plain, "WRONG", f"ENOSPC not said as the user's full disk: {r.plain[:160]}"
        )
        left = [p.name for p in root.iterdir() if p.name != "pyproject.toml"]
        f.check(not left, "LEFT", f"a full disk kept {left}")
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
    return None


async def f06_links_and_modes(base: Path, f: Findings) -> None:
    root = project(base / "r")
    old = os.umask(0o022)
    try:
        async with open_test_run(root, only=[], plugins=[tether.files]) as run:
            for tool, args in (
                ("write", {"path": "a.txt", "content": "new\n"}),
                ("edit", {"path": "a.txt", "old_string": "old", "new_string": "new"}),
                ("apply_patch", {"patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n"}),
            ):
                (root / "a.txt").write_text("old\n")
                (root / "other.txt").unlink(missing_ok=True)
                os.link(root / "a.txt", root / "other.txt")
                r = await run.call(tool, args)
                f.check(not r.is_error, "WRONG", f"{tool}: {r.plain[:120]}")
                f.check((root / "other.txt").read_text() == "new\n", "LOST", f"{tool} broke a hard link")
            await run.call("write", {"path": "fresh.txt", "content": "x\n"})
            await run.call("apply_patch", {"patch": "--- /dev/null\n+++ b/born.txt\n@@ -0,0 +1 @@\n+x\n"})
        for name in ("fresh.txt", "born.txt"):
            mode = (root / name).stat().st_mode & 0o777
            f.check(mode == 0o644, "WRONG", f"{name} created with mode {oct(mode)} under umask 022")
    finally:
        os.umask(old)


# -- hangs ---------------------------------------------------------------------------------------------


async def f07_fifo_device_sparse(base: Path, f: Findings) -> None:
    root = project(base / "r")
    os.mkfifo(root / "p")
    try:
        r = subprocess.run(
            [PY, "-m", "tether.cli", "call", "read", '{"path":"p"}', "--root", str(root)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        f.check(
            r.returncode == 1 and "Traceback" not in r.stdout + r.stderr,
            "WRONG",
            f"FIFO read: {r.stdout[:160]}",
        )
    except subprocess.TimeoutExpired:
        f.add("HUNG", "`tether call read` of a FIFO did not answer in 60 s")
    with open(root / "sparse.bin", "wb") as fh:
        fh.truncate(2 << 30)
    if hasattr(os, "mknod"):
        with contextlib.suppress(OSError):
            os.mknod(root / "zero", 0o666 | 0o020000, os.makedev(1, 5))  # a /dev/zero of our own
    server = serve(root)
    try:
        for tool, args in (
            ("read", {"path": "p"}),
            ("edit", {"path": "p", "old_string": "a", "new_string": "b"}),
            ("apply_patch", {"patch": "--- a/p\n+++ b/p\n@@ -1 +1 @@\n-a\n+b\n"}),
            ("read", {"path": "sparse.bin"}),
            ("edit", {"path": "sparse.bin", "old_string": "a", "new_string": "b"}),
            *([("read", {"path": "zero"})] if (root / "zero").exists() else []),
        ):
            t0 = time.monotonic()
            error, text = server.call(tool, args)
            spent = time.monotonic() - t0
            f.check(error and "Traceback" not in text, "WRONG", f"{tool} {args}: {text[:160]}")
            f.check(spent < 20, "HUNG", f"{tool} {args} took {spent:.1f} s")
        rss = psutil.Process(server.proc.pid).memory_info().rss
        f.check(rss < 1 << 30, "WRONG", f"serve grew to {rss >> 20} MiB reading a device or sparse file")
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(20)
        except subprocess.TimeoutExpired:
            f.add("HUNG", "serve did not act on SIGTERM after the FIFO calls")
    finally:
        server.close()


async def f08_serve_signals(base: Path, f: Findings) -> None:
    root = project(base / "r")
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        server = serve(root)
        try:
            error, text = server.call(
                "eval", {"code": CLEARING_CELL, "description": "start children that leave the session"}
            )
            f.check(not error, "WRONG", f"cell: {text[:160]}")
            pids = [
                *cell_pids(text),
                *[p.pid for p in psutil.Process(server.proc.pid).children(recursive=True)],
            ]
            server.proc.send_signal(sig)  # stdin stays open
            try:
                server.proc.wait(20)
            except subprocess.TimeoutExpired:
                f.add("HUNG", f"serve ignored {sig.name} while the client kept stdin open")
            left = wait_gone(pids)
            f.check(not left, "LEFT", f"{sig.name}: {len(left)} of {len(pids)} children survived")
        finally:
            server.close()


async def f09_cells_that_never_end(base: Path, f: Findings) -> None:
    root = project(base / "r")
    options = {"eval_total_timeout": 3, "eval_timeout": 2}
    async with open_test_run(root, only=["eval"], options=options) as run:
        for what, code in (
            (
                "prints forever",
                "import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.02)\n",
            ),
            ("clears forever", "from IPython.display import clear_output\nwhile True:\n    clear_output()\n"),
        ):
            t0 = time.monotonic()
            r = await run.call("eval", {"code": code, "description": f"a cell that {what} until stopped"})
            spent = time.monotonic() - t0
            f.check(spent < 30, "HUNG", f"a cell that {what} took {spent:.1f} s under a 3 s total budget")
            f.check(
                r.is_error or "budget" in r.plain or "timeout" in r.plain,
                "WRONG",
                f"{what}: {r.plain[-160:]}",
            )


async def f10_deep_json(base: Path, f: Findings) -> None:
    root = project(base / "r")
    server = serve(root)
    try:
        for depth in (150, 200, 1000, 100_000):
            server.ids += 1
            nested = "[" * depth + "]" * depth
            server.send_line(
                f'{{"jsonrpc":"2.0","id":{server.ids},"method":"tools/call",'
                f'"params":{{"name":"read","arguments":{{"path":{nested}}}}}}}'
            )
            try:
                answer = await asyncio.wait_for(asyncio.to_thread(server.answer, server.ids), 20)
                f.check(
                    "error" in answer or answer.get("result", {}).get("isError"),
                    "WRONG",
                    f"depth {depth}: {answer}",
                )
            except TimeoutError:
                f.add("HUNG", f"a request nested {depth} deep got no answer in 20 s")
                break
        error, _ = server.call("read", {"path": "pyproject.toml"})
        f.check(not error, "WRONG", "the server stopped serving after deep JSON")
    finally:
        server.close()


# -- left behind ---------------------------------------------------------------------------------------


async def f11_sigkill_of_serve(base: Path, f: Findings) -> None:
    root = project(base / "r")
    (root / "worker.py").write_text("import sys, time\nsys.stdin.read()\ntime.sleep(300)\n")
    vibe = json.dumps({"fast": [PY, str(root / "worker.py")]})
    server = serve(root, f"vibe={vibe}")
    try:
        server.call(
            "eval",
            {"code": "1 + 1", "language": "javascript", "description": "add one and one in JavaScript"},
        )
        _, text = server.call(
            "eval", {"code": CLEARING_CELL, "description": "start children that leave the session"}
        )
        escaped = cell_pids(text)
        server.call("vibe_spawn", {"brief": "work", "label": "w"})
        deadline = time.monotonic() + 20
        tree: list[int] = []
        while time.monotonic() < deadline:
            tree = [p.pid for p in psutil.Process(server.proc.pid).children(recursive=True)]
            if len(tree) >= 5:
                break
            time.sleep(0.05)
        mine = {*tree, *escaped}
        ours = [
            d
            for d in Path(tempfile.gettempdir()).glob("tether-run-*")
            if (d / ".owner").exists() and (d / ".owner").read_text().split()[0] == str(server.proc.pid)
        ]
    finally:
        server.proc.send_signal(signal.SIGKILL)
        server.close()
    left = wait_gone(mine)
    names = [_describe(p) for p in left]
    f.check(not left, "LEFT", f"SIGKILL of serve left {len(left)} of {len(mine)} processes: {names}")
    f.check(not any(d.exists() for d in ours), "LEFT", "SIGKILL of serve left the run's private directory")


async def f12_processes_that_leave_the_session(base: Path, f: Findings) -> None:
    root = project(base / "r")
    what = "start children that leave the session"
    async with open_test_run(root, only=["eval"]) as run:
        first = cell_pids((await run.call("eval", {"code": CELL, "description": what})).plain)
        await run.call(
            "eval", {"code": "", "reset": True, "description": "restart the interpreter from scratch now"}
        )
        left = wait_gone(first, 10)
        f.check(not left, "LEFT", f"reset=true left {len(left)} of {first} (own session, setsid daemon)")
        second = cell_pids((await run.call("eval", {"code": CELL, "description": what})).plain)
    left = wait_gone(second, 10)
    f.check(not left, "LEFT", f"closing the run left {len(left)} of {second} (own session, setsid daemon)")
    # through the `tether` command, whose process adopts orphans: also the daemon with a cleared environment
    out = subprocess.run(
        [
            PY,
            "-m",
            "tether.cli",
            "call",
            "eval",
            json.dumps({"code": CLEARING_CELL, "description": what}),
            "--root",
            str(root),
        ],
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    third = cell_pids(out.stdout)
    left = wait_gone(third, 20)
    f.check(
        not left, "LEFT", f"`tether call eval` left {len(left)} of {third} (own session, setsid, cleared env)"
    )
    pidfile = root / "daemon.pid"
    (root / "app.py").write_text(
        "import subprocess, sys\n"
        f"pid = subprocess.run([sys.executable, '-c', {DAEMON!r}], capture_output=True, text=True).stdout.strip()\n"
        f"open({str(pidfile)!r}, 'w').write(pid)\n"
        "print('daemon', pid)\n"
    )
    async with open_test_run(root, only=["debug"], conversation_id="c") as run:
        await run.call("debug", {"action": "breakpoints", "file": "app.py", "lines": [4]})
        launched = await run.call("debug", {"action": "launch", "program": "app.py"})
        f.check(not launched.is_error, "WRONG", f"debug launch: {launched.plain[:160]}")
        daemon = int(pidfile.read_text())
        await run.call("debug", {"action": "terminate"})
        f.check(not wait_gone([daemon], 10), "LEFT", "a debuggee's setsid daemon outlived terminate")


async def f13_open_close_cycles(base: Path, f: Findings) -> None:
    root = project(base / "r")
    script = textwrap.dedent(
        """
        import sys, psutil, tether
        me = psutil.Process()
        rss = []
        for i in range(50):
            with tether.open_run_sync(sys.argv[1]) as run:
                run.call("write", {"path": "a.txt", "content": str(i)})
                run.call("read", {"path": "a.txt"})
            if i in (9, 49):
                rss.append(me.memory_info().rss)
        print((rss[1] - rss[0]) / 40)
        """
    )
    out = subprocess.run([PY, "-c", script, str(root)], capture_output=True, text=True, timeout=BOUND * 3)
    per_run = float(out.stdout.split()[-1])
    print(f"      (RSS growth from cycle 10 to 50: {per_run / 1024:.1f} KiB per run)")
    f.check(per_run < 100 * 1024, "LEFT", f"a closed run keeps {per_run / 1024:.0f} KiB")


# -- wrong or unbounded answers ------------------------------------------------------------------------


async def f14_diagnostics_without_a_code(base: Path, f: Findings) -> None:
    root = project(base / "r")
    (root / "bad.py").write_text('x: int = "s"\ndef f(:\n')
    async with open_test_run(root, only=["lsp"], plugins=[tether.files]) as run:
        await run.call("lsp", {"action": "diagnostics", "file": "bad.py"})
        r = await run.call("write", {"path": "ok.py", "content": 'y: int = "no"\n'})
    f.check(
        "ok.py:1" in r.plain or "not assignable" in r.plain,
        "WRONG",
        f"diagnostics dropped: {r.plain[:200]!r}",
    )


async def f15_bad_input(base: Path, f: Findings) -> None:
    root = project(base / "r")
    os.symlink("loop2", root / "loop1")
    os.symlink("loop1", root / "loop2")
    async with open_test_run(root, only=["astgrep"], plugins=[tether.files]) as run:
        for what, tool, args in (
            ("a NUL in a path", "read", {"path": "a\x00b"}),
            ("a 5,000-character name", "write", {"path": "n" * 5000, "content": "x"}),
            ("a symlink loop", "read", {"path": "loop1"}),
            ("a lone surrogate in a path", "read", {"path": "a\udc80b"}),
            ("a lone surrogate in content", "write", {"path": "s.txt", "content": "x\ud800y"}),
            ("a lone surrogate in a pattern", "ast_grep", {"pattern": "\udfff", "language": "python"}),
        ):
            one_paragraph_error(await run.call(tool, args), f, what)


async def f16_bounded_error_data(base: Path, f: Findings) -> None:
    root = project(base / "r")
    options = {"vibe": {"fast": [PY, "-c", "pass"]}}
    async with open_test_run(root, only=["vibe"], modes={"vibe"}, options=options) as run:
        for tool, extra in (("vibe_wait", {}), ("vibe_kill", {}), ("vibe_send", {"message": "hi"})):
            r = await run.call(tool, {"worker_id": "w" * 10_000_000, **extra})
            size = len(r.plain) + len(json.dumps(r.data))
            f.check(size < 100_000, "WRONG", f"{tool} with a 10 MB worker id answered {size:,} characters")


async def f17_untrusted_checkout(base: Path, f: Findings) -> str | None:
    root = project(base / "r")
    mark = base / "ran"
    binary = root / "node_modules" / ".bin" / "typescript-language-server"
    binary.parent.mkdir(parents=True)
    binary.write_text(f"#!/bin/sh\ntouch {mark}\necho 4.3.3\nsleep 5\n")
    binary.chmod(0o755)
    (root / "a.ts").write_text("export const x: number = 1;\n")
    for surface in ("plan", "readonly"):
        async with open_test_run(root, only=["lsp"], surface=surface) as run:
            await run.call("lsp", {"action": "status"})
            await run.call("lsp", {"action": "hover", "file": "a.ts", "line": 1, "symbol": "x"})
        f.check(
            not mark.exists(), "WRONG", f"the {surface} surface ran the checkout's typescript-language-server"
        )
    if shutil.which("cargo") is None:
        return "cargo is not installed: the build.rs half was not driven"
    crate = project(base / "crate")
    (crate / "Cargo.toml").write_text('[package]\nname = "c"\nversion = "0.1.0"\nedition = "2021"\n')
    (crate / "build.rs").write_text(f'fn main() {{ std::fs::write("{mark}", "").unwrap(); }}\n')
    (crate / "src").mkdir()
    (crate / "src" / "main.rs").write_text("fn main() {}\n")
    async with open_test_run(crate, only=["lsp"], surface="plan") as run:
        await run.call("lsp", {"action": "diagnostics", "file": "*"})
    f.check(not mark.exists(), "WRONG", "`lsp diagnostics *` on plan ran the crate's build.rs")
    return None


FAULTS: list[tuple[int, str, Callable[[Path, Findings], Awaitable[str | None]]]] = [
    (1, "lsp_rename in a file with form feed / U+2028", f01_rename_line_model),
    (2, "apply_patch keeps CRLF, form feeds, U+2028", f02_patch_keeps_untouched_bytes),
    (3, "resolve vs a later write; two processes editing one file", f03_resolve_race_and_two_writers),
    (4, "SIGKILL mid 400-file apply_patch (KILLS kills)", f04_sigkill_mid_write),
    (5, "disk full (256 KiB tmpfs)", f05_disk_full),
    (6, "hard links and the umask", f06_links_and_modes),
    (7, "FIFO, device, 2 GiB sparse file under the root", f07_fifo_device_sparse),
    (8, "serve: SIGTERM / SIGHUP / SIGINT with stdin open", f08_serve_signals),
    (9, "a cell that prints / clears forever", f09_cells_that_never_end),
    (10, "JSON-RPC nested 150 .. 100,000 deep", f10_deep_json),
    (11, "SIGKILL of serve with kernels, worker, cell children", f11_sigkill_of_serve),
    (12, "processes that leave the session (cell, debuggee)", f12_processes_that_leave_the_session),
    (13, "50 open/close cycles", f13_open_close_cycles),
    (14, "diagnostics without a code next to coded ones", f14_diagnostics_without_a_code),
    (15, "NUL, long name, symlink loop, lone surrogates", f15_bad_input),
    (16, "vibe tools echoing a 10 MB worker id", f16_bounded_error_data),
    (17, "untrusted checkout on plan / readonly", f17_untrusted_checkout),
]


def snapshot() -> set[int]:
    return {p.pid for p in psutil.process_iter()}


async def main(wanted: set[int]) -> int:
    totals = dict.fromkeys(KINDS, 0)
    base = Path(tempfile.mkdtemp(prefix="fault-campaign-"))
    os.environ["XDG_STATE_HOME"] = str(base / "state")  # journals and locks of this campaign only
    runs_before = set(Path(tempfile.gettempdir()).glob("tether-run-*"))
    spawned = {os.getpid()}
    try:
        for number, title, fault in FAULTS:
            if wanted and number not in wanted:
                continue
            here = base / f"f{number:02}"
            here.mkdir()
            f = Findings()
            before = snapshot()
            t0 = time.monotonic()
            try:
                skipped = await asyncio.wait_for(fault(here, f), BOUND * 4)
            except TimeoutError:
                f.add("HUNG", f"the whole fault took over {BOUND * 4:.0f} s")
                skipped = None
            except Exception as exc:  # noqa: BLE001 - a fault that could not be driven is reported, not fatal
                f.add("WRONG", f"could not drive it: {type(exc).__name__}: {exc}"[:300])
                skipped = None
            spent = time.monotonic() - t0
            new = snapshot() - before - {os.getpid()}
            spawned |= new
            stayed = wait_gone([p for p in new if p != os.getpid()], 20)
            stayed = [p for p in stayed if _is_ours(p, here)]
            f.check(not stayed, "LEFT", f"{len(stayed)} processes still running afterwards")
            counts = {k: sum(1 for kind, _ in f.items if kind == k) for k in KINDS}
            for k in KINDS:
                totals[k] += counts[k]
            verdict = "ok" if not f.items else " ".join(f"{k} {v}" for k, v in counts.items() if v)
            note = f"  (skipped in part: {skipped})" if skipped else ""
            print(f"{number:>3}. {title:<58} {spent:6.1f} s  {verdict}{note}", flush=True)
            for kind, what in f.items:
                print(f"      {kind}: {what}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    # ours: made by this process or a process it started (other users of this machine make their own)
    stale = {
        d
        for d in set(Path(tempfile.gettempdir()).glob("tether-run-*")) - runs_before
        if _owner(d) in spawned | SERVERS
    }
    if stale:
        totals["LEFT"] += len(stale)
        print(f"LEFT: {len(stale)} private run directories remain: {sorted(d.name for d in stale)}")
    print("campaign: " + ", ".join(f"{v} {k.lower()}" for k, v in totals.items()))
    return 0 if not any(totals.values()) else 1


def _describe(pid: int) -> str:
    try:
        p = psutil.Process(pid)
        env = "empty environment" if not p.environ() else "environment kept"
        return f"{pid} {' '.join(p.cmdline())[:80]!r} (parent {p.ppid()}, {env})"
    except psutil.Error:
        return f"{pid} (gone)"


def _owner(d: Path) -> int:
    try:
        return int((d / ".owner").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _is_ours(pid: int, here: Path) -> bool:
    """A process started during the fault that belongs to it (not another user's process)."""
    try:
        p = psutil.Process(pid)
        return p.environ().get("XDG_STATE_HOME") == os.environ["XDG_STATE_HOME"] or str(here) in " ".join(
            [p.cwd(), *p.cmdline()]
        )
    except psutil.Error:
        return False


if __name__ == "__main__":
    sys.exit(asyncio.run(main({int(a) for a in sys.argv[1:]})))
