"""`lsp` queries against a real basedpyright, sharing one warm server for the module."""

from __future__ import annotations

import pytest
import pytest_asyncio
import tether
from tether.testing import assert_model_error

pytestmark = pytest.mark.asyncio(loop_scope="module")

MANY = "from pkg.util import greet\n\n" + "".join(f"greet('{i}')\n" for i in range(60))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def nav(tmp_path_factory, samples):
    root = samples.python_project(tmp_path_factory.mktemp("nav") / "proj")
    samples.write_tree(root, {"pkg/many.py": MANY})
    (root.parent / "outside.py").write_text("x = 1\n")
    (root / "pkg/latin1.py").write_bytes("x = 'caf\u00e9'\n".encode("latin-1"))
    async with tether.open_run(root) as run:
        yield run, root


async def call(nav, **args):
    run, _ = nav
    return await run.call("lsp", args)


async def test_definition_through_an_import_alias(nav):
    r = await call(nav, action="definition", file="pkg/main.py", line=7, symbol="greet")
    assert not r.is_error, r.plain
    assert r.data["locations"] == [
        {"file": "pkg/util.py", "line": 1, "column": 5, "text": "def greet(name: str) -> str:"}
    ]
    assert "pkg/util.py:1:5: def greet(name: str) -> str:" in r.plain
    # the alias itself: 'u' also occurs inside 'value'; the whole identifier is meant
    r = await call(nav, action="definition", file="pkg/main.py", line=7, symbol="u")
    assert not r.is_error, r.plain
    assert [(loc["file"], loc["line"]) for loc in r.data["locations"]] == [("pkg/util.py", 1)]


async def test_same_substring_twice_on_a_line_is_refused_with_the_occurrences(nav):
    r = await call(nav, action="definition", file="pkg/main.py", line=5, symbol="greet")
    assert_model_error(r, "occurs 2 times on line 5", "column 10", "column 16", "occurrence")
    r = await call(nav, action="hover", file="pkg/main.py", line=5, symbol="greet", occurrence=2)
    assert not r.is_error and "def greet(name: str) -> str" in r.plain
    r = await call(nav, action="definition", file="pkg/main.py", line=5, symbol="greet", occurrence=3)
    assert r.is_error and "occurs 2 time(s)" in r.plain


async def test_a_substring_inside_a_longer_identifier_prefers_the_whole_identifier(nav):
    # 'greet' first occurs inside 'greeting'; the call greet(...) is the whole identifier
    r = await call(nav, action="definition", file="pkg/main.py", line=4, symbol="greet")
    assert not r.is_error, r.plain
    assert [(loc["file"], loc["line"], loc["column"]) for loc in r.data["locations"]] == [
        ("pkg/util.py", 1, 5)
    ]
    # only inside the longer identifier: that one is meant
    r = await call(nav, action="hover", file="pkg/main.py", line=4, symbol="greeti")
    assert not r.is_error and "greeting" in r.plain


async def test_non_ascii_before_the_symbol_is_converted_to_utf16(nav):
    # two emoji are four UTF-16 units but two characters: a code-point column would land on 'u'
    r = await call(nav, action="definition", file="pkg/main.py", line=6, symbol="greet")
    assert not r.is_error, r.plain
    assert [(loc["file"], loc["line"], loc["column"]) for loc in r.data["locations"]] == [
        ("pkg/util.py", 1, 5)
    ]
    # and back: the column printed for that use is in characters
    r = await call(nav, action="references", file="pkg/util.py", line=1, symbol="greet")
    line6 = 'print("😀😀", u.greet("c"))'
    assert {"file": "pkg/main.py", "line": 6, "column": line6.index("greet") + 1, "text": line6} in r.data[
        "locations"
    ]


async def test_references_across_files_are_capped_at_50_and_say_how_many_more(nav):
    r = await call(nav, action="references", file="pkg/util.py", line=1, symbol="greet")
    assert not r.is_error, r.plain
    total = r.data["total"]
    assert total >= 60 + 8  # many.py's 61, main.py's 6, util.py's 2, other.py's 2
    assert len(r.data["locations"]) == 50
    assert f"[{total - 50} more references not shown (showing 50 of {total})." in r.plain
    files = {loc["file"] for loc in r.data["locations"]}
    assert {"pkg/main.py", "pkg/many.py"} <= files
    assert r.data["locations"] == sorted(
        r.data["locations"], key=lambda x: (x["file"], x["line"], x["column"])
    )


async def test_hover_symbols_and_code_actions(nav):
    r = await call(nav, action="hover", file="pkg/util.py", line=8, symbol="greet")
    assert "def greet(name: str) -> str" in r.plain and "Say hello." in r.plain
    r = await call(nav, action="symbols", file="pkg/util.py")
    assert not r.is_error
    names = [(s["name"], s["kind"], s["depth"]) for s in r.data["symbols"]]
    assert (
        ("greet", "function", 0) in names
        and ("Greeter", "class", 0) in names
        and ("hello", "method", 1) in names
    )
    r = await call(nav, action="symbols", query="Greeter")
    assert not r.is_error, r.plain
    assert "pkg/util.py:6:7: class Greeter" in r.plain
    r = await call(nav, action="code_actions", file="pkg/main.py", line=7, symbol="greet")
    assert not r.is_error
    assert any("ignore" in a["title"] for a in r.data["actions"]), r.plain


async def test_type_definition_and_implementation_answer_or_say_unsupported(nav):
    r = await call(nav, action="type_definition", file="pkg/other.py", line=3, symbol="Greeter")
    assert not r.is_error, r.plain
    assert ("pkg/util.py", 6) in [(loc["file"], loc["line"]) for loc in r.data["locations"]]
    r = await call(nav, action="implementation", file="pkg/util.py", line=7, symbol="hello")
    if r.is_error:
        assert_model_error(r, "does not offer implementation answers")


async def test_file_diagnostics_and_the_project_checker(nav):
    r = await call(nav, action="diagnostics", file="pkg/main.py")
    assert not r.is_error, r.plain
    [d] = r.data["diagnostics"]
    assert (d["file"], d["line"], d["column"], d["severity"], d["code"]) == (
        "pkg/main.py",
        7,
        14,
        "error",
        "reportAssignmentType",
    )
    r = await call(nav, action="diagnostics", file="*")
    assert not r.is_error, r.plain
    assert "basedpyright --outputjson" in r.plain
    assert [(d["file"], d["line"], d["code"]) for d in r.data["diagnostics"]] == [
        ("pkg/main.py", 7, "reportAssignmentType")
    ]


BAD = [
    (
        {"action": "definition", "file": "pkg/nope.py", "line": 1, "symbol": "x"},
        "no such file: 'pkg/nope.py'",
    ),
    (
        {"action": "definition", "file": "pkg/util.py", "line": 99, "symbol": "greet"},
        "line 99 is beyond the end of 'pkg/util.py', which has 8 line(s)",
    ),
    (
        {"action": "definition", "file": "pkg/util.py", "line": 2, "symbol": "greet"},
        "'greet' does not occur on line 2 of 'pkg/util.py'",
    ),
    ({"action": "teleport", "file": "pkg/util.py"}, "invalid arguments for lsp: action: expected one of"),
    (
        {"action": "definition", "file": "../outside.py", "line": 1, "symbol": "x"},
        "resolves outside the root",
    ),
    ({"action": "definition", "file": "pkg/util.py", "line": 1}, "action definition needs symbol"),
    ({"action": "references", "symbol": "greet"}, "action references needs line"),
    ({"action": "diagnostics"}, "action diagnostics needs file"),
    ({"action": "symbols"}, "action symbols needs query"),
    ({"action": "hover", "file": "pkg", "line": 1, "symbol": "x"}, "'pkg' is a directory"),
    ({"action": "hover", "file": "README.md", "line": 1, "symbol": "x"}, "no such file"),
    (
        {"action": "definition", "file": "pkg/util.py", "line": 0, "symbol": "greet"},
        "line: must be at least 1",
    ),
    (
        {"action": "definition", "file": "pkg/util.py", "line": 1, "symbol": "greet", "occurrence": 0},
        "occurrence: must be at least 1",
    ),
    ({"action": "definition", "file": "pkg/util.py", "line": 1, "symbol": ""}, "symbol: must not be empty"),
    ({"action": "symbols", "file": "pkg/nope.py"}, "no such file: 'pkg/nope.py'"),
    ({"action": "diagnostics", "file": "pkg/nope.py"}, "no such file: 'pkg/nope.py'"),
    (
        {"action": "hover", "file": "pkg/latin1.py", "line": 1, "symbol": "x"},
        "'pkg/latin1.py' is not UTF-8 text",
    ),
    (
        {"action": "hover", "file": "pkg/util.py", "line": "1", "symbol": "greet"},
        "line: expected integer, got string '1'",
    ),
]


@pytest.mark.parametrize("args,expected", BAD, ids=[b[1][:30] for b in BAD])
async def test_bad_input_gets_one_clear_error(nav, args, expected):
    r = await call(nav, **args)
    assert_model_error(r, expected)
    assert "\n" not in r.plain.strip(), r.plain


async def test_a_file_no_server_handles(nav):
    run, root = nav
    (root / "notes.txt").write_text("hello\n")
    r = await run.call("lsp", {"action": "definition", "file": "notes.txt", "line": 1, "symbol": "hello"})
    assert r.is_error and "no language server handles '.txt' files" in r.plain


async def test_a_small_project_is_answered_when_checked_not_after_the_whole_ready_wait(tmp_path):
    """basedpyright checks a small project without any progress round: the first round ends by quiet,
    which must end the wait when it comes, not at lsp_ready_wait (the query waited all of it: 30 s)."""
    import time

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\nversion = '0'\n")
    (tmp_path / "a.py").write_text("def f(x: int) -> int:\n    return x\n\nf('s')\n")
    async with tether.open_run(tmp_path, options={"lsp_ready_wait": 100}) as run:
        t0 = time.monotonic()
        r = await run.call("lsp", {"action": "diagnostics", "file": "a.py"})
        waited = time.monotonic() - t0
    assert not r.is_error and "reportArgumentType" in r.plain, r.plain
    assert waited < 50, f"answered after {waited:.1f} s: the wait ran to lsp_ready_wait"
