"""The fuzz campaign: a Hypothesis state machine over real runs of every family, one per surface (full,
plan, readonly), reused across examples (the tree is reset between them, the runs and their servers stay).

Each step is a call: schema-derived and valid, a mutant of one (wrong type, out of range, huge, deep,
NUL bytes, lone surrogates, absolute and ``..`` paths, a symlink out of the root), a file-tool write whose
effect the model predicts, or an interleaving (two writers on one file, a write between ast_edit and
resolve, a reload during a rename). After every step: no exception out of `Run.call`, no traceback and
no fault of the tool in an answer, every answer bounded, nothing written outside the root, no tool of a
tier the surface does not offer, the files the file tools wrote equal to the model; after the runs
close, no process left.

CI runs a fixed seed and a small budget; ``TETHER_FUZZ_EXAMPLES`` (and ``TETHER_FUZZ_STEPS``) buy more,
and ``TETHER_FUZZ_SEED`` another seed. A failure prints the steps that reproduce it, shrunk.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import tether
import tether.files
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from tether.testing import FAULT_MARKERS, assert_no_new_children, children
from tether.tools import Tier

# CI: 10 examples of 15 steps (about 150 steps, 40 s at load 10 on 2 cores; 20 examples took 85 s there)
EXAMPLES = int(os.environ.get("TETHER_FUZZ_EXAMPLES", "10"))
STEPS = int(os.environ.get("TETHER_FUZZ_STEPS", "15"))
SEED = int(os.environ.get("TETHER_FUZZ_SEED", "28"))
BUDGET = int(os.environ.get("TETHER_FUZZ_BUDGET", "600"))  # s before pytest-timeout stops the campaign
MAX_CHARS = 4000  # the runs' max_output_chars: every answer must stay near it
COUNTS: Counter[str] = Counter()
SECONDS: Counter[str] = Counter()  # spent per tool

PROJECT = {
    "pyproject.toml": '[project]\nname = "fuzzed"\nversion = "0"\n',
    "pkg/__init__.py": "",
    "pkg/util.py": 'def greet(name: str) -> str:\n    return "hi " + name\n',
    "pkg/main.py": "from pkg.util import greet\n\nprint(greet('a'))\n",
    "notes/a.txt": "alpha\nbeta\ngamma\n",
}
SCRATCH = [
    "notes/a.txt",
    "notes/b.txt",
    "notes/c.md",
    "notes/new.js",
]  # what the model follows (no server serves them: their writes do not wait for diagnostics)
PATHS = [
    *PROJECT,
    *SCRATCH,
    ".",
    "pkg",
    "*",
    "../outside.txt",
    "/etc/passwd",
    "out/secret.txt",  # a symlink out of the root
    "pkg/../../x",
    "pkg\0x",
    "\ud800.py",
    "é/ü.py",
    "a" * 300,
    "",
]
TEXT = st.text(st.characters(codec="utf-8"), max_size=40) | st.sampled_from(["", "x", "print($A)", "greet"])


def paths() -> st.SearchStrategy[str]:
    return st.sampled_from(PATHS) | st.text(max_size=12)


def from_schema(schema: dict[str, Any], name: str = "") -> st.SearchStrategy[Any]:
    """Valid values for one of our argument schemas (the subset `tether.args` emits)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([from_schema(s, name) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(schema.get("minimum", -5), min(schema.get("maximum", 60), 60))
    if kind == "number":
        return st.floats(schema.get("minimum", 0), min(schema.get("maximum", 3), 3), allow_nan=False)
    if kind == "string":
        if name in {"path", "file", "program", "cwd"}:
            return paths()
        low, high = schema.get("minLength", 0), schema.get("maxLength", 40)
        pool = [e for e in schema.get("examples", []) if isinstance(e, str)]
        base = TEXT.filter(lambda s: low <= len(s) <= high)
        return st.sampled_from(pool) | base if pool else base
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {}), name), max_size=3)
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        fixed = {k: from_schema(v, k) for k, v in props.items() if k in required}
        optional = {k: from_schema(v, k) for k, v in props.items() if k not in required}
        return st.fixed_dictionaries(fixed, optional=optional)
    return st.none() | st.integers() | TEXT


def deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


MUTANTS = st.sampled_from(
    [
        None,
        True,
        -1,
        0,
        2**63,
        1e308,
        float("inf"),
        "",
        "\0",
        "a\0b",
        "\ud800",
        "\U0010ffff" * 3,
        "x" * 200_000,
        [],
        {},
        {"nested": {"a": [1, 2]}},
        "/etc/passwd",
        "../../etc/passwd",
        "out/secret.txt",
    ]
) | st.integers(300, 3000).map(deep)


class World:
    """The root, a folder outside it, and one open run per surface."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "root"
        self.outside = base / "outside"
        self.outside.mkdir(parents=True)
        (self.outside / "secret.txt").write_text("secret\n")
        self.root.mkdir()
        self.reset()
        options = {
            "max_output_chars": MAX_CHARS,
            "vibe_fast": "cat",
            "diagnostics_timeout": 20,
            "eval_timeout": 20,
        }
        self.runs = {
            surface: tether.open_run_sync(
                self.root,
                surface=surface,
                plugins=[tether.files],
                modes=["vibe"],
                conversation_id=f"fuzz-{surface}",
                options=options,
            )
            for surface in ("full", "plan", "readonly")
        }
        self.open = {s: cm.__enter__() for s, cm in self.runs.items()}
        self.tools = {s: {t.name: t for t in run.tools()} for s, run in self.open.items()}

    def reset(self) -> None:
        for child in self.root.iterdir() if self.root.exists() else ():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        for rel, text in PROJECT.items():
            (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.root / rel).write_text(text)
        (self.root / "out").symlink_to(self.outside)

    def outside_state(self) -> list[tuple[str, bytes]]:
        return sorted((p.name, p.read_bytes()) for p in self.outside.iterdir())

    def close(self) -> None:
        for cm in self.runs.values():
            cm.__exit__(None, None, None)


WORLD: World | None = None


def _text(path: Path) -> str:
    """A file's text as written (no newline translation: the model holds what the writes sent)."""
    return path.read_bytes().decode("utf-8", "replace")


def check_answer(surface: str, tool: str, result: Any) -> None:
    """The invariants of one answer."""
    COUNTS["calls"] += 1
    text = result.plain
    for marker in FAULT_MARKERS:
        COUNTS["invariants"] += 1
        assert marker not in text, (
            f"{tool} on {surface}: the answer reads like a fault ({marker!r}): {text[:800]}"
        )
    COUNTS["invariants"] += 2
    assert len(text) <= MAX_CHARS + 600, f"{tool} on {surface}: {len(text)} characters: {text[:300]}"
    size = len(json.dumps(result.data, default=str)) if result.data is not None else 0
    assert size <= 5 * MAX_CHARS + 1000, f"{tool} on {surface}: data of {size} characters"


class Campaign(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        assert WORLD is not None
        self.world = WORLD
        self.world.reset()
        self.secret = self.world.outside_state()
        self.model: dict[str, str | None] = {rel: PROJECT.get(rel) for rel in SCRATCH}
        self.reloaded = False
        COUNTS["examples"] += 1

    def call(self, surface: str, tool: str, args: Any) -> Any:
        run = self.world.open[surface]
        start = time.monotonic()
        try:
            result = run.call(tool, args)
        except BaseException as exc:  # the invariant: Run.call never raises
            raise AssertionError(f"{tool} on {surface} raised {type(exc).__name__}: {exc}") from exc
        SECONDS[tool] += time.monotonic() - start
        check_answer(surface, tool, result)
        visible = tool in self.world.tools[surface]
        COUNTS["invariants"] += 1
        if not visible:
            assert result.is_error and "unknown tool" in result.plain, (
                f"{tool} is not offered on {surface} and still answered: {result.plain[:300]}"
            )
        return result

    def at_once(self, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
        """The calls on the full surface, all at once on its run's loop."""
        run = self.world.open["full"]

        async def together() -> list[Any]:
            return list(await asyncio.gather(*(run.run.call(name, args) for name, args in calls)))

        return asyncio.run_coroutine_threadsafe(together(), run._loop).result(timeout=300)

    def resync(self) -> None:
        """After a write whose effect the model does not predict (a rewrite, a rename), take the disk's."""
        for rel in self.model:
            path = self.world.root / rel
            self.model[rel] = _text(path) if path.is_file() else None

    # -- schema-derived and mutant calls of every tool, on every surface --------------------------

    @rule(data=st.data(), surface=st.sampled_from(["full", "plan", "readonly"]))
    def valid_call(self, data: st.DataObject, surface: str) -> None:
        name = data.draw(st.sampled_from(sorted(self.world.tools["full"])), label="tool")
        tool = self.world.tools["full"][name]
        args = data.draw(from_schema(tool.input_schema), label="arguments")
        result = self.call(surface, name, args)
        if tool.tier is Tier.WRITE and not result.is_error:
            self.resync()

    @rule(data=st.data(), surface=st.sampled_from(["full", "plan", "readonly"]))
    def mutant_call(self, data: st.DataObject, surface: str) -> None:
        name = data.draw(st.sampled_from(sorted(self.world.tools["full"])), label="tool")
        tool = self.world.tools["full"][name]
        args = dict(data.draw(from_schema(tool.input_schema), label="arguments"))
        keys = [*tool.input_schema.get("properties", {}), "bogus"]
        key = data.draw(st.sampled_from(keys), label="mutated")
        args[key] = data.draw(MUTANTS, label="value")
        result = self.call(surface, name, args)
        if tool.tier is Tier.WRITE and not result.is_error:
            self.resync()

    @rule(args=st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2)))
    def arguments_not_an_object(self, args: Any) -> None:
        result = self.call("full", "read", args)
        COUNTS["invariants"] += 1
        assert result.is_error or args in (None, {}), result.plain

    # -- file-tool writes, checked against the model ------------------------------------------------

    @rule(rel=st.sampled_from(SCRATCH), content=TEXT)
    def write(self, rel: str, content: str) -> None:
        result = self.call("full", "write", {"path": rel, "content": content})
        if not result.is_error:
            self.model[rel] = content
        else:
            COUNTS["refused writes"] += 1

    @rule(rel=st.sampled_from(SCRATCH), data=st.data())
    def edit(self, rel: str, data: st.DataObject) -> None:
        text = self.model[rel]
        old = data.draw(
            st.sampled_from(sorted({text[i : i + 3] for i in range(len(text))} or {"zz"})) if text else TEXT
        )
        new = data.draw(TEXT, label="new")
        result = self.call("full", "edit", {"path": rel, "old_string": old, "new_string": new})
        expect_ok = bool(old) and text is not None and text.count(old) == 1
        COUNTS["invariants"] += 1
        assert result.is_error != expect_ok, f"edit of {old!r} in {rel!r} ({text!r}): {result.plain[:300]}"
        if expect_ok:
            assert text is not None
            self.model[rel] = text.replace(old, new, 1)

    @rule(rel=st.sampled_from(SCRATCH), first=TEXT, second=TEXT)
    def two_writers_on_one_file(self, rel: str, first: str, second: str) -> None:
        both = self.at_once(
            ("write", {"path": rel, "content": first}), ("write", {"path": rel, "content": second})
        )
        for r in both:
            check_answer("full", "write", r)
        now = _text(self.world.root / rel)
        accepted = [c for c, r in zip((first, second), both, strict=True) if not r.is_error]
        COUNTS["invariants"] += 1
        assert now in accepted, f"{rel} holds {now!r}, neither accepted write ({accepted!r})"
        self.model[rel] = now

    @rule(content=TEXT)
    def write_between_ast_edit_and_resolve(self, content: str) -> None:
        self.call("full", "write", {"path": "notes/new.js", "content": "print(1)\n"})
        staged = self.call(
            "full", "ast_edit", {"pattern": "print($A)", "rewrite": "log($A)", "path": "notes/new.js"}
        )
        self.call("full", "write", {"path": "notes/new.js", "content": content})
        self.model["notes/new.js"] = content
        edit_id = (staged.data or {}).get("edit_id")
        if edit_id:
            COUNTS["staged edits resolved after a write"] += 1
            r = self.call("full", "resolve", {"edit_id": edit_id, "action": "accept"})
            COUNTS["invariants"] += 1
            if content != "print(1)\n":
                assert r.is_error, f"resolve wrote over a file changed since ast_edit: {r.plain[:300]}"
            elif not r.is_error:
                self.model["notes/new.js"] = "log(1)\n"

    @precondition(lambda self: not self.reloaded)  # each restarts the language servers: once an example
    @rule()
    def reload_during_a_rename(self) -> None:
        self.reloaded = True
        COUNTS["reloads"] += 1
        args = {"file": "pkg/util.py", "line": 1, "symbol": "greet", "new_name": "welcome"}
        both = self.at_once(("lsp_rename", args), ("lsp", {"action": "reload"}))
        for tool, r in zip(("lsp_rename", "lsp"), both, strict=True):
            check_answer("full", tool, r)
        util = (self.world.root / "pkg/util.py").read_text()
        main = (self.world.root / "pkg/main.py").read_text()
        COUNTS["invariants"] += 1
        assert ("welcome" in util) == ("welcome" in main), f"a rename half applied:\n{util}\n{main}"

    # -- after every step -----------------------------------------------------------------------------

    @invariant()
    def tree_is_the_model_and_nothing_left_the_root(self) -> None:
        COUNTS["steps"] += 1
        for rel, expected in self.model.items():
            path = self.world.root / rel
            now = _text(path) if path.is_file() else None
            COUNTS["invariants"] += 1
            assert now == expected, f"{rel} holds {now!r}, the model says {expected!r}"
        COUNTS["invariants"] += 2
        assert self.world.outside_state() == self.secret, "a file outside the root changed"
        assert not (self.world.base / "outside.txt").exists() and not (self.world.base / "x").exists()

    @invariant()
    def surfaces_offer_only_their_tiers(self) -> None:
        for surface, tools in self.world.tools.items():
            allowed = {Tier.READ} if surface != "full" else {Tier.READ, Tier.WRITE, Tier.EXEC}
            COUNTS["invariants"] += 1
            assert {t.tier for t in tools.values()} <= allowed, surface


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    global WORLD
    before = children()
    WORLD = World(tmp_path_factory.mktemp("campaign"))
    try:
        yield WORLD
    finally:
        WORLD.close()
        WORLD = None
        assert_no_new_children(before, timeout=30)
        print(f"\ncampaign: {dict(COUNTS)}", file=sys.stderr)
        print(f"seconds per tool: { {k: round(v, 1) for k, v in SECONDS.most_common()} }", file=sys.stderr)


@pytest.mark.timeout(BUDGET)
def test_the_campaign_finds_nothing(world):
    machine = seed(SEED)(Campaign)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            derandomize=False,
        ),
    )
    assert COUNTS["examples"] >= EXAMPLES, dict(COUNTS)
