"""ast-grep's rule objects (`rule` instead of `pattern`), against `ast-grep scan --inline-rules` on the same files."""

from __future__ import annotations

import json

import pytest
import tether
import yaml
from tether.testing import assert_model_error

PY = """import os


def read(p):
    f = open(p)
    with open(p) as g:
        return g.read() + f.read()


async def loop(items):
    for x in items:
        await x.fetch()
    await done()
    while True:
        await tick()


def outer():
    x = 1
    print(x)
    y = 2
    print(y)  # note
    print("done")
"""

JS = """function f() {
  const a = 1;
  console.log(a);
  const b = 2;
  console.log(b); // note
  console.log("done");
}
async function g(items) {
  for (const x of items) {
    await x.fetch();
  }
  await done();
}
class C {
  m() { return this.x; }
}
"""

GO = """package main

import "fmt"

func a() {
\tfmt.Println("a")
\tdefer f.Close()
}

func b(xs []int) {
\tfor _, x := range xs {
\t\tgo work(x)
\t}
\tgo work(0)
}

var v = fmt.Sprint(1)
"""

SOURCES = {"python": ("a.py", PY), "javascript": ("a.js", JS), "go": ("a.go", GO)}

# (language, rule): every key of the schema at least once
RULES = [
    ("python", {"pattern": "open($F)", "not": {"inside": {"kind": "with_statement", "stopBy": "end"}}}),
    ("python", {"pattern": "open($F)", "inside": {"kind": "with_statement", "stopBy": "end"}}),
    (
        "python",
        {
            "pattern": "await $X",
            "inside": {"any": [{"kind": "for_statement"}, {"kind": "while_statement"}], "stopBy": "end"},
        },
    ),
    ("python", {"pattern": "print($A)", "inside": {"kind": "function_definition", "stopBy": "end"}}),
    ("python", {"kind": "function_definition", "has": {"pattern": "print($A)", "stopBy": "end"}}),
    (
        "python",
        {"kind": "function_definition", "has": {"kind": "identifier", "field": "name", "regex": "^lo"}},
    ),
    ("python", {"kind": "call", "regex": "^open"}),
    ("python", {"all": [{"kind": "call"}, {"regex": "read"}]}),
    ("python", {"any": [{"pattern": "print($A)"}, {"pattern": "open($A)"}]}),
    ("python", {"rule": {"pattern": "print($A)"}, "constraints": {"A": {"kind": "identifier"}}}),
    ("python", {"rule": {"pattern": "print($A)"}, "constraints": {"A": {"regex": "^y"}}}),
    ("python", {"rule": {"matches": "printing"}, "utils": {"printing": {"pattern": "print($$$)"}}}),
    (
        "python",
        {
            "pattern": "await $X",
            "inside": {"kind": "for_statement", "stopBy": {"kind": "function_definition"}},
        },
    ),
    ("python", {"pattern": {"context": "def f(): $A = $B", "selector": "assignment"}}),
    ("python", {"pattern": {"context": "print($A)", "strictness": "signature"}}),
    ("python", {"kind": "identifier", "inside": {"kind": "call", "field": "function"}}),
    (
        "python",
        {"kind": "expression_statement", "follows": {"kind": "expression_statement", "stopBy": "end"}},
    ),
    ("python", {"kind": "expression_statement", "precedes": {"kind": "expression_statement"}}),
    (
        "javascript",
        {"kind": "expression_statement", "follows": {"kind": "lexical_declaration", "stopBy": "end"}},
    ),
    ("javascript", {"kind": "lexical_declaration", "precedes": {"kind": "expression_statement"}}),
    ("javascript", {"pattern": "await $X", "not": {"inside": {"kind": "for_in_statement", "stopBy": "end"}}}),
    ("javascript", {"kind": "member_expression", "inside": {"kind": "method_definition", "stopBy": "end"}}),
    ("javascript", {"kind": "statement_block", "has": {"kind": "expression_statement"}}),
    ("javascript", {"pattern": {"context": "console.log($A)", "strictness": "ast"}}),
    ("javascript", {"pattern": {"context": "console.log($A)", "strictness": "relaxed"}}),
    ("javascript", {"pattern": {"context": "console.log($A)", "strictness": "cst"}}),
    ("javascript", {"pattern": {"context": "class A { $M() { $$$B } }", "selector": "method_definition"}}),
    ("javascript", {"kind": "call_expression", "has": {"kind": "string", "stopBy": "end"}}),
    ("go", {"pattern": "go $F($$$A)", "inside": {"kind": "for_statement", "stopBy": "end"}}),
    ("go", {"kind": "call_expression", "not": {"inside": {"kind": "function_declaration", "stopBy": "end"}}}),
    ("go", {"kind": "defer_statement", "follows": {"kind": "expression_statement"}}),
    (
        "go",
        {
            "kind": "call_expression",
            "regex": "^fmt[.]",
            "inside": {"kind": "function_declaration", "stopBy": "end"},
        },
    ),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("rules")
    for name, text in SOURCES.values():
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize("lang, rule", RULES, ids=[f"{i}:{lang}" for i, (lang, _) in enumerate(RULES)])
async def test_rule_matches_like_ast_grep_scan(files, sg_scan, lang, rule):
    name = SOURCES[lang][0]
    config = {"language": lang, **(rule if "rule" in rule else {"rule": rule})}
    theirs = sorted(
        (m["range"]["byteOffset"]["start"], m["range"]["byteOffset"]["end"])
        for m in sg_scan(config, files / name)
    )
    assert theirs, "ast-grep found nothing: the case is vacuous"
    async with tether.open_run(files) as run:
        result = await run.call("ast_grep", {"rule": rule, "path": name, "max_results": 1000})
    assert not result.is_error, result.plain
    assert sorted(tuple(m["byte_range"]) for m in result.data["matches"]) == theirs
    assert result.data["context"] == "rule"
    assert (
        result.plain.splitlines()[0]
        == f"{len(theirs)} match{'es' if len(theirs) != 1 else ''} in 1 file ({lang}, 1 file searched)"
    )


async def test_rule_captures_and_a_folder_search(project):
    (project / "a.py").write_text(PY)
    (project / "b.py").write_text("def h():\n    print(h)\n")
    rule = {"pattern": "print($A)", "inside": {"kind": "function_definition", "stopBy": "end"}}
    async with tether.open_run(project) as run:
        result = await run.call("ast_grep", {"rule": rule})
    assert [(m["file"], m["captures"]["A"]) for m in result.data["matches"]] == [
        ("a.py", "x"),
        ("a.py", "y"),
        ("a.py", '"done"'),
        ("b.py", "h"),
    ]


async def test_rule_rewrite_agrees_with_ast_grep_fix(project, sg_scan):
    rule = {"pattern": "open($F)", "not": {"inside": {"kind": "with_statement", "stopBy": "end"}}}
    (project / "ours.py").write_text(PY)
    (project / "theirs.py").write_text(PY)
    sg_scan(
        {"language": "python", "rule": rule, "fix": "open($F, encoding='utf-8')"},
        project / "theirs.py",
        update=True,
    )
    async with tether.open_run(project) as run:
        staged = await run.call(
            "ast_edit", {"rule": rule, "rewrite": "open($F, encoding='utf-8')", "path": "ours.py"}
        )
        assert not staged.is_error, staged.plain
        assert staged.data["replacements"] == 1
        await run.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
    assert (project / "ours.py").read_text() == (project / "theirs.py").read_text() != PY


# a rule as text: the YAML of an ast-grep rule file (what its docs show), or JSON
TEXT_RULES = [
    "rule:\n  pattern: open($F)\n  not:\n    inside:\n      kind: with_statement\n      stopBy: end\n",
    "rule:\n  kind: call\n  has:\n    field: function\n    regex: ^(open|print)$\n",
    "rule:\n  pattern: print($A)\nconstraints:\n  A: {kind: identifier}\n",
    "rule:\n  matches: awaited\nutils:\n  awaited:\n    pattern: await $X\n    inside: {kind: for_statement, stopBy: end}\n",
    '{"rule": {"pattern": "print($A)", "inside": {"kind": "function_definition", "stopBy": "end"}}}',
]


@pytest.mark.parametrize("text", TEXT_RULES, ids=range(len(TEXT_RULES)))
async def test_rule_as_yaml_or_json_text_matches_like_ast_grep_scan(files, sg_scan, text):
    config = "id: t\nlanguage: python\n" + (
        text if not text.startswith("{") else "rule: " + json.dumps(json.loads(text)["rule"]) + "\n"
    )
    theirs = sorted(
        (m["range"]["byteOffset"]["start"], m["range"]["byteOffset"]["end"])
        for m in sg_scan(config, files / "a.py")
    )
    assert theirs, "ast-grep found nothing: the case is vacuous"
    async with tether.open_run(files) as run:
        result = await run.call("ast_grep", {"rule": text, "path": "a.py", "max_results": 1000})
        assert not result.is_error, result.plain
        assert sorted(tuple(m["byte_range"]) for m in result.data["matches"]) == theirs
        as_object = await run.call(
            "ast_grep", {"rule": json.loads(json.dumps(yaml.safe_load(text))), "path": "a.py"}
        )
        assert as_object.data["total"] == len(theirs)


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            {"rule": {"pattern": "open($F)", "insde": {"kind": "with_statement"}}},
            "unknown key 'insde' (did you mean 'inside'?)",
        ),
        ({"rule": {"kind": "with_stmt"}}, "'with_stmt' is no node kind of the python grammar (did you mean"),
        (
            {"rule": {"pattern": "open($F)", "inside": {"kind": "call", "stopBy": "forever"}}},
            'rule.inside.stopBy: give "neighbor", "end" or a rule',
        ),
        ({"rule": {"kind": "call", "regex": "(("}}, "rule.regex: not a regular expression"),
        ({"rule": {"regex": "^open"}}, "does not say which kind of node it matches"),
        ({"rule": {"matches": "nope"}}, "rule.matches: no utility rule 'nope' in utils"),
        ({"rule": {"pattern": "open(("}}, "rule.pattern: the pattern 'open((' does not parse"),
        (
            {"rule": {"pattern": {"context": "print($A)", "strictness": "loose"}}},
            "rule.pattern.strictness: 'loose' is none of",
        ),
        ({"rule": {"kind": "call", "stopBy": "end"}}, "stopBy and field belong inside a relational rule"),
        (
            {"rule": {"kind": "call", "has": {"kind": "identifier", "field": "nofield"}}},
            "rule.has.field: 'nofield' is no field",
        ),
        ({"rule": {}}, "rule: give a JSON object"),
        ({"rule": "pattern: [open\n"}, "rule: the text is not valid YAML (line 2, column 1: expected ','"),
        (
            {"rule": '{"pattern": "open($F)" "kind": "call"}'},
            "rule: the text is not valid JSON (line 1, column 24",
        ),
        ({"rule": "open($F)"}, "rule: the text is a string, not an object"),
        ({"rule": "- kind: call"}, "rule: the text is a list, not an object"),
        ({"rule": "kind: with_stmt"}, "'with_stmt' is no node kind of the python grammar"),
        ({"pattern": "print($A)", "rule": {"kind": "call"}}, "give either pattern"),
        ({}, "give either pattern"),
    ],
)
async def test_bad_rules_are_one_clear_paragraph(project, args, expected):
    (project / "a.py").write_text(PY)
    async with tether.open_run(project) as run:
        result = await run.call("ast_grep", args)
        assert_model_error(result, expected)
        assert "\n" not in result.plain.strip()
        edit = await run.call("ast_edit", {**args, "rewrite": "x"})
        assert edit.is_error and expected in edit.plain, edit.plain


GO = 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hi")\n\tprint(1)\n}\n'


@pytest.mark.parametrize("said", ["go", "Go", "golang"])
async def test_a_rule_files_language_says_what_to_search(project, said):
    """`language:` of a rule file picks the files, as the language argument would (ast-grep's names too)."""
    (project / "a.py").write_text(PY)
    (project / "m.go").write_text(GO)
    text = f"id: t\nlanguage: {said}\nrule:\n  pattern: print($A)\n"
    async with tether.open_run(project) as run:
        result = await run.call("ast_grep", {"rule": text})
        assert not result.is_error, result.plain
        assert result.data["language"] == "go"
        assert [(m["file"], m["captures"]["A"]) for m in result.data["matches"]] == [("m.go", "1")]
        agreed = await run.call("ast_grep", {"rule": text, "language": "go", "path": "m.go"})
        assert agreed.data["total"] == 1, agreed.plain
        python = await run.call("ast_grep", {"rule": text.replace(said, "py"), "path": "a.py"})
        assert python.data["language"] == "python" and python.data["total"] == 3, python.plain


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            {"rule": "language: go\nrule:\n  pattern: print($A)\n", "path": "a.py"},
            "the rule says language: go, but 'a.py' is a python file; fix the rule's language, or pass "
            "language='go' to parse it as go all the same",
        ),
        (
            {"rule": {"language": "go", "rule": {"pattern": "print($A)"}}, "language": "python"},
            "the rule says language: go, but the language argument is 'python'; drop one of them",
        ),
        (
            {"rule": '{"language": "rust", "rule": {"pattern": "print($A)"}}'},
            "the rule says language: rust, but there are no rust files under '.' (after .gitignore)",
        ),
        (
            {"rule": "language: klingon\nrule:\n  kind: call\n"},
            "the rule's language: unknown language 'klingon'",
        ),
        ({"rule": "language: 3\nrule:\n  kind: call\n"}, "rule: language is a number; give a grammar id"),
    ],
)
async def test_a_rule_files_language_that_disagrees_is_refused(project, args, expected):
    (project / "a.py").write_text(PY)
    async with tether.open_run(project) as run:
        for tool, extra in (("ast_grep", {}), ("ast_edit", {"rewrite": "x"})):
            result = await run.call(tool, {**args, **extra})
            assert_model_error(result, expected)
            assert "\n" not in result.plain.strip()
    assert (project / "a.py").read_text() == PY
