"""The project walker chooses the files git (and ast-grep) would: checked against `git check-ignore`
and the ast-grep CLI, on both of its paths (git ls-files, the ignore crate)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import tether.walk
from tether.walk import walk

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def git_home(tmp_path, monkeypatch):
    """A HOME of this test's own, whose git config names a global excludes file."""
    home = tmp_path / "home"
    home.mkdir()
    excludes = home / "global-excludes"
    excludes.write_text("*.tmp\n")
    (home / ".gitconfig").write_text(
        f"[core]\n\texcludesFile = {excludes}\n[user]\n\tname = t\n\temail = t@example.com\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return home


def put(root: Path, rel: str, text: str = "print(1)\n") -> None:
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(text)


def project(root: Path) -> Path:
    """The three cases: a sub-folder .gitignore re-including with `!`, .git/info/exclude, global excludes."""
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    put(root, ".gitignore", "*.log\nbuild/\n")
    put(root, "sub/.gitignore", "!keep.log\nlocal.py\n")
    for rel in (
        "a.py",
        "a.log",
        "sub/keep.log",
        "sub/other.log",
        "sub/local.py",
        "sub/b.py",
        "build/out.py",
        "x.tmp",
        "sub/y.tmp",
        "excluded.py",
        "deep/er/c.py",
    ):
        put(root, rel)
    (root / ".git" / "info" / "exclude").write_text("excluded.py\n")
    subprocess.run(["git", "add", "a.py", "sub/b.py"], cwd=root, check=True)
    return root


def git_keeps(root: Path) -> set[str]:
    """Every file under the root (hidden ones aside) that `git check-ignore` does not ignore."""
    files = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )
    proc = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=root,
        input="\n".join(files),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return set(files) - set(proc.stdout.split())


def names(root: Path, found) -> set[str]:
    return {os.path.relpath(f.path, root) for f in found.files}


def test_both_paths_keep_what_git_keeps(tmp_path, git_home, monkeypatch):
    root = project(tmp_path / "p")
    expected = git_keeps(root)
    assert expected == {"a.py", "sub/keep.log", "sub/b.py", "deep/er/c.py"}  # the three cases do bite
    fast = walk(root)
    assert fast.via == "git" and names(root, fast) == expected
    monkeypatch.setattr(tether.walk, "_git_files", lambda start: None)
    tether.walk.clear_cache()  # else a listing older than the racy window is reused: git's, not the crate's
    crate = walk(root)
    assert crate.via == "ignore" and names(root, crate) == expected
    # a.log, other.log, local.py, build/, x.tmp, y.tmp, excluded.py; hidden: .git/, .gitignore, sub/.gitignore
    assert fast.ignored == crate.ignored == 10


def test_a_sub_folder_start_still_obeys_the_rules_above_it(tmp_path, git_home, monkeypatch):
    root = project(tmp_path / "p")
    expected = {p for p in git_keeps(root) if p.startswith("sub/")}
    assert names(root, walk(root, root / "sub")) == expected == {"sub/keep.log", "sub/b.py"}
    monkeypatch.setattr(tether.walk, "_git_files", lambda start: None)
    tether.walk.clear_cache()  # else a listing older than the racy window is reused: git's, not the crate's
    assert names(root, walk(root, root / "sub")) == expected


def _sg() -> str:
    beside = Path(sys.executable).parent / "ast-grep"
    return (
        str(beside)
        if beside.exists()
        else (shutil.which("ast-grep") or pytest.skip("ast-grep CLI not installed"))
    )


def test_an_ignore_file_is_honoured_as_ast_grep_honours_it(tmp_path, git_home):
    root = project(tmp_path / "p")
    put(root, ".ignore", "deep/\n")
    put(root, "sub/.ignore", "b.py\n")
    proc = subprocess.run(
        [_sg(), "run", "-p", "print($A)", "-l", "python", "--json=stream", "."],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    sg_files = {json.loads(line)["file"] for line in proc.stdout.splitlines() if line.strip()}
    found = walk(root, wanted=lambda name: name.endswith(".py"))
    assert found.via == "ignore"  # git does not know .ignore: the crate decides
    assert names(root, found) == sg_files == {"a.py"}


def test_outside_git_the_gitignore_rules_still_apply_and_vendored_folders_are_skipped(tmp_path, git_home):
    root = tmp_path / "plain"
    root.mkdir()
    put(root, ".gitignore", "gen/\n")
    for rel in (
        "a.py",
        "gen/g.py",
        "node_modules/m/i.py",
        "env/lib/s.py",
        ".hidden/h.py",
        "__pycache__/c.py",
    ):
        put(root, rel)
    put(root, "env/pyvenv.cfg", "home = /usr\n")
    (root / "empty").mkdir()
    found = walk(root)
    assert found.via == "ignore" and names(root, found) == {"a.py"}
    assert (
        found.ignored == 6
    )  # gen/, node_modules/, env/, .hidden/, __pycache__/, .gitignore; not the empty folder


# -- the walk cache: a repeat walk of an unchanged tree reuses the listing, and never misses a change ---


@pytest.fixture(autouse=True)
def _fresh_cache():
    tether.walk.clear_cache()
    yield
    tether.walk.clear_cache()


def age(top: Path, seconds: float = 60.0) -> None:
    """Every file and folder under ``top`` (``.git`` too) as if written ``seconds`` ago: older than the
    cache's racy window, so the next listing may be reused, and any later change moves a stamp. Their
    ctimes (which nothing can set back) are waited for: one tick of the clock."""
    stamp_all(top, time.time_ns() - int(seconds * 1e9))
    wait_for_ctimes(top)


def stamp_all(top: Path, ns: int) -> None:
    for path in [top, *top.rglob("*")]:
        os.utime(path, ns=(ns, ns), follow_symlinks=False)


def wait_for_ctimes(top: Path) -> None:
    """Until every ctime under ``top`` is older than the racy window (ctimes cannot be set back)."""
    settled = max(p.lstat().st_ctime_ns for p in [top, *top.rglob("*")]) + tether.walk.RACY_NS
    while time.time_ns() <= settled:
        time.sleep(0.01)


@pytest.fixture
def listings(monkeypatch):
    """How many times the walker listed a folder afresh (ran git or the ignore crate and stat-ed its folders)."""
    calls = []
    real = tether.walk._list

    def counted(root, start):
        calls.append(start)
        return real(root, start)

    monkeypatch.setattr(tether.walk, "_list", counted)
    return calls


def entries(found) -> list[tuple]:
    return [(f.path, f.size, f.mtime_ns, f.inode) for f in found.files] + [
        ("ignored", found.ignored, found.via)
    ]


def fresh(root: Path, start: Path | None = None) -> list[tuple]:
    tether.walk.clear_cache()
    return entries(walk(root, start))


def tree(tmp_path: Path, kind: str) -> Path:
    """`project`, plus a folder holding only ignored files (one level down too) and an empty folder; as a
    git work tree ("git") or a plain folder ("plain", the ignore crate's path)."""
    root = project(tmp_path / "p")
    put(root, "logs/only.log")
    put(root, "logs/deeper/only.log")
    (root / "empty").mkdir()
    if kind == "plain":
        shutil.rmtree(root / ".git")
    age(tmp_path)
    return root


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


# (name, change, the walks it is tried in: "git" (a work tree), "plain" (a folder outside git))
CHANGES = [
    ("add a file", lambda r, h: put(r, "new.py"), "git plain"),
    ("add a file two folders down", lambda r, h: put(r, "deep/er/new.py"), "git plain"),
    ("add a file in an empty folder", lambda r, h: put(r, "empty/new.py"), "git plain"),
    ("add a file beside ignored ones only", lambda r, h: put(r, "logs/new.py"), "git plain"),
    ("add a file below ignored ones only", lambda r, h: put(r, "logs/deeper/new.py"), "git plain"),
    ("add a folder with a file", lambda r, h: put(r, "fresh/dir/new.py"), "git plain"),
    ("remove a file", lambda r, h: (r / "deep/er/c.py").unlink(), "git plain"),
    ("remove a tracked file", lambda r, h: (r / "a.py").unlink(), "git plain"),
    ("rename a file", lambda r, h: (r / "sub/b.py").rename(r / "sub/c.py"), "git plain"),
    ("rename a folder", lambda r, h: (r / "deep").rename(r / "peed"), "git plain"),
    (
        "a file replaced by a symlink",
        lambda r, h: ((r / "a.py").unlink(), (r / "a.py").symlink_to("sub/b.py")),
        "git plain",
    ),
    ("edit the .gitignore", lambda r, h: put(r, ".gitignore", "*.log\n"), "git plain"),
    ("edit a sub-folder's .gitignore", lambda r, h: put(r, "sub/.gitignore", "!keep.log\n"), "git plain"),
    ("add a .gitignore", lambda r, h: put(r, "deep/.gitignore", "er/\n"), "git plain"),
    ("add an .ignore file", lambda r, h: put(r, "sub/.ignore", "b.py\n"), "git plain"),
    ("edit .git/info/exclude", lambda r, h: (r / ".git/info/exclude").write_text(""), "git"),
    ("edit the global excludes file", lambda r, h: (h / "global-excludes").write_text(""), "git plain"),
    (
        "name another global excludes file",
        lambda r, h: (h / ".gitconfig").write_text("[core]\n"),
        "git plain",
    ),
    ("git add -f an ignored file", lambda r, h: git(r, "add", "-f", "a.log"), "git"),
    ("git init in a plain folder", lambda r, h: git(r, "init", "-q"), "plain"),
    ("a folder becomes a venv", lambda r, h: put(r, "sub/pyvenv.cfg", "home = /usr\n"), "git plain"),
    ("a file grows", lambda r, h: put(r, "a.py", "print(1)\nprint(2)\n"), "git plain"),
    ("an ignored folder empties", lambda r, h: shutil.rmtree(r / "build"), "git plain"),
]


@pytest.mark.parametrize(
    ("kind", "change"),
    [(kind, c) for name, c, kinds in CHANGES for kind in kinds.split()],
    ids=[f"{name}-{kind}" for name, c, kinds in CHANGES for kind in kinds.split()],
)
def test_the_next_walk_after_a_change_is_a_fresh_walk(tmp_path, git_home, listings, kind, change):
    root = tree(tmp_path, kind)
    before = entries(walk(root))
    assert entries(walk(root)) == before and len(listings) == 1  # the repeat reused the listing
    change(root, git_home)
    after = entries(walk(root))
    assert after == fresh(root)
    assert after != before  # the change does show


@pytest.mark.parametrize("kind", ["git", "plain"])
def test_a_sub_folder_walk_sees_a_change_above_it(tmp_path, git_home, listings, kind):
    root = tree(tmp_path, kind)
    before = entries(walk(root, root / "sub"))
    assert entries(walk(root, root / "sub")) == before and len(listings) == 1
    put(root, ".gitignore", "build/\n")  # sub/other.log is no longer ignored
    after = entries(walk(root, root / "sub"))
    assert after == fresh(root, root / "sub") != before


def test_a_tree_written_just_now_is_listed_again(tmp_path, git_home, listings):
    """A folder changed within one tick of the file system's clock before the listing may change again
    within the same tick without its stamp moving: its listing is not reused."""
    root = project(tmp_path / "p")
    stamp_all(tmp_path, time.time_ns() + 7)  # in nanoseconds, and as if made during the listing
    walk(root)
    walk(root)
    assert len(listings) == 2
    stamp_all(tmp_path, time.time_ns() - tether.walk.RACY_NS * 5 + 7)  # older than a tick: reused
    wait_for_ctimes(tmp_path)
    walk(root)
    walk(root)
    assert len(listings) == 3


def test_a_tree_whose_mtimes_were_put_back_just_now_is_listed_again(
    tmp_path, git_home, listings, monkeypatch
):
    """`rsync -a`, `cp -rp` and `tar x` put the old mtimes back after writing: only the ctimes say the tree
    changed just now, and a second such change within the same tick would leave every stamp as it was."""
    root = project(tmp_path / "p")
    stamp_all(tmp_path, time.time_ns() - 3600 * 10**9)  # an hour ago; the ctimes are now
    newest = max(p.lstat().st_ctime_ns for p in [tmp_path, *tmp_path.rglob("*")])
    clock = types.SimpleNamespace(time_ns=lambda: newest + 10**6)  # the listing begins a millisecond later
    monkeypatch.setattr(tether.walk, "time", clock)
    walk(root)
    walk(root)
    assert len(listings) == 2
    clock.time_ns = lambda: newest + 5 * tether.walk.RACY_NS  # older than a tick: reused
    walk(root)
    walk(root)
    assert len(listings) == 3


def test_whole_second_stamps_are_trusted_only_two_seconds_later(tmp_path, git_home, listings, monkeypatch):
    """A file system that stamps in whole seconds (FAT, ext3) ticks once a second or two."""
    root = project(tmp_path / "p")
    # a whole second, 10 s ahead: the ctimes the test's changes make (now) are older than a tick by then
    began = (time.time_ns() // 10**9 + 10) * 10**9
    monkeypatch.setattr(
        tether.walk, "time", types.SimpleNamespace(time_ns=lambda: began)
    )  # when listings begin
    stamp_all(tmp_path, began - 10**9)  # a second before: older than a tick of a nanosecond clock
    walk(root)
    walk(root)
    assert len(listings) == 2
    stamp_all(tmp_path, began - tether.walk.COARSE_RACY_NS - 10**9)
    walk(root)
    walk(root)
    assert len(listings) == 3


def test_the_cache_is_bounded(tmp_path, git_home, listings, monkeypatch):
    root = tree(tmp_path, "git")
    monkeypatch.setattr(tether.walk, "CACHE_WALKS", 2)
    for start in ("sub", "deep", "logs", "sub"):  # sub is the oldest when logs comes: dropped
        walk(root, root / start)
    assert [os.path.basename(s) for s in listings] == ["sub", "deep", "logs", "sub"]
    assert len(tether.walk._cache._data) == 2
    monkeypatch.setattr(tether.walk, "CACHE_PATHS", 3)  # a listing of more files than that is not kept
    walk(root)
    walk(root)
    assert len(listings) == 6 and len(tether.walk._cache._data) == 2


def test_a_work_tree_made_above_the_start_folder_is_seen(tmp_path, git_home, listings):
    root = tree(tmp_path, "plain")
    before = entries(walk(root, root / "sub"))
    assert before[-1][2] == "ignore" and len(listings) == 1
    git(root, "init", "-q")  # sub itself does not change
    after = entries(walk(root, root / "sub"))
    assert after == fresh(root, root / "sub") and after[-1][2] == "git"


def test_a_nested_venv_that_stops_being_one_is_seen(tmp_path, git_home, listings):
    """A venv inside a folder git lists no file from is left out for its content (pyvenv.cfg): its own
    stamp is kept, so removing that file (which changes it) is seen."""
    root = tmp_path / "p"
    put(root, "a.py")
    git(root, "init", "-q")
    git(root, "add", "a.py")
    git(root, "commit", "-qm", "a")
    put(root, "tools/env/pyvenv.cfg", "home = /usr\n")
    put(root, "tools/env/x.py")
    age(tmp_path)
    before = entries(walk(root))
    assert entries(walk(root)) == before and len(listings) == 1
    (root / "tools/env/pyvenv.cfg").unlink()
    after = entries(walk(root))
    assert after == fresh(root) != before
    assert names(root, walk(root)) == git_keeps(root) == {"a.py", "tools/env/x.py"}


INCLUDES = [
    ("an included file names another excludes file", "include.path", True),
    ("an included file is created", "include.path", False),
    ("a conditionally included file names another", "includeIf.gitdir:{root}/.path", True),
]


@pytest.mark.parametrize(("key", "made"), [(k, m) for _, k, m in INCLUDES], ids=[n for n, _, _ in INCLUDES])
def test_a_change_in_a_config_file_git_includes_is_seen(tmp_path, git_home, listings, key, made):
    root = tmp_path / "p"
    put(root, "a.py")
    put(root, "b.log")
    git(root, "init", "-q")
    git(root, "add", "a.py")
    (git_home / "ex1").write_text("*.log\n")
    (git_home / "ex2").write_text("*.tmp\n")
    included = root / ".git" / "inc.cfg"  # a relative include.path is relative to the including file
    git(root, "config", key.format(root=root), "inc.cfg")
    (git_home / ".gitconfig").write_text("[core]\n\texcludesFile = " + str(git_home / "ex1") + "\n")
    if made:
        included.write_text(f"[core]\n\texcludesFile = {git_home / 'ex1'}\n")
    age(tmp_path)
    before = entries(walk(root))
    assert entries(walk(root)) == before and len(listings) == 1
    assert names(root, walk(root)) == {"a.py"}
    included.write_text(f"[core]\n\texcludesFile = {git_home / 'ex2'}\n")
    after = entries(walk(root))
    assert after == fresh(root) != before
    assert names(root, walk(root)) == git_keeps(root) == {"a.py", "b.log"}


def test_a_git_file_pointed_at_another_git_folder_is_seen(tmp_path, git_home, listings):
    """A ``.git`` file names git's folder (a submodule's, a separate git dir's); rewritten (``git worktree
    repair``, ``git submodule absorbgitdirs``, by hand) it names another index, excludes and config."""
    root = tmp_path / "p"
    git(tmp_path, "init", "-q", f"--separate-git-dir={tmp_path / 'g1'}", str(root))
    git(tmp_path, "init", "-q", f"--separate-git-dir={tmp_path / 'g2'}", str(tmp_path / "other"))
    put(root, "a.py")
    put(root, "x.py")
    (tmp_path / "g1" / "info" / "exclude").write_text("x.py\n")
    age(tmp_path)
    before = entries(walk(root))
    assert entries(walk(root)) == before and len(listings) == 1
    assert names(root, walk(root)) == {"a.py"}
    (root / ".git").write_text(f"gitdir: {tmp_path / 'g2'}\n")
    after = entries(walk(root))
    assert after == fresh(root) != before
    assert names(root, walk(root)) == git_keeps(root) == {"a.py", "x.py"}


@pytest.mark.parametrize("switch", ["git switch", "git symbolic-ref"])
@pytest.mark.parametrize("where", ["main", "linked"])
def test_a_branch_switch_that_changes_which_excludes_file_applies_is_seen(
    tmp_path, git_home, listings, switch, where
):
    """An ``includeIf "onbranch:..."`` include follows the branch HEAD names (in a linked worktree, its own
    HEAD). Between branches of the same tree a switch may rewrite HEAD alone (symbolic-ref does)."""
    root = tmp_path / "p"
    put(root, "a.py")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "a.py")
    git(root, "commit", "-qm", "a")
    git(root, "branch", "other")
    (git_home / "ex1").write_text("*.log\n")
    (git_home / "ex2").write_text("*.tmp\n")
    (git_home / ".gitconfig").write_text(f"[core]\n\texcludesFile = {git_home / 'ex1'}\n")
    git(root, "config", "includeIf.onbranch:other.path", "other.cfg")  # beside the repository's config
    (root / ".git" / "other.cfg").write_text(f"[core]\n\texcludesFile = {git_home / 'ex2'}\n")
    top = root
    if where == "linked":
        top = tmp_path / "wt"
        git(root, "worktree", "add", "-q", "-b", "side", str(top))
    put(top, "b.log")
    age(tmp_path)
    before = entries(walk(top))
    assert entries(walk(top)) == before and len(listings) == 1
    assert names(top, walk(top)) == {"a.py"}
    if switch == "git switch":
        git(top, "switch", "-q", "other")
    else:
        git(top, "symbolic-ref", "HEAD", "refs/heads/other")
    after = entries(walk(top))
    assert after == fresh(top) != before
    assert names(top, walk(top)) == git_keeps(top) == {"a.py", "b.log"}


@pytest.mark.parametrize("kind", ["git", "plain"])
@pytest.mark.parametrize("linked", ["root", "start"])
def test_a_symlinked_folder_is_watched_where_it_really_is(tmp_path, git_home, listings, kind, linked):
    root = tree(tmp_path, kind)
    link = tmp_path / "link"
    if linked == "root":
        link.symlink_to(root)
        top, start, real = link, link, root
    else:
        (root / "sub" / "inner").mkdir()
        put(root, "sub/inner/i.py")
        (root / "in").symlink_to("sub/inner")
        age(tmp_path)
        top, start, real = root, root / "in", root / "sub" / "inner"
    before = entries(walk(top, start))
    assert entries(walk(top, start)) == before and len(listings) == 1
    put(real, "new.py")
    after = entries(walk(top, start))
    assert after == fresh(top, start) != before
    assert os.path.join(start, "new.py") in {f[0] for f in after}  # named as asked for, not resolved


class _ClearedMeanwhile(dict):
    """A memo that another walk's thread clears right after this one saw a key in it."""

    def __contains__(self, key):
        found = super().__contains__(key)
        self.clear()
        return found


@pytest.mark.parametrize("memo", ["_excludes", "_not_ignored"])
def test_a_git_answer_forgotten_by_another_thread_meanwhile_is_asked_again(
    tmp_path, git_home, listings, monkeypatch, memo
):
    root = tree(tmp_path, "git")
    expected = fresh(root)
    assert getattr(tether.walk, memo)  # the answer is remembered
    monkeypatch.setattr(tether.walk, memo, _ClearedMeanwhile(getattr(tether.walk, memo)))
    tether.walk._cache.clear()  # the listing is made again, with the remembered answers
    assert entries(walk(root)) == expected


def test_a_whole_second_stamp_among_nanosecond_ones_waits_two_seconds(
    tmp_path, git_home, listings, monkeypatch
):
    """The racy window is chosen per stamp: a file copied with its date kept, or on a second mount with
    a coarser clock, stamps whole seconds while the rest of the tree stamps nanoseconds."""
    root = project(tmp_path / "p")
    # a whole second, 10 s ahead: the ctimes the test's changes make (now) are older than a tick by then
    began = (time.time_ns() // 10**9 + 10) * 10**9
    monkeypatch.setattr(tether.walk, "time", types.SimpleNamespace(time_ns=lambda: began))
    stamp_all(tmp_path, began - tether.walk.COARSE_RACY_NS * 3 + 7)  # nanoseconds, long ago
    os.utime(root / "sub", ns=(began - 10**9, began - 10**9))  # a whole second, one second before
    walk(root)
    walk(root)
    assert len(listings) == 2
    os.utime(root / "sub", ns=(began - 3 * 10**9, began - 3 * 10**9))
    walk(root)
    walk(root)
    assert len(listings) == 3


@pytest.mark.parametrize("kind", ["git", "plain"])
def test_an_excludes_file_named_from_home_is_watched(tmp_path, git_home, listings, kind):
    """git expands ``~/`` in ``core.excludesFile``; the walker stamps the file it names."""
    root = tree(tmp_path, kind)
    (git_home / ".gitconfig").write_text("[core]\n\texcludesFile = ~/global-excludes\n")
    age(tmp_path)
    before = entries(walk(root))
    assert entries(walk(root)) == before and len(listings) == 1
    (git_home / "global-excludes").write_text("")  # x.tmp and sub/y.tmp are no longer ignored
    after = entries(walk(root))
    assert after == fresh(root) != before
