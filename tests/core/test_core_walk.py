"""The project walker chooses the files git (and ast-grep) would: checked against `git check-ignore`
and the ast-grep CLI, on both of its paths (git ls-files, the ignore crate)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
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
    crate = walk(root)
    assert crate.via == "ignore" and names(root, crate) == expected
    # a.log, other.log, local.py, build/, x.tmp, y.tmp, excluded.py; hidden: .git/, .gitignore, sub/.gitignore
    assert fast.ignored == crate.ignored == 10


def test_a_sub_folder_start_still_obeys_the_rules_above_it(tmp_path, git_home, monkeypatch):
    root = project(tmp_path / "p")
    expected = {p for p in git_keeps(root) if p.startswith("sub/")}
    assert names(root, walk(root, root / "sub")) == expected == {"sub/keep.log", "sub/b.py"}
    monkeypatch.setattr(tether.walk, "_git_files", lambda start: None)
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
