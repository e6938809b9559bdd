"""The pattern ladder: fragments that only parse inside a context, found where ast-grep finds nothing."""

from __future__ import annotations

import pytest
import tether
from tether.testing import assert_model_error
from tether_astgrep.pattern import SOUND_NODE


def put(root, name, text):
    p = root / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


async def grep(root, **args):
    async with tether.open_run(root) as run:
        return await run.call("ast_grep", {"max_results": 1000, **args})


GO = 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("a", 1)\n\ts := "fmt.Println(x)"\n\t// fmt.Println(y)\n\tfmt.Println()\n}\n'


async def test_go_call_statement_is_found_where_ast_grep_finds_nothing(project, sg):
    path = put(project, "main.go", GO)
    assert sg("fmt.Println($$$A)", path, "go") == []  # ast-grep parses it as a type conversion
    result = await grep(project, pattern="fmt.Println($$$A)")
    assert not result.is_error, result.plain
    assert [(m["start"]["line"], m["captures"].get("A", "")) for m in result.data["matches"]] == [
        (6, '"a", 1'),
        (9, ""),
    ]
    assert result.data["context"] == "statement"


async def test_go_top_level_call_in_a_var_is_found(project, sg):
    path = put(
        project,
        "e.go",
        'package main\n\nvar e = errors.New("x")\n\nfunc f() error { return errors.New("y") }\n',
    )
    assert sg("errors.New($S)", path, "go") == []
    result = await grep(project, pattern="errors.New($S)")
    assert [m["captures"]["S"] for m in result.data["matches"]] == ['"x"', '"y"']


async def test_go_function_declaration_uses_the_declaration_rung(project):
    put(project, "f.go", "package main\n\nfunc a() {}\nfunc b(x int) int { return x }\n")
    result = await grep(project, pattern="func $F($$$P) { $$$B }")
    assert [m["captures"]["F"] for m in result.data["matches"]] == ["a"]
    assert result.data["context"] == "declaration"


DART = "class A {\n  void dispose() {}\n  void f() {\n    dispose(x);\n    var s = 'dispose(x)';\n    // dispose(x)\n  }\n}\n"


async def test_dart_call_statement_is_a_call_and_a_bare_call_reads_as_ast_grep_reads_it(project, sg):
    path = put(project, "a.dart", DART)
    result = await grep(project, pattern="dispose(x);")
    assert not result.is_error, result.plain
    assert [(m["start"]["line"], m["text"]) for m in result.data["matches"]] == [(4, "dispose(x);")]
    # without the `;` the whole file is an ERROR around a function signature: ast-grep's reading, said
    bare = await grep(project, pattern="dispose(x)")
    assert sg("dispose(x)", path, "dart") == [] and bare.data["matches"] == []
    assert bare.data["context"] == SOUND_NODE and "the whole file has a syntax error" in bare.plain


async def test_dart_method_call_on_a_receiver(project):
    put(project, "a.dart", DART.replace("dispose(x);\n", "dispose(x);\n    c.dispose();\n"))
    result = await grep(project, pattern="$R.dispose()")
    assert [m["captures"]["R"] for m in result.data["matches"]] == ["c"]


async def test_java_method_needs_the_class_member_rung(project):
    put(project, "A.java", "class A {\n  public void run() { go(); }\n  void f() { int b = 1; }\n}\n")
    result = await grep(project, pattern="public void $M() { $$$B }")
    assert result.data["context"] == "class member"
    assert [(m["captures"]["M"], m["captures"]["B"]) for m in result.data["matches"]] == [("run", "go();")]
    local = await grep(project, pattern="int $N = $V;")
    assert local.data["context"] == "statement"
    assert [m["captures"]["N"] for m in local.data["matches"]] == ["b"]


async def test_typescript_constructor_is_a_class_member(project, sg):
    path = put(project, "a.ts", "class A {\n  constructor(x: number) { this.x = x; }\n}\n")
    result = await grep(project, pattern="constructor($$$P) { $$$B }")
    assert result.data["context"] == "class member"
    assert [m["captures"]["P"] for m in result.data["matches"]] == ["x: number"]
    assert sg("constructor($$$P) { $$$B }", path, "typescript") == []


async def test_tsx_element(project):
    put(project, "a.tsx", "const a = <Foo bar={1} />;\nconst b = <div></div>;\n")
    result = await grep(project, pattern="<$C $$$P />")
    assert [(m["captures"]["C"], m["captures"]["P"]) for m in result.data["matches"]] == [("Foo", "bar={1}")]


async def test_c_call_without_semicolon(project):
    put(project, "a.c", 'int main(void) {\n  printf("%d", 1);\n  puts("printf(x)");\n  return 0;\n}\n')
    result = await grep(project, pattern="printf($$$A)")
    assert [m["captures"]["A"] for m in result.data["matches"]] == ['"%d", 1']


async def test_cpp_stream_expression(project):
    put(project, "a.cpp", "int main() {\n  std::cout << 1;\n  int x = 2 << 3;\n}\n")
    result = await grep(project, pattern="std::cout << $A")
    assert [m["captures"]["A"] for m in result.data["matches"]] == ["1"]


async def test_rust_let_without_semicolon_is_accepted(project):
    put(project, "a.rs", "fn main() {\n    let x = 1;\n    let y = f(2);\n}\n")
    result = await grep(project, pattern="let $A = $B")
    assert [m["captures"]["A"] for m in result.data["matches"]] == ["x", "y"]


@pytest.mark.parametrize(
    "language, pattern, where",
    [
        ("python", "def f(:", "line 1, column 7"),
        ("go", "func $F() {", "line 1, column"),
        ("rust", "let = ;", "line 1"),
    ],
)
async def test_unparseable_pattern_names_language_and_position(project, language, pattern, where):
    put(project, "x.txt", "")
    result = await grep(project, pattern=pattern, language=language)
    assert_model_error(result, f"does not parse as {language} code", where)


async def test_several_statements_are_refused(project):
    put(project, "a.py", "a = 1\nb = 2\n")
    result = await grep(project, pattern="a = 1\nb = 2")
    assert result.is_error and "several python statements" in result.plain


# a name in every role TypeScript gives one: imported, exported, a class, a type, a value, a property
NAMES_TS = """import { Foo } from './a';
export { Foo };
abstract class Foo<T> extends Foo implements Foo {}
interface Foo extends Foo {}
type X = Foo[] | keyof Foo | typeof Foo | Foo<number> | NS.Foo;
const y = new Foo<number>() as Foo;
@Foo() class D { m(a: Foo): Foo { return Foo.prototype; } Foo = 1; }
const o = { Foo, Foo: 1 };
const e = <Animated.Foo style={x}></Animated.Foo>;
"""


@pytest.mark.parametrize("lang, ext", [("typescript", ".ts"), ("tsx", ".tsx")])
async def test_a_lone_typescript_name_matches_where_ast_grep_does(project, sg, lang, ext):
    """A bare `Foo` is a value (an identifier) to ast-grep: not the type of `let a: Foo`, the class name of
    `class Foo` or the property of `x.Foo`; each place once. A rule on the kind finds the type."""
    source = NAMES_TS if lang == "tsx" else NAMES_TS.rsplit("const e", 1)[0]
    path = put(project, "a" + ext, source)
    theirs = [
        (m["range"]["byteOffset"]["start"], m["range"]["byteOffset"]["end"]) for m in sg("Foo", path, lang)
    ]
    result = await grep(project, pattern="Foo", language=lang)
    ours = [tuple(m["byte_range"]) for m in result.data["matches"]]
    assert ours == theirs and len(theirs) == 7, (ours, theirs)
    assert "read as" not in result.plain.splitlines()[0]  # one reading: no type or property one beside it
    types = await grep(project, rule="kind: type_identifier\nregex: ^Foo$", language=lang)
    assert {m["start"]["line"] for m in types.data["matches"]} == {3, 4, 5, 6, 7}


SWIFT = (
    "public struct Builder<ViewType: UIView> {\n  let view: ViewType\n}\n\n"
    "public func View<ViewType: UIView>(_ type: ViewType.Type) {}\n\n"
    "func plain<T>(_ x: T) {}\n"
)


async def test_swift_type_parameters_use_their_rung_where_ast_grep_refuses_them(project):
    put(project, "a.swift", SWIFT)
    # ast-grep 0.51 refuses the pattern (no context reads it); through error recovery it found nothing,
    # not even the code it was copied from
    result = await grep(project, pattern="<ViewType: UIView>")
    assert not result.is_error, result.plain
    assert [(m["start"]["line"], m["text"]) for m in result.data["matches"]] == [
        (1, "<ViewType: UIView>"),
        (5, "<ViewType: UIView>"),
    ]
    assert result.data["context"] == "type parameters"
