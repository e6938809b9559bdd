"""A folder of several languages searched without `language`, as the ast-grep CLI searches it: each file as
the language of its extension, every language the pattern parses in. On cJSON's tests/ (C, Ruby, Python,
YAML and JSON files), against the CLI run with no `-l`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import real_projects
import tether

# patterns of one language, of two, of three; each answer compared by exact byte ranges
PATTERNS = [
    "$A == $B",  # C, Ruby and Python
    "$A += $B",
    "def $F($$$A)",  # Ruby and Python (a Python header without its body, read through error recovery)
    "puts $A",  # Ruby; Python refuses it
    "return $A;",  # C; Ruby and Python refuse it
    "import $A",  # Python
    "TEST_ASSERT_EQUAL($A, $B)",  # C
    "$S.split($A)",  # Ruby and Python
]


@pytest.fixture(scope="module")
def cjson_tests(tmp_path_factory) -> Path:
    """cJSON 1.7.15's tests/ (91 C files, 16 Ruby, 2 Python, 17 YAML, 4 JSON), Debian's upstream tarball."""
    if not shutil.which("apt-get"):
        from support import IN_CI

        (pytest.fail if IN_CI else pytest.skip)("cJSON's source comes from Debian (apt-get source)")
    archive = real_projects.debian_source("cjson", "cjson_1.7.15.orig.tar.gz", real_projects.CJSON_SHA256)
    root = tmp_path_factory.mktemp("cjson")
    shutil.copytree(real_projects.unpacked(archive, "cJSON-1.7.15") / "tests", root / "tests")
    return root


def _cli(sg: str, root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sg, "run", *args, "tests"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
    )


def _theirs(sg: str, root: Path, pattern: str, *args: str) -> set[tuple[str, int, int]]:
    done = _cli(sg, root, "-p", pattern, "--json=stream", *args)
    assert done.returncode in (0, 1), done.stderr
    found = set()
    for line in done.stdout.splitlines():
        m = json.loads(line)
        # ast-grep 0.51 also reads .md files as Markdown, which is no language of tether's
        if m["language"] != "Markdown":
            found.add((m["file"], m["range"]["byteOffset"]["start"], m["range"]["byteOffset"]["end"]))
    return found


def _ours(data: dict) -> set[tuple[str, int, int]]:
    return {(m["file"], *m["byte_range"]) for m in data["matches"]}


@pytest.fixture(scope="module")
def run(cjson_tests):
    with tether.open_run_sync(cjson_tests, options={"max_output_chars": 10_000_000}) as r:
        yield r


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_mixed_folder_is_searched_in_every_language_the_pattern_parses_in(
    pattern, sg_binary, cjson_tests, run
):
    theirs = _theirs(sg_binary, cjson_tests, pattern)
    result = run.call("ast_grep", {"pattern": pattern, "path": "tests", "max_results": 1000})
    assert not result.is_error, result.plain
    assert result.data["total"] == len(theirs) and _ours(result.data) == theirs, result.plain.splitlines()[0]
    assert theirs, "ast-grep found nothing: the case is vacuous"


def test_the_answer_says_which_languages_were_searched_and_which_refused(run):
    result = run.call("ast_grep", {"pattern": "puts $A", "path": "tests"})
    head = result.plain.splitlines()[0]
    assert "each as the language of its extension: ruby: 52 matches in 16 files, c: 0 in 91," in head, head
    assert "not searched, as the pattern does not parse as python (2 files)" in head, head
    assert result.data["not_searched"] == {"python": 2}
    assert "does not parse as python code" in result.data["refused"]["python"]
    assert {"c", "ruby", "yaml", "json"} <= set(result.data["languages"]), result.data["languages"]


def test_language_narrows_a_mixed_folder_to_one(sg_binary, cjson_tests, run):
    theirs = _theirs(sg_binary, cjson_tests, "$A == $B", "-l", "ruby")
    result = run.call(
        "ast_grep", {"pattern": "$A == $B", "path": "tests", "language": "ruby", "max_results": 1000}
    )
    assert result.data["languages"] == {"ruby": 16} and "not_searched" not in result.plain
    assert _ours(result.data) == theirs and all(f.endswith(".rb") for f, *_ in theirs)


def test_a_pattern_no_language_parses_is_refused_with_each_reason(tmp_path):
    (tmp_path / "a.c").write_text("int main(void) { return 0; }\n")
    (tmp_path / "b.py").write_text("print(1)\n")
    with tether.open_run_sync(tmp_path) as r:
        result = r.call("ast_grep", {"pattern": ")("})
    assert result.is_error and "\n" not in result.plain, result.plain
    assert "parses in none of the languages of the files under '.'" in result.plain
    assert "as c (1 file): the pattern ')(' does not parse as c code" in result.plain
    assert "as python (1 file): the pattern ')(' does not parse as python code" in result.plain
    assert result.data["refused"].keys() == {"c", "python"}


def test_a_rewrite_of_a_mixed_folder_is_ast_greps(sg_binary, cjson_tests, tmp_path):
    """ast_edit infers each file's language too: the same files, byte for byte, as `ast-grep run -U`."""
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    shutil.copytree(cjson_tests, theirs)
    shutil.copytree(cjson_tests, ours)
    done = _cli(sg_binary, theirs, "-p", "$S.split($A)", "-r", "split_of($S, $A)", "-U")
    assert done.returncode == 0, done.stderr
    with tether.open_run_sync(ours) as r:
        staged = r.call(
            "ast_edit", {"pattern": "$S.split($A)", "rewrite": "split_of($S, $A)", "path": "tests"}
        )
        assert not staged.is_error, staged.plain
        said = staged.plain.splitlines()[1]
        assert "searched as c (91 files), ruby (16 files), python (2 files)" in said, said
        # YAML reads the pattern as a plain scalar, which captures no $S or $A
        assert (
            "not rewritten, as the pattern captures no metavariable of the rewrite there: yaml (17 files)"
            in said
        )
        # one staged change over every language, in the core's staging, previewed as any staged change
        (change,) = r.staging.changes.values()
        assert change.by == "ast_edit" and change.edit_id == staged.data["edit_id"]
        assert sorted(r.relpath(p) for p in change.changes) == sorted(staged.data["files"])
        assert {u["file"] for u in staged.data["preview"]["unchecked"]} == set(staged.data["files"])
        accepted = r.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
        assert not accepted.is_error, accepted.plain
    changed = sorted(staged.data["files"])
    assert {Path(f).suffix for f in changed} == {".py", ".rb"}, changed
    for rel in (p.relative_to(theirs) for p in theirs.rglob("*") if p.is_file()):
        assert (ours / rel).read_bytes() == (theirs / rel).read_bytes(), rel
