"""CONTRIBUTING.md says what the code does: checklist (d) builds a family that works, the others name what exists.

Checklist (d) is followed as written: its fenced blocks say what they are in their info string
(``file=PATH``: a new file; ``edit=pyproject.toml`` / ``edit=README.md``: the root's extras, the family
table; ``sh run``: commands, run in order), so the family is built in a temporary copy of the root's
files, made importable and its entry point discoverable as an installed distribution's, and its own tests
and benchmark run there. The family must also pass the gates of test_architecture.py and ruff's. A step
that edits a file outside the family, a bound off the release series of VERSION, a block whose code no
longer runs: each fails here, naming the step.

Checklists (a) to (c) are read for what they name: every path must exist, and every name of a step must
be found in the files that step names (or in the test kit), so a renamed table or module is caught.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import attrs
import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "CONTRIBUTING.md"
FAMILY = "greeter"
OWN = (f"plugins/{FAMILY}/", f"tests/{FAMILY}/", f"benchmarks/{FAMILY}_bench.py")
EDITABLE = {"pyproject.toml", "README.md"}  # the only files outside the family the checklist may touch
ROOT_FILES = ("pyproject.toml", "README.md", "LICENSE", "VERSION")
RUN_COMMANDS = {"mkdir", "cp", "touch"}  # what a `sh run` step may run besides `uv run`
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)


@attrs.frozen
class Block:
    info: str
    text: str
    line: int

    @property
    def attrs(self) -> dict[str, str]:
        words = self.info.split()
        return {k: v for k, _, v in (w.partition("=") for w in words[1:])}

    @property
    def where(self) -> str:
        return f"CONTRIBUTING.md:{self.line} (```{self.info})"


def section(title_start: str) -> tuple[str, int]:
    """The text of the ``## `` section whose title begins with ``title_start`` (a ``## `` line inside a
    fenced block does not end it), and the number of its first line."""
    lines = DOC.read_text(encoding="utf-8").splitlines(keepends=True)
    fenced = False
    begin = end = None
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("## "):
            if begin is not None:
                end = i
                break
            if line.startswith(f"## {title_start}"):
                begin = i
    assert begin is not None, f"CONTRIBUTING.md has no section '## {title_start}...'"
    return "".join(lines[begin:end]), begin + 1


def checklist_d() -> list[Block]:
    text, first = section("(d)")
    return [
        Block(m.group(1).strip(), m.group(2), first + text.count("\n", 0, m.start()))
        for m in FENCE.finditer(text)
    ]


# -- following the steps ------------------------------------------------------------------------------


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _depth(lines: list[str]) -> int:
    text = "\n".join(lines)
    return text.count("[") - text.count("]")


def edit_pyproject(path: Path, block: Block) -> None:
    """Add the block's keys to the tables of ``path``; a list the table has already gets the items appended."""
    lines = path.read_text(encoding="utf-8").splitlines()
    wanted = tomllib.loads(block.text)
    current = tomllib.loads("\n".join(lines))
    for header in re.findall(r"^\[([^\]\[]+)\][ \t]*$", block.text, re.M):
        keys: dict = wanted
        have: dict = current
        for part in header.split("."):
            keys, have = keys[part], have.get(part, {})
        assert f"[{header}]" in lines, f"{block.where}: the root's pyproject.toml has no [{header}] table"
        start = lines.index(f"[{header}]") + 1
        end = next((i for i in range(start, len(lines)) if lines[i].startswith("[")), len(lines))
        for key, value in keys.items():
            if key in have:
                assert isinstance(have[key], list) and isinstance(value, list), (
                    f"{block.where}: [{header}] has {key} already, and only a list can be added to"
                )
                at = next(i for i in range(start, end) if re.match(rf"{re.escape(key)}\s*=", lines[i]))
                stop = at
                while _depth(lines[at : stop + 1]) > 0:  # a list written over several lines
                    stop += 1
                merged = [*have[key], *(v for v in value if v not in have[key])]
                lines[at : stop + 1] = [f"{_toml_key(key)} = {_toml_value(merged)}"]
                end -= stop - at
            else:
                last = end
                while last > start and not lines[last - 1].strip():
                    last -= 1
                lines.insert(last, f"{_toml_key(key)} = {_toml_value(value)}")
                end += 1
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def edit_readme(path: Path, block: Block) -> None:
    """Append the block's rows to the family table (the one whose header begins ``| family |``)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = next((i for i, ln in enumerate(lines) if ln.startswith("| family |")), None)
    assert header is not None, f"{block.where}: README.md has no family table ('| family | ...')"
    end = header
    while end + 1 < len(lines) and lines[end + 1].startswith("|"):
        end += 1
    rows = [ln for ln in block.text.splitlines() if ln.strip()]
    columns = lines[header].count("|")
    for row in rows:
        assert row.startswith("|") and row.count("|") == columns, (
            f"{block.where}: {row!r} is not a row of the family table ({columns - 1} columns: {lines[header]})"
        )
    lines[end + 1 : end + 1] = rows
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def install(root: Path) -> Path:
    """A folder holding the family's distribution metadata (its entry points), as an install writes it."""
    project = tomllib.loads((root / f"plugins/{FAMILY}/pyproject.toml").read_text(encoding="utf-8"))[
        "project"
    ]
    version = (root / "VERSION").read_text().strip()
    site = root / "_site"
    info = site / f"{project['name'].replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {version}\n")
    groups = project.get("entry-points", {})
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n" for g, eps in groups.items()
        )
    )
    return site


def child_env(root: Path, site: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TETHER_", "PYTEST_"))}
    path = [
        str(root / f"plugins/{FAMILY}/src"),
        str(site),
        *filter(None, env.get("PYTHONPATH", "").split(os.pathsep)),
    ]
    return {**env, "PYTHONPATH": os.pathsep.join(path), "TETHER_NO_PLUGIN_CACHE": "1"}


def run_step(root: Path, site: Path, block: Block, line: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(line)
    if argv[:2] == ["uv", "run"]:
        argv = argv[2:]
        if argv[0] == "pytest":
            argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *argv[1:]]
        elif argv[0] == "python":
            argv = [sys.executable, *argv[1:]]
        else:
            pytest.fail(f"{block.where}: `{line}`: only `uv run pytest` and `uv run python` are followed")
    else:
        assert argv[0] in RUN_COMMANDS, (
            f"{block.where}: `{line}`: a run step runs `uv run` or {sorted(RUN_COMMANDS)}"
        )
    return subprocess.run(
        argv, cwd=root, env=child_env(root, site), capture_output=True, text=True, timeout=300
    )


@attrs.define
class Built:
    root: Path
    site: Path
    ran: list[tuple[str, subprocess.CompletedProcess[str]]]
    written: list[str]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    """The family of checklist (d), built in a copy of the root's files by following its blocks in order."""
    root = tmp_path_factory.mktemp("contributing")
    for name in ROOT_FILES:
        shutil.copy2(REPO / name, root / name)
    (root / "tests").mkdir()
    site: Path | None = None
    ran: list[tuple[str, subprocess.CompletedProcess[str]]] = []
    written: list[str] = []
    for block in checklist_d():
        words = block.info.split()
        where = block.attrs
        if "file" in where:
            path = where["file"]
            assert path.startswith(OWN), (
                f"{block.where}: a new family writes only its own files {OWN}, not {path}"
            )
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(block.text, encoding="utf-8")
            written.append(path)
        elif "edit" in where:
            target = where["edit"]
            assert target in EDITABLE, (
                f"{block.where}: a new family edits no file outside its own but {sorted(EDITABLE)} "
                f"(the rest of the wiring is derived from plugins/*/pyproject.toml), not {target}"
            )
            (edit_pyproject if target == "pyproject.toml" else edit_readme)(root / target, block)
        elif words[1:2] == ["run"]:
            if site is None and (root / f"plugins/{FAMILY}/pyproject.toml").exists():
                site = install(root)
            for line in filter(None, (ln.strip() for ln in block.text.splitlines())):
                out = run_step(root, site or root, block, line)
                ran.append((line, out))
                assert out.returncode == 0, (
                    f"{block.where}: `{line}` failed ({out.returncode}):\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
                )
    assert site is not None, "checklist (d) never runs anything once the family's pyproject.toml is written"
    return Built(root, site, ran, written)


# -- checklist (d) -------------------------------------------------------------------------------------


def test_checklist_d_is_written_in_blocks_the_test_can_follow():
    blocks = checklist_d()
    kinds = [b.info.split()[0] if b.info else "" for b in blocks]
    assert blocks and all(kinds), "every block of checklist (d) says its language"
    targets = {b.attrs.get("file") or b.attrs.get("edit") for b in blocks} - {None}
    for needed in (
        f"plugins/{FAMILY}/pyproject.toml",
        f"plugins/{FAMILY}/src/tether_{FAMILY}/plugin.py",
        f"plugins/{FAMILY}/src/tether_{FAMILY}/options.py",
        f"plugins/{FAMILY}/src/tether_{FAMILY}/tools.py",
        f"plugins/{FAMILY}/README.md",
        f"benchmarks/{FAMILY}_bench.py",
        "pyproject.toml",
        "README.md",
    ):
        assert needed in targets, f"checklist (d) has no step for {needed}"
    assert any(p.startswith(f"tests/{FAMILY}/") for p in targets), (
        "checklist (d) writes no test of the family"
    )


def test_the_family_of_checklist_d_passes_its_own_tests_and_benchmark(built):
    pytest_runs = [(line, out) for line, out in built.ran if " pytest " in f" {line} "]
    assert pytest_runs, "checklist (d) never runs the family's tests"
    for line, out in pytest_runs:
        assert re.search(r"\b\d+ passed\b", out.stdout) and " skipped" not in out.stdout, (
            line,
            out.stdout[-2000:],
        )
    benches = [(line, out) for line, out in built.ran if "benchmarks/" in line]
    assert benches, "checklist (d) never runs the family's benchmark"
    for line, out in benches:
        assert "median" in out.stdout and "ratio" in out.stdout, (line, out.stdout)


def test_the_root_extras_of_checklist_d_name_the_family_within_the_release_series(built):
    root = tomllib.loads((built.root / "pyproject.toml").read_text(encoding="utf-8"))
    family = tomllib.loads((built.root / f"plugins/{FAMILY}/pyproject.toml").read_text(encoding="utf-8"))
    name = family["project"]["name"]
    assert name == f"tether-{FAMILY}"
    assert family["project"]["entry-points"]["tether"] == {FAMILY: f"tether_{FAMILY}.plugin"}
    extras = root["project"]["optional-dependencies"]
    assert [r for r in extras[FAMILY] if r.startswith(name)], extras.get(FAMILY)
    assert [r for r in extras["all"] if r.startswith(name)], "the family is not in the extra 'all'"
    assert root["tool"]["uv"]["sources"][name] == {"workspace": True}
    major, minor = (int(p) for p in (REPO / "VERSION").read_text().strip().split(".")[:2])
    series = f">={major}.{minor},<{major}.{minor + 1}"
    for requirement in [*family["project"]["dependencies"], *extras[FAMILY]]:
        if requirement.startswith("tether"):
            assert requirement.endswith(series), (
                f"{requirement}: tether requirements are bounded {series} (VERSION)"
            )
    # what the copy had before is still there: only additions
    before = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    for extra, requirements in before["project"]["optional-dependencies"].items():
        assert extras[extra][: len(requirements)] == requirements, extra
    readme = (built.root / "README.md").read_text(encoding="utf-8")
    assert f"| `{FAMILY}` |" in readme


def test_the_family_of_checklist_d_passes_the_architecture_gates(built):
    spec = importlib.util.spec_from_file_location(
        "tether_architecture_gates", Path(__file__).with_name("test_architecture.py")
    )
    assert spec is not None and spec.loader is not None
    gates = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gates)
    src = built.root / f"plugins/{FAMILY}/src"
    sources = sorted(src.rglob("*.py"))
    tests = sorted((built.root / f"tests/{FAMILY}").rglob("*.py"))
    assert sources and tests
    found = [
        *gates.string_option_reads(sources, built.root),
        *gates.family_keywords(sources, built.root),
        *gates.dict_tool_errors(sources, built.root),
        *gates.two_argument_unavailable(sources, built.root),
        *gates.kill_tree_uses(sources, built.root),
        *gates.long_modules(sources, built.root),
        *gates.import_cycles([src], built.root),
        *gates.hand_written_traceback_checks(tests, built.root),
    ]
    assert not found, found


def test_the_code_of_checklist_d_is_formatted_and_passes_ruff(built):
    pytest.importorskip("ruff")
    files = [str(built.root / p) for p in built.written if p.endswith(".py")]
    for args in (["format", "--check", "--diff"], ["check", "--output-format", "concise"]):
        out = subprocess.run(
            [sys.executable, "-m", "ruff", *args, *files],
            cwd=built.root,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, f"ruff {args[0]} on the code of checklist (d):\n{out.stdout}{out.stderr}"


# -- checklists (a) to (c) --------------------------------------------------------------------------------

PATH = re.compile(
    r"^(?:\.ci/|core/|plugins/|tests/|benchmarks/|docs/|scripts/)[\w./-]+$|^[\w-]+\.(?:toml|md|json)$"
)
FILE_NAME = re.compile(r"^[\w-]+\.(?:py|toml|md|json)$")
KIT = (REPO / "core/src/tether/testing.py", REPO / "core/src/tether/run.py")


def _steps(title_start: str) -> list[tuple[int, str]]:
    text, first = section(title_start)
    steps = []
    for m in re.finditer(r"^\d+\. .*?(?=^\d+\. |\Z)", text, re.M | re.S):
        steps.append((first + text.count("\n", 0, m.start()), m.group(0)))
    assert steps, f"section {title_start} has no numbered steps"
    return steps


@pytest.mark.parametrize("title", ["(a)", "(b)", "(c)"])
def test_checklists_name_files_that_exist_and_names_found_in_them(title):
    problems = []
    for line, step in _steps(title):
        tokens = re.findall(r"`([^`]+)`", step)
        # paths, also inside a command (`uv run python scripts/reference.py`); a bare file name is looked
        # for in the folders the step names
        paths = [w for t in tokens for w in t.split() if PATH.match(w)]
        folders = [p for p in paths if p.endswith("/")]
        for token in tokens:
            if FILE_NAME.match(token) and not (REPO / token).exists():
                inside = [f"{f}{token}" for f in folders if (REPO / f / token).is_file()]
                paths.append(inside[0] if inside else token)
        for path in paths:
            if not (REPO / path).exists() and "<" not in path:
                problems.append(f"CONTRIBUTING.md:{line}: {path} does not exist")
        texts = [(REPO / p).read_text(encoding="utf-8") for p in paths if (REPO / p).is_file()] + [
            k.read_text(encoding="utf-8") for k in KIT
        ]
        for token in tokens:
            if token in paths or FILE_NAME.match(token) or " " in token or "/" in token:
                continue
            m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", token)
            if m is None or len(m.group(0)) < 3:
                continue
            name = m.group(0)
            if name.startswith("tether_") and name.endswith(("_servers", "_adapters", "_grammars")):
                hooks = "".join(p.read_text() for p in REPO.glob("plugins/*/src/*/hookspecs.py"))
                if f"def {name}(" not in hooks:
                    problems.append(f"CONTRIBUTING.md:{line}: no hook {name} in the families' hookspecs.py")
                continue
            if not any(re.search(rf"\b{re.escape(name)}\b", t) for t in texts):
                problems.append(
                    f"CONTRIBUTING.md:{line}: `{token}` is in none of the files this step names ({', '.join(paths) or 'none'})"
                )
    assert not problems, "\n".join(problems)
