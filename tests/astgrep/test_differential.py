"""Differential test: generated Python programs and patterns, tether against ast-grep (fixed seeds)."""

from __future__ import annotations

import random

import pytest
import tether

NAMES = ["a", "b", "x", "self.y", "f(1)", "g(a, b)", "'s'", "[1, 2]", "a.b", "None"]
PATTERNS = [
    "print($A)",
    "f($$$A)",
    "g($A, $B)",
    "$A.append($B)",
    "$A == $A",
    "$A + $B",
    "if $C:\n    $$$B",
    "return $A",
    "$X = $Y",
    "def $F($$$A):\n    $$$B",
    "lambda $A: $B",
    "[$E for $V in $I]",
    "for $A in $B:\n    $$$C",
    "f($A)",
    "g($$$A, b)",
    "$A[$B]",
    "foo($$$)",
    "$F(1)",
    "if $C:\n    $A\nelse:\n    $B",
    "$A and $B",
    "self.$A",
]


class Program:
    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)

    def expr(self, d: int = 0) -> str:
        rnd, r = self.rnd, self.rnd.random()
        if d > 2 or r < 0.3:
            return rnd.choice(NAMES)
        if r < 0.5:
            args = ", ".join(self.expr(d + 1) for _ in range(rnd.randint(0, 3)))
            return f"{rnd.choice(['f', 'g', 'print', 'foo'])}({args})"
        if r < 0.6:
            return f"{self.expr(d + 1)}.append({self.expr(d + 1)})"
        if r < 0.7:
            return f"{self.expr(d + 1)} {rnd.choice(['+', '==', 'and', '<'])} {self.expr(d + 1)}"
        if r < 0.8:
            return f"[{self.expr(d + 1)} for a in {self.expr(d + 1)}]"
        if r < 0.9:
            return f"lambda a: {self.expr(d + 1)}"
        return f"{self.expr(d + 1)}[{self.expr(d + 1)}]"

    def stmt(self, ind: int, d: int = 0) -> str:
        rnd, r, pad = self.rnd, self.rnd.random(), " " * ind
        if d > 1 or r < 0.35:
            return pad + self.expr() + rnd.choice(["", "  # note", ""]) + "\n"
        if r < 0.5:
            return pad + f"{rnd.choice(['a', 'b', 'x'])} = {self.expr()}\n"
        if r < 0.6:
            return pad + f"return {self.expr()}\n"
        if r < 0.75:
            body = "".join(self.stmt(ind + 4, d + 1) for _ in range(rnd.randint(1, 2)))
            other = pad + "else:\n" + self.stmt(ind + 4, d + 1) if rnd.random() < 0.3 else ""
            return pad + f"if {self.expr()}:\n" + body + other
        if r < 0.85:
            return pad + f"for a in {self.expr()}:\n" + self.stmt(ind + 4, d + 1)
        params = rnd.choice(["", "a", "a, b", "self, *args"])
        body = "".join(self.stmt(ind + 4, d + 1) for _ in range(rnd.randint(1, 3)))
        return pad + f"def {rnd.choice(['f', 'g', 'h'])}({params}):\n" + body

    def case(self) -> tuple[str, str]:
        source = "".join(self.stmt(0) for _ in range(self.rnd.randint(2, 6)))
        return self.rnd.choice(PATTERNS), source


@pytest.mark.parametrize("seed", range(8))
def test_generated_programs_match_like_ast_grep(seed, sg, tmp_path):
    gen = Program(seed)
    differences = []
    found = 0
    with tether.open_run_sync(tmp_path) as run:
        for i in range(12):
            pattern, source = gen.case()
            path = tmp_path / f"t{i}.py"
            path.write_text(source)
            theirs = {
                (m["range"]["byteOffset"]["start"], m["range"]["byteOffset"]["end"]): {
                    k: v["text"] for k, v in ((m.get("metaVariables") or {}).get("single") or {}).items()
                }
                for m in sg(pattern, path, "python")
            }
            result = run.call("ast_grep", {"pattern": pattern, "path": path.name, "max_results": 1000})
            assert not result.is_error, result.plain
            ours = {tuple(m["byte_range"]): m["captures"] for m in result.data["matches"]}
            found += len(theirs)
            if set(ours) != set(theirs) or any(
                ours[r].get(k) != v for r, caps in theirs.items() for k, v in caps.items()
            ):
                differences.append((pattern, source, sorted(ours), sorted(theirs)))
    assert differences == []
    assert found > 0, "no generated case matched: the comparison is vacuous"


REWRITES = [
    ("print($A)", "log($A)"),
    ("f($$$A)", "h(\n    $$$A\n)"),
    ("$A.append($B)", "$A.extend([$B])"),
    ("if $C:\n    $$$B", "while $C:\n    $$$B"),
    ("def $F($$$A):\n    $$$B", "async def $F($$$A):\n    $$$B"),
    ("for $A in $B:\n    $$$C", "for $A in sorted($B):\n    $$$C"),
    ("lambda $A: $B", "(lambda $A: ($B))"),
    ("return $A", "return ($A)"),
]


@pytest.mark.parametrize("seed", range(4))
def test_generated_rewrites_like_ast_grep(seed, sg, tmp_path):
    gen = Program(100 + seed)
    changed = 0
    for i in range(10):
        _, source = gen.case()
        pattern, template = gen.rnd.choice(REWRITES)
        case = tmp_path / str(i)
        case.mkdir()
        (case / "theirs.py").write_text(source)
        (case / "ours.py").write_text(source)
        sg(pattern, case / "theirs.py", "python", rewrite=template, update=True)
        with tether.open_run_sync(case) as run:
            staged = run.call("ast_edit", {"pattern": pattern, "rewrite": template, "path": "ours.py"})
            assert not staged.is_error, staged.plain
            if staged.data["edit_id"]:
                # these patterns cover whole nodes: no rule of ours applies
                assert staged.data["kept_tails"] == 0
                run.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
        theirs = (case / "theirs.py").read_text()
        assert (case / "ours.py").read_text() == theirs, (pattern, template, source)
        changed += theirs != source
    assert changed > 0, "no generated rewrite changed anything: the comparison is vacuous"
