"""Every language ast-grep has built in, by extension, and the patterns agents type, against the ast-grep CLI."""

from __future__ import annotations

import pytest
import tether
from tether_astgrep.grammars import Registry, builtin_grammars
from tether_astgrep.pattern import SOUND_NODE

REGISTRY = Registry.build(builtin_grammars())

# file names of the extensions ast-grep 0.51 maps to each language (its language table)
EXT_OF = {
    "a.bats": "bash",
    "a.zsh": "bash",
    "a.ksh": "bash",
    "a.scss": "css",
    "BUILD.bzl": "python",
    "a.py3": "python",
    "x.gemspec": "ruby",
    "a.rbw": "ruby",
    "build.sbt": "scala",
    "a.sc": "scala",
    "k.cu": "cpp",
    "s.ino": "cpp",
    "a.c++": "cpp",
    "main.tf": "hcl",
    "vars.tfvars": "hcl",
    "a.hcl": "hcl",
    "job.nomad": "hcl",
    "default.nix": "nix",
    "T.sol": "solidity",
    "a.php": "php",
    "a.kts": "kotlin",
    "a.ktm": "kotlin",
    "a.exs": "elixir",
    "a.hs": "haskell",
    "a.xhtml": "html",
    "a.yml": "yaml",
    "a.json": "json",
    "a.lua": "lua",
    "a.swift": "swift",
    "a.cs": "csharp",
    "a.mts": "typescript",
    "a.cjs": "javascript",
    "a.tsx": "tsx",
}


def put(root, name, text):
    p = root / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


async def grep(root, **args):
    async with tether.open_run(root) as run:
        return await run.call("ast_grep", {"max_results": 1000, **args})


def ranges(found):
    return [(m["range"]["byteOffset"]["start"], m["range"]["byteOffset"]["end"]) for m in found]


# -- extensions and inference --------------------------------------------------------------------------


@pytest.mark.parametrize("name, language", sorted(EXT_OF.items()))
async def test_every_extension_ast_grep_knows_infers_the_language(project, name, language):
    assert REGISTRY.for_path(name) == language


@pytest.mark.parametrize(
    "name, source, pattern, expected",
    [
        ("main.tf", 'resource "aws_s3_bucket" "b" {\n  bucket = "x"\n}\n', "bucket = $V", '"x"'),
        ("default.nix", "{ lib, ... }:\n{\n  x = lib.mkIf true { a = 1; };\n}\n", "lib.mkIf $C $B", "true"),
        ("Token.sol", "contract T {\n    event Transfer(uint256 value);\n}\n", "event $E($$$P);", "Transfer"),
        ("app.rb", "def f\n  puts 1\nend\n", "puts $A", "1"),
        ("Main.kt", "fun main() {\n    println(1)\n}\n", "println($A)", "1"),
    ],
)
async def test_folders_of_these_languages_are_searched_without_language(
    project, name, source, pattern, expected
):
    put(project, f"src/{name}", source)
    result = await grep(project, pattern=pattern, path="src")
    assert not result.is_error, result.plain
    assert [next(iter(m["captures"].values())) for m in result.data["matches"]] == [expected]


async def test_configuration_files_beside_the_code_are_searched_as_their_languages(project, sg_binary):
    """As the ast-grep CLI with no -l: package.json as JSON, ci.yml as YAML, where the pattern parses."""
    import json
    import subprocess

    put(project, "a.py", "print(1)\n")
    put(project, "package.json", '{"name": "x"}\n')
    put(project, "ci.yml", "on: push\n")
    done = subprocess.run(
        [sg_binary, "run", "-p", "print($A)", "--json", "."], cwd=project, capture_output=True
    )
    theirs = [(m["file"], m["range"]["byteOffset"]["start"]) for m in json.loads(done.stdout)]
    result = await grep(project, pattern="print($A)")
    assert not result.is_error, result.plain
    assert [(m["file"], m["byte_range"][0]) for m in result.data["matches"]] == theirs == [("a.py", 0)]
    assert result.data["languages"] == {"json": 1, "python": 1, "yaml": 1} and result.data["language"] is None
    assert "python: 1 match in 1 file, json: 0 in 1, yaml: 0 in 1;" in result.plain
    assert (
        "error recovery" not in result.plain
    )  # JSON's reading of it found nothing, so it is not worth saying
    data = await grep(project, pattern='{"name": $N}', language="json")
    assert [m["captures"]["N"] for m in data.data["matches"]] == ['"x"']


# -- patterns agents type: the same matches as ast-grep ----------------------------------------------

CLOSURES_RS = (
    "fn main() {\n    let f = |a, b| a + b;\n    let h = |a: i32, b: i32| -> i32 { a * b };\n"
    "    v.iter().fold(0, |acc, x| acc + x);\n    let g = |x| x * 2;\n}\n"
)
AGREE = [
    (
        "python",
        "@click.command($$$)",
        "import click\n\n@click.command()\ndef a(): pass\n\n@click.command(name='b')\ndef b(): pass\n\n@click.group()\ndef c(): pass\n",
    ),
    (
        "python",
        "@pytest.mark.parametrize($$$)",
        "import pytest\n\n@pytest.mark.parametrize('a', [1])\ndef test_a(a): pass\n",
    ),
    ("python", "@$D", "@staticmethod\ndef f(): pass\n\n@a.b\ndef g(): pass\n"),
    (
        "go",
        "interface{}",
        "package main\nvar x interface{}\nfunc f(a interface{}) map[string]interface{} { return nil }\n",
    ),
    (
        "go",
        "map[string]string",
        "package main\nvar x map[string]string\nfunc f() { y := map[string]string{} }\n",
    ),
    ("go", "[]string", 'package main\nvar x []string\nfunc f(a []string) { b := []string{"a"} }\n'),
    ("go", "import $P", 'package main\n\nimport "fmt"\nimport (\n\t"os"\n)\n'),
    (
        "typescript",
        "import $A from $B",
        "import x from 'y';\nimport {a} from 'b';\nimport * as c from 'd';\n",
    ),
    ("typescript", "import { $$$N } from $M", "import { a, b } from 'm';\nimport x from 'y';\n"),
    ("java", "@Override", 'class A {\n  @Override\n  public String toString() { return ""; }\n}\n'),
    ("java", "List<$T>", "class A {\n  List<String> x;\n  Map<String, Integer> y;\n}\n"),
    ("ruby", "module $M\n  $$$B\nend", "module Foo\n  X = 1\nend\n"),
    ("lua", "$A == nil", "if x == nil then end\nlocal y = a == nil\n"),
    ("csharp", "typeof($T)", "class P {\n  void M() { var t = typeof(int); }\n}\n"),
    ("json", '{"name": $N}', '{"name": "x"}\n'),
    ("rust", "|$A, $B| $C", "fn main() {\n    let f = |a, b| a + b;\n    v.sort_by(|x, y| x.cmp(y));\n}\n"),
    # closure parameters alone: no context parses them, ast-grep reads them through error recovery
    ("rust", "|$A, $B|", CLOSURES_RS),
    ("rust", "|$$A, $$B|", CLOSURES_RS),
    ("javascript", "const", "const a = 1;\nlet b = 2;\n"),
    ("java", "static", "class A {\n  static int x;\n  int y;\n}\n"),
    ("c", "void", "void f(void) {}\nint g() { return 0; }\n"),
    ("cpp", "{ $$$B }", "void f() {\n  { int a = 1; }\n  int b[] = { 1, 2 };\n}\n"),
    ("bash", 'echo "hi $A"', 'echo "hi $name"\necho "hi"\n'),
    ("c", "struct $A", "struct foo { int a; };\nstruct foo x;\nvoid f(struct bar *b) {}\n"),
    # a lone braced list is a function's argument set to ast-grep (not an attribute set)
    (
        "nix",
        "{ $$$A }",
        "{ lib, ... }:\n{\n  x = { a = 1; };\n  f = { pkgs ? null, src }: pkgs;\n  g = y: { z = y; };\n}\n",
    ),
    (
        "nix",
        "{ $$$A, ... }",
        "{ lib, ... }:\n{\n  x = { a = 1; };\n  f = { pkgs ? null, src }: pkgs;\n  g = y: { z = y; };\n}\n",
    ),
    (
        "nix",
        "{ $A, $B }",
        "{ lib, ... }:\n{\n  x = { a = 1; };\n  f = { pkgs ? null, src }: pkgs;\n  g = y: { z = y; };\n}\n",
    ),
]


@pytest.mark.parametrize("lang, pattern, source", AGREE, ids=[f"{c[0]}:{c[1][:30]}" for c in AGREE])
async def test_patterns_agents_type_match_like_ast_grep(project, sg, lang, pattern, source):
    path = put(project, "case" + REGISTRY.by_id[lang].extensions[0], source)
    theirs = ranges(sg(pattern, path, lang))
    assert theirs, "ast-grep found nothing: the case is vacuous"
    result = await grep(project, pattern=pattern, path=path.name, language=lang)
    assert not result.is_error, result.plain
    assert [tuple(m["byte_range"]) for m in result.data["matches"]] == theirs


@pytest.mark.parametrize(
    "pattern, context, expected",
    [
        ("(s, 0, 64)", "arguments or elements", ["(s, 0, 64)"]),
        ("{0, 1}", "arguments or elements", ["{0, 1}"]),
        ("(name string, $B int)", "parameters", ["(name string, value int)"]),
        ("name, shorthand $T", "parameter", ["name, shorthand string"]),
    ],
)
async def test_go_fragments_copied_out_of_larger_code_parse(project, pattern, context, expected):
    put(
        project,
        "f.go",
        (
            "package main\n\nfunc p(name string, value int) {}\n"
            "func q(name, shorthand string) { strconv.ParseInt(s, 0, 64); _ = []int{0, 1} }\n"
        ),
    )
    result = await grep(project, pattern=pattern)
    assert not result.is_error, result.plain
    assert [m["text"] for m in result.data["matches"]] == expected and result.data["context"] == context


FRAGMENTS = [
    # (file, code, pattern, context, the matches' texts): fragments a whole file cannot be, where
    # ast-grep refuses the pattern or finds nothing
    ("a.json", '{"name": "demo", "scripts": {"test": "pytest"}}\n', '"name": $V', "pair", ['"name": "demo"']),
    (
        "a.json",
        '{"name": "demo", "scripts": {"test": "pytest"}}\n',
        '"scripts": {$$$S}',
        "pair",
        ['"scripts": {"test": "pytest"}'],
    ),
    (
        "a.nix",
        '{ pkgs, ... }:\n{\n  name = "demo";\n  inherit pkgs;\n}\n',
        "name = $V;",
        "binding",
        ['name = "demo";'],
    ),
    (
        "a.nix",
        '{ pkgs, ... }:\n{\n  name = "demo";\n  inherit pkgs;\n}\n',
        "inherit $$$A;",
        "binding",
        ["inherit pkgs;"],
    ),
    (
        "a.ex",
        "defmodule D do\n  def f, do: g(timeout: 5, x: 1)\nend\n",
        "timeout: $V",
        "keyword",
        ["timeout: 5"],
    ),
    (
        "a.ex",
        "case File.read(p) do\n  {:ok, body} -> body\n  {:error, e} -> raise e\nend\n",
        "{:ok, $B} -> $B",
        "clause",
        ["{:ok, body} -> body"],
    ),
    (
        "a.html",
        '<div class="box"><a class="box" href="/x">x</a></div>\n',
        'class="box"',
        "attribute",
        ['class="box"'] * 2,
    ),
    (
        "a.sh",
        'case "$1" in\n  start) echo starting ;;\n  stop) echo stopping ;;\nesac\n',
        "start) $$$B ;;",
        "case item",
        ["start) echo starting ;;"],
    ),
]


@pytest.mark.parametrize(
    "name, code, pattern, context, expected", FRAGMENTS, ids=[f"{f[0]}:{f[2]}" for f in FRAGMENTS]
)
async def test_fragments_of_data_markup_and_script_languages_parse(
    project, sg, name, code, pattern, context, expected
):
    path = put(project, name, code)
    assert sg(pattern, path, REGISTRY.for_path(name)) == []  # ast-grep: refused, or nothing found
    result = await grep(project, pattern=pattern, path=name)
    assert not result.is_error, result.plain
    assert [m["text"] for m in result.data["matches"]] == expected and context in result.data["contexts"]


async def test_a_json_pair_of_two_metavariables_matches_like_ast_grep(project, sg):
    path = put(project, "a.json", '{"name": "demo", "deps": [1, {"x": true}]}\n')
    theirs = ranges(sg("$K: $V", path, "json"))
    result = await grep(project, pattern="$K: $V", path="a.json")
    assert len(theirs) == 3 and [tuple(m["byte_range"]) for m in result.data["matches"]] == theirs
    assert [m["captures"]["K"] for m in result.data["matches"]] == ['"name"', '"deps"', '"x"']


async def test_go_fragment_the_whole_file_reads_as_a_type_is_the_type(project, sg):
    source = "package main\nvar b bytes.Buffer\nfunc f() { x := bytes.Buffer{}; y := s.Buffer }\n"
    path = put(project, "b.go", source)
    theirs = ranges(sg("$A.Buffer", path, "go"))  # the type only
    result = await grep(project, pattern="$A.Buffer")
    ours = [tuple(m["byte_range"]) for m in result.data["matches"]]
    # the whole file is an ERROR around one sound node, a qualified type: ast-grep's reading, and only it
    assert sorted(ours) == sorted(theirs) and theirs
    assert result.data["contexts"] == [SOUND_NODE]


async def test_css_colour_alone_is_the_id_selector_ast_grep_reads(project, sg):
    source = "a { color: #fff; }\nb { background: #000; border-color: #fff; }\n#fff { x: y }\n"
    path = put(project, "a.css", source)
    theirs = ranges(sg("#fff", path, "css"))  # the whole file is an ERROR around an id selector
    result = await grep(project, pattern="#fff")
    assert theirs and sorted(tuple(m["byte_range"]) for m in result.data["matches"]) == sorted(theirs)
    assert result.data["contexts"] == [SOUND_NODE]
    # the values, as a declaration: a colour compared by its text (ast-grep's matches `#000` too)
    values = await grep(project, pattern="$P: #fff")
    assert [m["start"] for m in values.data["matches"]] == [
        {"line": 1, "column": 5},
        {"line": 2, "column": 23},
    ]


async def test_ts_field_pattern_finds_interface_type_literal_and_class_fields(project):
    put(
        project,
        "o.ts",
        "interface O {\n  timeout?: number;\n}\ntype P = { timeout?: string };\nclass C {\n  timeout?: Date;\n}\n",
    )
    result = await grep(project, pattern="timeout?: $T")
    assert not result.is_error, result.plain
    assert [m["captures"]["T"] for m in result.data["matches"]] == ["number", "string", "Date"]


async def test_csharp_null_coalescing_captures_both_sides(project, sg):
    """ast-grep parses `$A ?? $B` with an ERROR node and captures only $A; tether reads an expression."""
    path = put(project, "p.cs", "class P {\n  void M() { var t = a ?? b; }\n}\n")
    assert [
        set((m.get("metaVariables") or {}).get("single", {})) for m in sg("$A ?? $B", path, "csharp")
    ] == [{"A"}]
    result = await grep(project, pattern="$A ?? $B")
    assert [m["captures"] for m in result.data["matches"]] == [{"A": "a", "B": "b"}]


async def test_a_lone_list_metavariable_is_refused_with_the_reason(project, sg):
    put(project, "a.py", "f(1)\n")
    result = await grep(project, pattern="$$$A")
    assert result.is_error and "means nothing on its own" in result.plain and "f($$$ARGS)" in result.plain


async def test_the_refusal_names_each_context_once(project):
    put(project, "a.py", "f(1)\n")
    result = await grep(project, pattern="f(((")
    assert result.is_error
    assert "(statement, class member, clause, decorator)" in result.plain, result.plain


@pytest.mark.parametrize("lang, source", [("php", "<?php\n$x = 1;\necho $x;\n"), ("python", "x = f(1)\n")])
async def test_a_bare_unnamed_metavariable_matches_tokens_too(project, sg, lang, source):
    path = put(project, "case" + REGISTRY.by_id[lang].extensions[0], source)
    theirs = ranges(sg("$$A", path, lang))
    result = await grep(project, pattern="$$A", path=path.name)
    assert [tuple(m["byte_range"]) for m in result.data["matches"]] == theirs


@pytest.mark.parametrize(
    "name, pattern, source",
    [
        ("a.css", "{$A}", "a { color: red }\n.b { x: 1; y: 2 }\n@media (x) { a { c: d } }\n"),
        ("a.css", "($A)", "@media (min-width: 1px) { a { b: calc(1px) } }\n"),
        ("a.html", "</p>", "<div><p>one</p><p>two</p></div>\n"),
        ("a.html", "<em>", "<p><em>x</em> <b>y</b></p>\n"),
        ("a.css", "d-lg-table-cell", ".d-lg-table-cell { display: table-cell }\n"),
    ],
)
async def test_patterns_read_through_error_recovery_match_like_ast_grep(project, sg, name, pattern, source):
    path = put(project, name, source)
    theirs = ranges(sg(pattern, path, REGISTRY.for_path(name)))
    result = await grep(project, pattern=pattern, path=name)
    assert not result.is_error, result.plain
    assert theirs and sorted({tuple(m["byte_range"]) for m in result.data["matches"]}) == sorted(theirs)
    assert "error recovery" in result.plain.splitlines()[0]


@pytest.mark.parametrize("pattern", ["($A)", "React.$A"])
async def test_a_typescript_statement_pattern_is_not_read_as_a_type_too(project, sg, pattern):
    source = "const a = (x);\nlet b: (string | number) = f(y);\ntype T = React.FC;\nReact.useState(1);\n"
    path = put(project, "a.ts", source)
    theirs = ranges(sg(pattern, path, "typescript"))
    result = await grep(project, pattern=pattern, path="a.ts")
    assert theirs and sorted(tuple(m["byte_range"]) for m in result.data["matches"]) == sorted(theirs)
