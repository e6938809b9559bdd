"""Conformance with ast-grep (the anchor): the same pattern on the same source finds the same matches.

Each case runs the ast-grep CLI and tether's ast_grep on one file and compares the match ranges
(byte offsets) and every non-empty capture. Rewrites compare ast-grep's updated file with the file
tether writes after ast_edit + resolve accept.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import tether
from tether_astgrep.hookspecs import tether_astgrep_parsers

EXT = {
    "python": "py",
    "javascript": "js",
    "typescript": "ts",
    "tsx": "tsx",
    "go": "go",
    "rust": "rs",
    "php": "php",
    "solidity": "sol",
    "nix": "nix",
    "bash": "sh",
    "css": "css",
    "csharp": "cs",
    "kotlin": "kt",
    "lua": "lua",
    "swift": "swift",
    "ruby": "rb",
    "scala": "scala",
    "elixir": "ex",
    "haskell": "hs",
    "hcl": "tf",
    "json": "json",
    "yaml": "yaml",
    "html": "html",
}

# (language, pattern, source)
SEARCH = [
    # -- python
    ("python", "print($A)", "print(1)\nprint( 2 )\nprint(\n    3)\nprint()\nprint(1, 2)\n"),
    ("python", "print($A)", 'x = "print(1)"\n# print(2)\ny = f"{print}(3)"\nprint(4)\n'),
    ("python", "print($A)", "print(print(1))\nprint(len(print(2)))\n"),
    ("python", "$X.append($Y)", "a.append(1)\nb.c.append(d(2))\nappend(3)\nx.append(1, 2)\n"),
    ("python", "foo($$$ARGS)", "foo()\nfoo(1)\nfoo(1, 2, *a, **k)\nbar(1)\n"),
    ("python", "foo($A, $$$REST)", "foo(1)\nfoo(1, 2, 3)\nfoo()\n"),
    ("python", "foo($$$A, last)", "foo(last)\nfoo(1, last)\nfoo(1, 2)\nfoo(1, last, 2)\n"),
    ("python", "foo($$$A, b, $$$C)", "foo(b)\nfoo(a, b)\nfoo(a, b, c)\nfoo(a, c)\n"),
    ("python", "$A == $A", "x == x\nx == y\nf(1) == f( 1 )\na.b == a . b\n"),
    (
        "python",
        "def $F($$$ARGS): $$$BODY",
        "def f(a, b):\n    return 1\n\nasync def g(): pass\n\ndef h() -> int:\n    pass\n\nclass C:\n    def m(self):\n        def inner(): pass\n",
    ),
    ("python", "foo($A, $B)", "foo(a, # first\n    b)\nfoo(a,b)\nfoo(a, b, c)\n"),
    ("python", "foo(a, b)", "foo(a, # note\n    b)\nfoo(a, b)\n"),
    ("python", "if $C:\n    $$$B", "if x:\n    a()\n    b()\nif y: pass\nif z:\n    c()\nelse:\n    d()\n"),
    (
        "python",
        "class $C($$$BASES):\n    $$$BODY",
        "class A(B, C):\n    x = 1\n\nclass D:\n    pass\n\nclass E(F):\n    def g(self): pass\n",
    ),
    ("python", "return $A", "def f():\n    return 1\n    return\n    return a, b\n"),
    ("python", "$A = $B", "x = 1\ny: int = 2\na, b = 1, 2\nc = d = 3\nz += 1\n"),
    ("python", "lambda $$$A: $B", "f = lambda: 0\ng = lambda x, y: x + y\n"),
    (
        "python",
        "with open($F) as $H:\n    $$$B",
        "with open('a') as f:\n    f.read()\nwith open('b', 'w') as g:\n    pass\n",
    ),
    ("python", "[$X for $X in $Y]", "[a for a in b]\n[a for c in b]\n[f(a) for a in b]\n"),
    ("python", "import $M", "import os\nimport os.path\nimport a, b\nfrom x import y\n"),
    ("python", "$F(x=$V)", "f(x=1)\ng(y=1)\nh(x=1, y=2)\n"),
    ("python", "await $X", "async def f():\n    await g()\n    x = await h(1)\n"),
    ("python", "{'a': $V}", "d = {'a': 1}\ne = {'a': 1, 'b': 2}\nf = {'b': 1}\n"),
    ("python", "$A.$B($$$)", "a.b()\nc.d(1, 2)\ne()\n"),
    ("python", "raise $E($$$)", "raise ValueError('x')\nraise KeyError\nraise E()\n"),
    ("python", "assert $A, $B", "assert x, 'msg'\nassert y\n"),
    (
        "python",
        "try:\n    $$$A\nexcept $E:\n    $$$B",
        "try:\n    a()\nexcept ValueError:\n    b()\ntry:\n    c()\nexcept (A, B) as e:\n    d()\n",
    ),
    # -- javascript
    ("javascript", "console.log($$$A)", "console.log();\nconsole.log(1, 'two', x);\nconsole.error(1);\n"),
    ("javascript", "foo($A, b)", "foo(a, /* why */ b);\nfoo(a, b);\nfoo(a, c);\n"),
    ("javascript", "foo(a, bar())", "foo(a, /* c */ bar());\nfoo(a, bar());\n"),
    ("python", "f(a, b)", "f(a, \\\n  b)\nf(a, \\\n  g())\nfor x in \\\n  y:\n    pass\n"),
    ("python", "for $X in $Y: $$$B", "for x in \\\n  y:\n    pass\n"),
    ("python", "$F($$$A)", "x = re.compile \\\n  (1)\ny = g(2)\n"),
    ("javascript", "const $A = $B", "const a = 1;\nlet b = 2;\nconst c = 3, d = 4;\n"),
    ("javascript", "$A === $A", "x === x;\nx === y;\nf(1) === f(1);\n"),
    (
        "javascript",
        "function $F($$$P) { $$$B }",
        "function f(a, b) { return a; }\nfunction g() {}\nconst h = function () {};\n",
    ),
    ("javascript", "($P) => $F($P)", "(x) => bar(x);\n(x) => bar(y);\n"),
    ("javascript", "bar($A)", 'foo("bar(1)");\nbar(2);\n// bar(3)\n'),
    ("javascript", "new $C($$$)", "new Map();\nnew Set([1, 2]);\nMap();\n"),
    ("javascript", "if ($C) { $$$B }", "if (a) { b(); }\nif (c) d();\nif (e) { f(); } else { g(); }\n"),
    (
        "javascript",
        "try {\n  $$$A\n} catch ($E) {\n  $$$B\n}",
        "try {\n  a();\n} catch (e) {\n  b();\n}\ntry { c(); } finally { d(); }\n",
    ),
    ("javascript", "await $P", "async function f() {\n  await g();\n  const x = await h;\n}\n"),
    ("javascript", "$A && $A.b", "x && x.b;\nx && y.b;\n"),
    ("javascript", "$A.then($B)", "p.then(f);\np.then(f, g);\nq.catch(h);\n"),
    # -- typescript
    ("typescript", "let $A: $T = $V", "let a: number = 1;\nlet b = 2;\nlet c: string[] = [];\n"),
    (
        "typescript",
        "function $F($$$P): $R { $$$B }",
        "function f(a: number): string { return ''; }\nfunction g() {}\n",
    ),
    ("typescript", "interface $I { $$$B }", "interface A { x: number }\ninterface B extends A {}\n"),
    ("typescript", "$A as $T", "const x = y as string;\nconst z = <string>w;\n"),
    ("typescript", "type $T = $U", "type A = string;\ntype B<T> = T[];\n"),
    ("typescript", "foo<$T>($A)", "foo<string>(x);\nfoo(x);\n"),
    ("typescript", "enum $E { $$$M }", "enum Color { Red, Green }\nconst enum D { A = 1 }\n"),
    ("typescript", "$A?.$B", "a?.b;\na.b;\nc?.d?.e;\n"),
    # -- go
    (
        "go",
        "if err != nil { $$$B }",
        "package main\nfunc f() error {\n\tif err != nil {\n\t\treturn err\n\t}\n\tif x != nil { return nil }\n\treturn nil\n}\n",
    ),
    (
        "go",
        "func $F($$$P) $R { $$$B }",
        "package main\nfunc f(a int) int { return a }\nfunc g() {}\nfunc h() (int, error) { return 0, nil }\n",
    ),
    ("go", "$A := $B", "package main\nfunc f() {\n\ta := 1\n\tb, c := 2, 3\n\td = 4\n}\n"),
    (
        "go",
        "for $I := 0; $I < $N; $I++ { $$$B }",
        "package main\nfunc f() {\n\tfor i := 0; i < n; i++ {\n\t\tg(i)\n\t}\n\tfor j := 0; k < n; j++ {}\n}\n",
    ),
    ("go", "return $A, nil", "package main\nfunc f() (int, error) {\n\treturn 1, nil\n\treturn 0, err\n}\n"),
    ("go", "defer $F()", "package main\nfunc f() {\n\tdefer g()\n\tdefer h(1)\n}\n"),
    ("go", "$X.Close()", "package main\nfunc f() {\n\tf.Close()\n\tdefer g.Close()\n\tf.Open()\n}\n"),
    ("go", "go $F($$$A)", "package main\nfunc f() {\n\tgo g(1, 2)\n\tg(3)\n}\n"),
    ("go", "$A == $A", "package main\nfunc f() bool { return x == x || x == y }\n"),
    # -- rust
    ("rust", "let $A = $B;", "fn main() {\n    let x = 1;\n    let mut y = 2;\n    let z: u8 = 3;\n}\n"),
    ("rust", "println!($$$A)", 'fn main() {\n    println!("{}", x);\n    println!();\n    print!("x");\n}\n'),
    (
        "rust",
        "fn $F($$$P) -> $R { $$$B }",
        "fn f(a: u8) -> u8 { a }\nfn g() {}\nfn h() -> Result<(), E> { Ok(()) }\n",
    ),
    (
        "rust",
        "$A.unwrap()",
        'fn main() {\n    let a = b.unwrap();\n    c.d().unwrap();\n    e.expect("x");\n}\n',
    ),
    ("rust", "match $X { $$$ARMS }", "fn main() {\n    match x { 1 => a(), _ => b() }\n}\n"),
    ("rust", "impl $T for $U { $$$B }", "impl Display for Foo {\n    fn fmt(&self) {}\n}\nimpl Foo {}\n"),
    ("rust", "Some($A)", "fn main() {\n    let a = Some(1);\n    if let Some(x) = y {}\n    None;\n}\n"),
    ("rust", "$A?", "fn f() -> R {\n    let a = g()?;\n    h(x?)\n}\n"),
    ("rust", "use $P;", "use std::fmt;\nuse a::{b, c};\n"),
    (
        "rust",
        "if let Some($X) = $Y { $$$B }",
        "fn main() {\n    if let Some(x) = y { z(x); }\n    if let Ok(x) = y {}\n}\n",
    ),
    # -- the other languages ast-grep has built in (PHP as PHP code, Solidity/bash with `$`, Nix with `_`)
    ("php", "$A->foo($B)", "<?php\n$x->foo(1);\n$y->bar(2);\nfunction f($a) { return $a->foo(3); }\n"),
    ("php", "function $F($$$P) { $$$B }", "<?php\nfunction f($a) { return 1; }\nfunction g() {}\n"),
    ("php", "echo $A;", "<?php\necho 'hi';\necho $x;\nprint 1;\n"),
    (
        "solidity",
        "event $E($$$P);",
        "contract C {\n    event Transfer(address indexed from, uint256 value);\n    function f() public { emit Transfer(a, 1); }\n}\n",
    ),
    ("nix", "lib.mkIf $C $B", "{ config, lib, ... }:\n{\n  x = lib.mkIf config.enable { a = 1; };\n}\n"),
    ("nix", "$A + $B", "{ x = 1 + 2; y = a + b; }\n"),
    ("bash", 'echo "hi $A"', 'echo "hi $name"\necho "hi"\nfoo $x\n'),
    ("bash", "foo $A", "foo $x\nfoo bar\nbar x\n"),
    ("bash", "if [ $A ]; then $$$B; fi", "if [ -f x ]; then echo a; fi\n"),
    ("css", "$S { $$$B }", "a { color: red; }\n.b { margin: 0; }\n"),
    (
        "csharp",
        "Console.WriteLine($A)",
        'class P {\n  static void Main() {\n    Console.WriteLine("hi");\n    Console.Write(1);\n  }\n}\n',
    ),
    ("csharp", "typeof($T)", "class P {\n  void M() { var t = typeof(int); }\n}\n"),
    ("kotlin", "println($A)", 'fun main() {\n    println("hi")\n    print(1)\n}\n'),
    ("kotlin", "val $A = $B", "fun main() {\n    val x = 1\n    var y = 2\n}\n"),
    ("kotlin", "fun $F($$$P) { $$$B }", "fun main() {\n}\nfun g(a: Int) { }\n"),
    ("lua", "print($A)", "print('hi')\nlocal x = print(1)\n"),
    ("lua", "$A == nil", "if x == nil then end\nlocal y = a == nil\n"),
    ("lua", "local $A = $B", "local x = 1\nlocal y, z = 2, 3\n"),
    ("swift", "print($A)", 'func f() {\n    print("hi")\n}\nprint(1)\n'),
    ("swift", "let $A = $B", "let x = 1\nvar y = 2\n"),
    ("swift", "func $F($$$P) { $$$B }", "func f() {}\nfunc g(a: Int) { print(a) }\n"),
    ("ruby", "puts $A", 'puts 1\nputs "x"\nprint 2\n'),
    ("ruby", "def $M($$$P)\n  $$$B\nend", "def a(x)\n  x\nend\ndef b\nend\n"),
    ("ruby", "module $M\n  $$$B\nend", "module Foo\n  X = 1\nend\n"),
    ("ruby", "$A.each do |$X|\n  $$$B\nend", "a.each do |x|\n  p x\nend\n"),
    (
        "scala",
        "println($A)",
        'object O {\n  def main(args: Array[String]): Unit = {\n    println("hi")\n  }\n}\n',
    ),
    ("scala", "def $F($$$P) = $B", "object O {\n  def f(x: Int) = x + 1\n}\n"),
    ("elixir", "IO.puts($A)", 'defmodule M do\n  def f, do: IO.puts("hi")\nend\n'),
    ("elixir", "def $F($$$A) do\n  $$$B\nend", "defmodule M do\n  def f(x) do\n    x\n  end\nend\n"),
    ("haskell", "putStrLn $A", 'main = putStrLn "hi"\n'),
    ("hcl", "bucket = $V", 'resource "aws_s3_bucket" "b" {\n  bucket = "x"\n}\n'),
    ("json", '{"name": $N}', '{"name": "x"}\n'),
    ("yaml", "name: $N", "name: x\nversion: 1\n"),
    ("html", "<div>$$$A</div>", "<html><div>hi</div><div><p>x</p></div></html>\n"),
]

# (language, pattern, rewrite, source): ast-grep's rewrite and tether's accepted edit must agree
REWRITE = [
    ("python", "print($A)", "log($A)", "print(1)\nx = print( 2 )\n"),
    ("python", "$X.append($Y)", "$X.extend([$Y])", "a.append(1)\nfor i in r:\n    b.c.append(f(i))\n"),
    (
        "python",
        "def $F($$$A):\n    $$$B",
        "async def $F($$$A):\n    $$$B",
        "class C:\n    def m(self, x):\n        if x:\n            return 1\n        return 2\n",
    ),
    ("python", "foo($$$ARGS)", "bar(\n    $$$ARGS\n)", "def f():\n    foo(1,\n        2)\n"),
    (
        "javascript",
        "console.log($$$A)",
        "logger.info($$$A)",
        "console.log(1, 'a');\nfunction f() {\n  console.log(x);\n}\n",
    ),
    ("typescript", "let $A: $T = $V", "const $A: $T = $V", "let a: number = 1\nlet b: string = 'x'\n"),
    ("go", "$A.Close()", "_ = $A.Close()", "package main\nfunc f() {\n\tf.Close()\n}\n"),
    ("rust", "$A.unwrap()", '$A.expect("checked")', "fn main() {\n    let a = b.unwrap();\n}\n"),
    (
        "python",
        "with $A:\n    $$$B",
        "try:\n    with $A:\n        $$$B\nfinally:\n    pass",
        "def f():\n    with lock:\n        a = 1\n        if a:\n            b()\n",
    ),
    (
        "python",
        "$F($$$A)",
        "wrap(\n    $F,\n    $$$A,\n)",
        "class C:\n    def m(self):\n        x = call(1,\n                 2)\n",
    ),
    (
        "javascript",
        "if ($C) { $$$B }",
        "if (!($C)) { return; }\n$$$B",
        "function f() {\n  if (x) {\n    a();\n    b();\n  }\n}\n",
    ),
    (
        "rust",
        "match $X { $$$A }",
        "match $X {\n    $$$A\n}",
        "fn f() {\n    match x { 1 => a(),\n        _ => b() }\n}\n",
    ),
    # $$$B takes the else clause along; its lines keep their indentation relative to the capture's first
    ("python", "if $C:\n    $$$B", "while $C:\n    $$$B", "if x:\n    a()\nelse:\n    b()\n"),
    (
        "python",
        "if $C:\n    $$$B",
        "if $C:\n        $$$B",
        "def f():\n    if x:\n        a()\n    else:\n        b()\n",
    ),
    ("php", "$A->foo($B)", "$A->bar($B, 2)", "<?php\n$x->foo(1);\nfunction f($a) { return $a->foo(3); }\n"),
    (
        "solidity",
        "event $E($$$P);",
        "event $E($$$P) anonymous;",
        "contract C {\n    event Transfer(uint256 value);\n}\n",
    ),
    (
        "nix",
        "lib.mkIf $C $B",
        "lib.mkIf ($C) $B",
        "{ config, lib, ... }:\n{\n  x = lib.mkIf config.enable { a = 1; };\n}\n",
    ),
    ("bash", "echo $A", "printf '%s\\n' $A", "echo hi\nif true; then\n  echo $x\nfi\n"),
    ("ruby", "puts $A", "logger.info($A)", "def f\n  puts 1\nend\n"),
    ("kotlin", "println($A)", "log($A)", 'fun main() {\n    println("hi")\n}\n'),
    ("lua", "print($A)", "log($A)", "local x = 1\nprint(x)\n"),
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("conformance")
    for i, (lang, _pattern, source) in enumerate(SEARCH):
        (root / f"case{i}.{EXT[lang]}").write_text(source)
    return root


@pytest.fixture(scope="module")
def run(corpus):
    with tether.open_run_sync(corpus) as r:
        yield r


def _sg_matches(found: list[dict], source: bytes) -> list[tuple]:
    out = []
    for m in found:
        caps = {}
        mv = m.get("metaVariables") or {}
        for name, v in (mv.get("single") or {}).items():
            caps[name] = v["text"]
        for name, nodes in (mv.get("multi") or {}).items():
            if nodes:
                s, e = nodes[0]["range"]["byteOffset"]["start"], nodes[-1]["range"]["byteOffset"]["end"]
                caps[name] = source[s:e].decode()
        off = m["range"]["byteOffset"]
        out.append((off["start"], off["end"], tuple(sorted((k, v) for k, v in caps.items() if v))))
    return sorted(out)


def _tether_matches(data: dict) -> list[tuple]:
    return sorted(
        (m["byte_range"][0], m["byte_range"][1], tuple(sorted((k, v) for k, v in m["captures"].items() if v)))
        for m in data["matches"]
    )


@pytest.mark.parametrize("i", range(len(SEARCH)), ids=[f"{c[0]}:{c[1][:30]}" for c in SEARCH])
def test_same_matches_as_ast_grep(i, sg, corpus, run):
    lang, pattern, source = SEARCH[i]
    path = corpus / f"case{i}.{EXT[lang]}"
    expected = _sg_matches(sg(pattern, path, lang), source.encode())
    result = run.call(
        "ast_grep", {"pattern": pattern, "path": path.name, "language": lang, "max_results": 1000}
    )
    assert not result.is_error, result.plain
    assert _tether_matches(result.data) == expected, result.plain
    assert result.data["total"] == len(expected)


def test_the_cases_find_something(sg, corpus, run):
    """Guard against a vacuous suite: most cases must match at least once in both tools."""
    found = sum(1 for i, (lang, p, _s) in enumerate(SEARCH) if sg(p, corpus / f"case{i}.{EXT[lang]}", lang))
    assert len(SEARCH) >= 60
    assert found >= len(SEARCH) - 2


@pytest.mark.parametrize("i", range(len(REWRITE)), ids=[f"{c[0]}:{c[1][:30]}" for c in REWRITE])
def test_same_rewrite_as_ast_grep(i, sg, tmp_path):
    lang, pattern, template, source = REWRITE[i]
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for d in (ours, theirs):
        d.mkdir()
        (d / f"f.{EXT[lang]}").write_text(source)
    sg(pattern, theirs / f"f.{EXT[lang]}", lang, rewrite=template, update=True)
    expected = (theirs / f"f.{EXT[lang]}").read_text()
    assert expected != source, "ast-grep changed nothing: the case is vacuous"
    with tether.open_run_sync(ours) as r:
        staged = r.call("ast_edit", {"pattern": pattern, "rewrite": template, "language": lang})
        assert not staged.is_error, staged.plain
        assert (ours / f"f.{EXT[lang]}").read_text() == source  # staging writes nothing
        done = r.call("resolve", {"edit_id": staged.data["edit_id"], "action": "accept"})
        assert not done.is_error, done.plain
    assert (ours / f"f.{EXT[lang]}").read_text() == expected


# -- real code: packages of the running interpreter's standard library ------------------------------

STDLIB_PATTERNS = [
    "print($$$A)",
    "$X.append($Y)",
    "def $F($$$ARGS): $$$BODY",
    "self.$A = $B",
    "for $X in $Y: $$$B",
    "$A.$B($$$C)",
    "if $X: $$$B",
    "return $A",
    "with $A as $B: $$$C",
    "$A[$B]",
    "raise $E($$$A)",
    "lambda $$$A: $B",
    "$A == $A",
    "isinstance($X, $T)",
    "try:\n    $$$A\nexcept $E:\n    $$$B",
]


@pytest.fixture(scope="module")
def stdlib_corpus(tmp_path_factory) -> Path:
    import sysconfig

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    root = tmp_path_factory.mktemp("stdlib")
    for package in ("json", "email", "asyncio", "logging", "unittest", "importlib"):
        for src in (stdlib / package).rglob("*.py"):
            target = root / src.relative_to(stdlib)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
    return root


@pytest.mark.parametrize("pattern", STDLIB_PATTERNS)
async def test_same_matches_on_real_code(pattern, sg, stdlib_corpus):
    theirs = set()
    for m in sg(pattern, stdlib_corpus, "python"):
        off = m["range"]["byteOffset"]
        theirs.add(
            (
                Path(m["file"]).resolve().relative_to(stdlib_corpus.resolve()).as_posix(),
                off["start"],
                off["end"],
            )
        )
    async with tether.open_run(stdlib_corpus) as run:
        from tether_astgrep.query import compile_query, find_target

        pool = run.resource(tether_astgrep_parsers)
        target = await find_target(pool, ".", "python")
        results = await pool.search(
            compile_query(pool, pattern, target.grammar), target.grammar, target.files
        )
        total = (await run.call("ast_grep", {"pattern": pattern, "max_results": 1})).data["total"]
    ours = {(run.relpath(r.path), span[0], span[1]) for r in results for span in r.matches}
    assert theirs, "ast-grep found nothing: the case is vacuous"
    assert sorted(ours - theirs)[:5] == [] and sorted(theirs - ours)[:5] == []
    assert total == len(theirs)
