"""Diagnostics on write against the command-line checker as the oracle, on real projects: edits chosen
from the source (a required parameter added to a function other files call, a wrong return annotation),
each made and reverted twice.

What an edit introduced is, by the oracle, what the checker says of the edited tree and did not say of
the pristine one (position-free keys, with multiplicity); a revert introduces nothing, whatever the edit
hid meanwhile (a diagnostic that was there before the run's first write is never "introduced"). An
answer that says it is incomplete may hold less, never more.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import real_projects
import tether
import tether.files
from support import edit, require_binary

SEVERITIES = {"error", "warning"}
HEDGES = ("incomplete", "pending", "not compared")
Key = tuple[str, ...]


def python_oracle(root: Path) -> Counter[Key]:
    """basedpyright's command line on the tree: (file, severity, rule, message) of its errors and warnings."""
    cli = Path(sys.executable).with_name("basedpyright")
    proc = subprocess.run([str(cli), "--outputjson"], cwd=root, capture_output=True, text=True, timeout=600)
    found = json.loads(proc.stdout)["generalDiagnostics"]
    return Counter(
        (Path(d["file"]).relative_to(root).as_posix(), d["severity"], d.get("rule", ""), d["message"])
        for d in found
        if d["severity"] in SEVERITIES
    )


def go_oracle(root: Path) -> Counter[Key]:
    """gopls's command line (`gopls check`, gopls's own analysis) on every file: (file, message)."""
    files = sorted(p.name for p in root.glob("*.go"))
    proc = subprocess.run(["gopls", "check", *files], cwd=root, capture_output=True, text=True, timeout=600)
    out: Counter[Key] = Counter()
    for line in proc.stdout.splitlines():
        m = re.match(r"(.+?):\d+:\d+(?:-\d+)?: (.*)", line)
        if m:
            out[(Path(m[1]).resolve().relative_to(root.resolve()).as_posix(), m[2])] += 1
    return out


def said(r, go: bool) -> Counter[Key]:
    """What a write's answer says it introduced, keyed as its oracle keys."""
    out: Counter[Key] = Counter()
    for d in (r.data or {}).get("diagnostics", []):
        if d["severity"] in SEVERITIES:
            # gopls check prints a message's first line only (not its "have ... want ..." lines)
            first = d["message"].splitlines()[0]
            out[(d["file"], first) if go else (d["file"], d["severity"], d["code"] or "", d["message"])] += 1
    return out


def sources(root: Path, include: str) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.glob(include))}


def code(text: str, comment: str) -> str:
    """The lines of ``text`` that are not comments (a name in a comment is not a call)."""
    if comment == "//":
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(comment))


def python_edits(files: dict[str, str]) -> list[tuple[str, str, str]]:
    """(file, old, new): a required parameter added to the first module-level function another file calls,
    and the first module-level `-> str` annotation made `-> int`."""
    edits = []
    for rel, text in files.items():
        for name in re.findall(r"^def ([a-z]\w*)\(", text, re.M):
            if text.count(f"\ndef {name}(") == 1 and any(
                re.search(rf"\b{name}\(", code(other, "#")) for o, other in files.items() if o != rel
            ):
                edits.append((rel, f"\ndef {name}(", f"\ndef {name}(added: int, "))
                break
        if edits:
            break
    wrong = {"str": "int", "bytes": "int", "bool": "str", "int": "str"}
    for rel, text in files.items():
        for m in re.finditer(r"^ *def (\w+)\(.*\) -> (str|bytes|bool|int):$", text, re.M):
            if text.count(m[0]) == 1 and f"def {m[1]}(" not in edits[0][1]:
                edits.append((rel, m[0], m[0].replace(f") -> {m[2]}:", f") -> {wrong[m[2]]}:")))
                break
        if len(edits) == 2:
            break
    assert len(edits) == 2, edits
    return edits


def go_edits(files: dict[str, str]) -> list[tuple[str, str, str]]:
    """The same for Go: a parameter added to the first plain function another file calls; `string` as `int`."""
    edits = []
    for rel, text in files.items():
        if rel.endswith("_test.go"):
            continue
        for name in re.findall(r"^func ([A-Za-z]\w*)\(", text, re.M):
            if text.count(f"\nfunc {name}(") == 1 and any(  # a call of the function, not of a method
                re.search(rf"(?<![.\w]){name}\(", code(other, "//")) for o, other in files.items() if o != rel
            ):
                edits.append((rel, f"\nfunc {name}(", f"\nfunc {name}(added int, "))
                break
        if edits:
            break
    for rel, text in files.items():
        m = re.search(r"^func (\w+)\([^)]*\) string \{$", text, re.M)
        if (
            m
            and not rel.endswith("_test.go")
            and text.count(m[0]) == 1
            and f"func {m[1]}(" not in edits[0][1]
        ):
            edits.append((rel, m[0], m[0].replace(") string {", ") int {")))
            break
    assert len(edits) == 2, edits
    return edits


def check(got: Counter[Key], plain: str, expected: Counter[Key], what: str) -> None:
    if any(h in plain for h in HEDGES):
        assert not got - expected, f"{what}: claimed beyond the oracle: {got - expected}\n{plain}"
    else:
        assert got == expected, f"{what}: said {got - expected} more, {expected - got} fewer\n{plain}"


def _oracle_of(oracle, root: Path, state: Path, rel: str | None, old: str, new: str) -> Counter[Key]:
    shutil.copytree(root, state, symlinks=True)
    if rel is not None:
        (state / rel).write_text((state / rel).read_text().replace(old, new, 1))
    return oracle(state)


async def loop(root: Path, edits, oracle, go: bool, scratch: Path) -> int:
    """Each edit made and reverted twice in one run, the oracle run meanwhile on copies of each state;
    the number of writes checked."""
    from concurrent.futures import ThreadPoolExecutor

    states = [(None, "", ""), *edits]
    with ThreadPoolExecutor(len(states)) as pool:
        futures = [
            pool.submit(_oracle_of, oracle, root, scratch / f"state{i}", *state)
            for i, state in enumerate(states)
        ]
        answers = []
        async with tether.open_run(root, plugins=[tether.files], options={"diagnostics_timeout": 120}) as run:
            for cycle in range(2):
                for i, (rel, old, new) in enumerate(edits, 1):
                    r = await edit(run, rel, old, new)
                    answers.append((i, said(r, go), r.plain, f"cycle {cycle}, edit {new!r} in {rel}"))
                    r = await edit(run, rel, new, old)
                    answers.append((0, said(r, go), r.plain, f"cycle {cycle}, revert of {new!r} in {rel}"))
        found = [f.result() for f in futures]
    for i, got, plain, what in answers:
        expected = found[i] - found[0]  # a revert (0): nothing
        assert i == 0 or expected, f"the oracle finds nothing new for {what}"
        check(got, plain, expected, what)
    return len(answers)


# once skipped and expected to fail (the first write of a fresh run reported errors there before it): the
# registry's first-seen rule closed that; it passes at load 5 and at load 20 on 2 cores (3 min there)
@pytest.mark.timeout(900)
async def test_click_edits_and_reverts_match_basedpyrights_command_line(click_root, tmp_path):
    files = sources(click_root, "src/click/*.py")
    assert await loop(click_root, python_edits(files), python_oracle, False, tmp_path) == 8


@pytest.mark.timeout(900)
async def test_itsdangerous_edits_and_reverts_match_basedpyrights_command_line(tmp_path):
    root = Path(shutil.copytree(real_projects.itsdangerous_pristine(), tmp_path / "itsdangerous"))
    files = sources(root, "src/itsdangerous/*.py")
    assert await loop(root, python_edits(files), python_oracle, False, tmp_path) == 8


@pytest.mark.timeout(900)
async def test_pflag_edits_and_reverts_match_goplss_command_line(pflag_root, monkeypatch, tmp_path):
    gopls = require_binary("gopls", os.path.expanduser("~/go/bin/gopls"))
    require_binary("go")
    monkeypatch.setenv("PATH", f"{os.path.dirname(gopls)}{os.pathsep}{os.environ['PATH']}")
    files = sources(pflag_root, "*.go")
    assert await loop(pflag_root, go_edits(files), go_oracle, True, tmp_path) == 8
