"""The write path every file-writing tool shares (`Run.write_files` -> `tether.atomic`): one writer per
root, recoverable after a SIGKILL at any step, a full disk said in one line, links and modes kept."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tether
import tether.atomic
import tether.files
from tether.testing import assert_model_error, open_test_run


@pytest.fixture(autouse=True)
def private_state(tmp_path, monkeypatch):
    """Journals and locks in this test's own state directory (children inherit it)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def root(tmp_path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    return r


def files_run(root: Path, **kw):
    return tether.open_run(root, plugins=[tether.files], load_entry_points=False, **kw)


def leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".tether-" in p.name)


# -- item 3: one write lock per root; the snapshot check inside it -------------------------------------


async def test_resolve_never_overwrites_a_write_that_lands_after_staging(root):
    """The issue's race: gather(resolve accept, write 0-4 ms later). The write must never be lost."""
    async with open_test_run(root, only=["astgrep"], plugins=[tether.files]) as run:
        for i in range(40):
            (root / "m.py").write_text("x.append(1)\n")
            staged = await run.call(
                "ast_edit", {"pattern": "$X.append($Y)", "rewrite": "$X.extend([$Y])", "path": "m.py"}
            )
            assert not staged.is_error, staged.plain
            mine = f"y = {i}\n"

            async def late_write(delay=(i % 5) / 1000, mine=mine):
                await asyncio.sleep(delay)
                return await run.call("write", {"path": "m.py", "content": mine})

            accepted, written = await asyncio.gather(
                run.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"}), late_write()
            )
            assert not written.is_error, written.plain
            final = (root / "m.py").read_text()
            # either the write came last, or it came first and resolve refused: never both "done" and lost
            assert final == mine, (i, accepted.plain, final)
            if not accepted.is_error:
                continue
            assert "changed since the change was staged; nothing was written" in accepted.plain


WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tether.atomic import ChangedSince, Snapshot, write_all

    root, tag, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    target = root / "log.txt"
    done = 0
    while done < n:  # read-modify-write, as edit and resolve do: retried when another writer got in between
        data = target.read_bytes()
        try:
            write_all({target: data + f"{tag}{done}\\n".encode()}, root=root, expect=[Snapshot.of(target, data)])
        except ChangedSince:
            continue
        done += 1
    """
)


def test_two_processes_editing_one_file_lose_nothing(root):
    (root / "log.txt").write_text("")
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(root), tag, "25"]) for tag in ("a", "b")]
    for p in procs:
        assert p.wait(timeout=120) == 0
    lines = (root / "log.txt").read_text().splitlines()
    assert sorted(lines) == sorted([f"a{i}" for i in range(25)] + [f"b{i}" for i in range(25)])
    assert leftovers(root) == [] and not tether.atomic.state_dir(root, create=False).exists()


def test_the_state_dir_is_made_again_when_another_writer_removes_it_meanwhile(root, monkeypatch):
    # the race of two processes: our mkdir sees the folder, the other's release removes it before
    # Path.mkdir(exist_ok=True) checks it is a folder, which then raised FileExistsError
    folder = tether.atomic.state_dir(root)
    folder.rmdir()
    real_mkdir, raced = Path.mkdir, []

    def mkdir(self, *args, **kwargs):
        if self == folder and not raced:
            raced.append(self)
            raise FileExistsError(17, "File exists", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    assert tether.atomic.state_dir(root) == folder and folder.is_dir() and raced


# -- item 4: SIGKILL at every step of a multi-file write -------------------------------------------------

KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    import tether.atomic as atomic

    root, kill_at = Path(sys.argv[1]), int(sys.argv[2])
    steps = 0

    def step(fn):
        def wrapped(*a, **k):
            global steps
            steps += 1
            if steps == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return fn(*a, **k)
        return wrapped

    # every system call that changes the disk is a kill point
    for name in ("open", "write", "fsync", "replace", "rename", "link", "unlink", "fchmod", "makedirs"):
        setattr(os, name, step(getattr(os, name)))
    atomic._replace = os.replace
    atomic.write_all(
        {root / "a.txt": b"A1\\n", root / "b.txt": b"B1\\n", root / "c.txt": None, root / "sub" / "d.txt": b"D1\\n"},
        root=root,
    )
    print(steps)
    """
)

OLD = {"a.txt": "A0\n", "b.txt": "B0\n", "c.txt": "C0\n"}
NEW = {"a.txt": "A1\n", "b.txt": "B1\n", "sub/d.txt": "D1\n"}


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def _fresh(base: Path, n: int) -> Path:
    r = base / f"r{n}"
    r.mkdir()
    for name, text in OLD.items():
        (r / name).write_text(text)
    os.link(r / "b.txt", base / f"b-other-name-{n}")  # b.txt has two links: it is written in place
    return r


@pytest.mark.timeout(600)  # one interpreter per kill point: slow on a busy machine
async def test_a_sigkill_at_any_step_is_rolled_back_or_forward_by_the_next_run(tmp_path):
    base = tmp_path / "kills"
    base.mkdir()
    counted = subprocess.run(
        [sys.executable, "-c", KILLER, str(_fresh(base, 0)), "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    total = int(counted.stdout)
    assert total > 10
    outcomes = set()
    for n in range(1, total + 1):
        r = _fresh(base, n)
        proc = subprocess.run([sys.executable, "-c", KILLER, str(r), str(n)], capture_output=True, timeout=60)
        assert proc.returncode == -signal.SIGKILL, (n, proc.stderr)
        # no window where a file that is replaced does not exist
        assert (r / "a.txt").exists() and (r / "b.txt").exists(), n
        async with files_run(r):  # opening the root recovers
            pass
        tree = _tree(r)
        assert tree in (OLD, NEW), (n, tree)
        assert (base / f"b-other-name-{n}").read_text() == tree["b.txt"], n  # the other link sees the same
        assert leftovers(r) == [], n
        # nothing left in the state dir either
        assert not tether.atomic.state_dir(r, create=False).exists(), n
        outcomes.add("new" if tree == NEW else "old")
    assert outcomes == {"old", "new"}  # early kills roll back, late ones forward


# -- item 5: a full disk -----------------------------------------------------------------------------


async def test_a_full_disk_removes_the_partial_file_and_says_so_in_one_line(root, monkeypatch):
    (root / "a.txt").write_text("old\n")
    real_write = os.write

    def full(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(tether.atomic.NEW_SUFFIX):
            real_write(fd, bytes(data)[: len(data) // 2])  # part of it lands, then the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    async with files_run(root) as run:
        for tool, args in (
            ("write", {"path": "a.txt", "content": "new\n" * 1000}),
            ("write", {"path": "b.txt", "content": "new\n" * 1000}),
            ("apply_patch", {"patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n"}),
        ):
            result = await run.call(tool, args)
            assert result.is_error
            assert_model_error(result)
            assert "\n" not in result.plain, result.plain
            assert "No space left on device" in result.plain and "the disk is full" in result.plain
            assert result.data["errno"] == "ENOSPC"
    assert sorted(p.name for p in root.iterdir()) == ["a.txt"]  # nothing partial left, nothing created
    assert (root / "a.txt").read_text() == "old\n"


# -- item 6: hard links and the umask ----------------------------------------------------------------


async def test_every_writing_tool_keeps_hard_links(root, tmp_path):
    other = tmp_path / "other-name.txt"
    (root / "a.txt").write_text("one\n")
    os.link(root / "a.txt", other)
    async with files_run(root) as run:
        assert not (await run.call("write", {"path": "a.txt", "content": "two\n"})).is_error
        assert other.read_text() == "two\n"
        assert not (
            await run.call("edit", {"path": "a.txt", "old_string": "two", "new_string": "three"})
        ).is_error
        assert other.read_text() == "three\n"
        patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-three\n+four\n"
        assert not (await run.call("apply_patch", {"patch": patch})).is_error
    assert other.read_text() == "four\n" and os.stat(other).st_nlink == 2


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
async def test_new_files_get_the_umasks_mode_and_old_files_keep_theirs(root, umask):
    (root / "script.sh").write_text("echo\n")
    os.chmod(root / "script.sh", 0o751)
    old = os.umask(umask)
    try:
        async with files_run(root) as run:
            await run.call("write", {"path": "new.txt", "content": "x\n"})
            await run.call("apply_patch", {"patch": "--- /dev/null\n+++ b/p.txt\n@@ -0,0 +1 @@\n+x\n"})
            await run.call("write", {"path": "script.sh", "content": "echo hi\n"})
    finally:
        os.umask(old)
    assert oct((root / "new.txt").stat().st_mode & 0o777) == oct(0o666 & ~umask)
    assert oct((root / "p.txt").stat().st_mode & 0o777) == oct(0o666 & ~umask)
    assert oct((root / "script.sh").stat().st_mode & 0o777) == oct(0o751)


# -- durability: write_all fsyncs the files and their folder -------------------------------------------


def test_write_all_fsyncs_each_file_and_its_folder(root, monkeypatch):
    synced: list[str] = []
    real = os.fsync

    def spy(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    (root / "a.txt").write_text("a\n")
    tether.atomic.write_all({root / "a.txt": b"A\n", root / "n.txt": b"N\n"}, root=root)
    temps = [s for s in synced if s.endswith(tether.atomic.NEW_SUFFIX)]
    assert len(temps) == 2  # the new content of both files before any rename
    assert str(root) in synced  # the folder, after the renames
    assert (root / "a.txt").read_text() == "A\n" and (root / "n.txt").read_text() == "N\n"


def test_recovery_finishes_a_committed_journal_and_ignores_garbage(root):
    """Recovery works from the journal alone: a commit record whose renames never happened is finished."""
    (root / "a.txt").write_text("old\n")
    tmp = root / ".a.txt.0123456789ab.tether-new"
    tmp.write_text("new\n")
    folder = tether.atomic.state_dir(root)
    entry = {"kind": "replace", "target": str(root / "a.txt"), "tmp": str(tmp), "backup": None}
    (folder / "journal-0123456789ab.json").write_text(
        json.dumps({"id": "0123456789ab", "state": "commit", "entries": [entry]})
    )
    (folder / "journal-ffffffffffff.json").write_text("{not json")
    assert tether.atomic.recover(root) == ["finished an interrupted write of 1 file(s)"]
    assert (root / "a.txt").read_text() == "new\n" and leftovers(root) == []
    folder.mkdir()
    (folder / "journal-0123456789ab.json").write_text(
        json.dumps({"id": "0123456789ab", "state": "staging", "entries": [{**entry, "tmp": str(tmp)}]})
    )
    tmp.write_text("staged\n")
    # a later write (a long-lived run) recovers too
    tether.atomic.write_all({root / "b.txt": b"b\n"}, root=root)
    assert (root / "a.txt").read_text() == "new\n" and leftovers(root) == []
    assert not folder.exists()  # the journals done, the lock file and its folder are removed too
    assert tether.atomic.recover(root) == []  # nothing to do, and no state dir is made for it
    assert not folder.exists()


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KiB tmpfs as the root, where the system lets this user mount one."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if (
        shutil.which("mount") is None
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True, check=False
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here (the injected ENOSPC test covers the same path)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


async def test_a_really_full_disk_leaves_nothing_behind(small_disk):
    (small_disk / "a.txt").write_text("old\n")
    async with files_run(small_disk) as run:
        result = await run.call("write", {"path": "a.txt", "content": "x" * 400_000})
        assert result.is_error and "the disk is full" in result.plain and "\n" not in result.plain, (
            result.plain
        )
        again = await run.call("write", {"path": "b.txt", "content": "fits\n"})  # the space was given back
        assert not again.is_error, again.plain
    assert sorted(p.name for p in small_disk.iterdir()) == ["a.txt", "b.txt"]
    assert (small_disk / "a.txt").read_text() == "old\n"


def test_old_side_files_a_crash_left_beside_a_target_are_swept(root, monkeypatch):
    """Leftovers without a journal (an older tether's mkstemp names, a lost state dir): swept when old."""
    (root / "a.txt").write_text("a\n")
    left = [".a.txt.k2j4h5g6.tether-new", ".a.txt.tether-old", ".b.py.0123456789ab.tether-new"]
    for name in left:
        (root / name).write_text("partial")
    (root / ".keep.tether-new.txt").write_text("not ours")
    tether.atomic.write_all({root / "a.txt": b"A\n"}, root=root)
    # fresh: maybe another root's write in flight
    assert leftovers(root) == sorted([*left, ".keep.tether-new.txt"])
    monkeypatch.setattr(tether.atomic, "STALE_AFTER", -60.0)  # as if an hour had passed
    tether.atomic.write_all({root / "a.txt": b"AA\n"}, root=root)
    assert leftovers(root) == [".keep.tether-new.txt"] and (root / "a.txt").read_text() == "AA\n"


def test_two_long_names_with_the_same_beginning_are_written_together(root):
    long_a, long_b = "n" * 200 + "a.txt", "n" * 200 + "b.txt"
    tether.atomic.write_all({root / long_a: b"a\n", root / long_b: b"b\n"}, root=root)
    assert (
        (root / long_a).read_text() == "a\n"
        and (root / long_b).read_text() == "b\n"
        and leftovers(root) == []
    )
