"""clangd, typescript-language-server and gopls, driven for real where installed (.ci/run installs them)."""

from __future__ import annotations

import os

import pytest
import tether
import tether.files
from support import require_binary

C_FILES = {
    "compile_flags.txt": "-std=c11\n",
    "util.h": "#ifndef UTIL_H\n#define UTIL_H\nint add(int a, int b);\n#endif\n",
    "util.c": '#include "util.h"\n\nint add(int a, int b) { return a + b; }\n',
    "main.c": '#include "util.h"\n\nint main(void) {\n    const char *s = "héllo 😀"; int r = add(1, 2);\n    return add(r, 0);\n}\n',
}

TS_FILES = {
    "package.json": '{"name": "sample", "private": true}\n',
    "tsconfig.json": '{"compilerOptions": {"strict": true, "target": "es2020", "module": "commonjs", "noEmit": true}, "include": ["src"]}\n',
    "src/util.ts": "export function greet(name: string): string {\n  return `hi ${name}`;\n}\n",
    "src/main.ts": 'import { greet as g } from "./util";\n\nconst n: number = g("a");\nconsole.log(g("b"));\n',
}

GO_FILES = {
    "go.mod": "module example.com/sample\n\ngo 1.19\n",
    "util/util.go": 'package util\n\n// Greet says hello.\nfunc Greet(name string) string {\n\treturn "hi " + name\n}\n',
    "main.go": 'package main\n\nimport (\n\t"fmt"\n\n\tu "example.com/sample/util"\n)\n\nfunc main() {\n\tfmt.Println(u.Greet("a"))\n}\n',
}


def introduced(r):
    return [(d["file"], d["line"], d["severity"]) for d in (r.data or {}).get("diagnostics", [])]


async def test_clangd_navigation_non_ascii_and_diagnostics_on_write(tmp_path, samples, no_leftover_processes):
    require_binary("clangd")
    root = samples.write_tree(tmp_path / "c", C_FILES)
    async with tether.open_run(root, plugins=[tether.files]) as run:
        # 'add' after non-ASCII text: clangd may negotiate utf-8, where é and 😀 are 2 and 4 bytes
        r = await run.call("lsp", {"action": "definition", "file": "main.c", "line": 4, "symbol": "add"})
        assert not r.is_error, r.plain
        assert {(x["file"], x["line"]) for x in r.data["locations"]} <= {("util.h", 3), ("util.c", 3)}
        assert r.data["locations"]
        r = await run.call("lsp", {"action": "references", "file": "util.h", "line": 3, "symbol": "add"})
        assert not r.is_error, r.plain
        line4 = C_FILES["main.c"].splitlines()[3]
        assert {"file": "main.c", "line": 4, "column": line4.index("add") + 1, "text": line4} in r.data[
            "locations"
        ]
        r = await run.call("lsp", {"action": "hover", "file": "main.c", "line": 5, "symbol": "add"})
        assert "int add(int a, int b)" in r.plain
        r = await run.call(
            "edit",
            {
                "path": "main.c",
                "old_string": "return add(r, 0);",
                "new_string": "return add(r, 0) + missing_var;",
            },
        )
        assert not r.is_error
        assert introduced(r) == [("main.c", 5, "error")], r.plain
        assert "missing_var" in r.plain


@pytest.mark.usefixtures("cpu_stress")  # the load case: answers must hold on a busy machine
async def test_typescript_language_server_alias_and_diagnostics_on_write(
    tmp_path, samples, with_node_bin, no_leftover_processes
):
    require_binary("typescript-language-server", str(samples.node_bin() / "typescript-language-server"))
    root = samples.write_tree(tmp_path / "ts", TS_FILES)
    async with tether.open_run(root, plugins=[tether.files]) as run:
        r = await run.call("lsp", {"action": "definition", "file": "src/main.ts", "line": 4, "symbol": "g"})
        assert not r.is_error, r.plain
        files = {(x["file"], x["line"]) for x in r.data["locations"]}
        assert files & {("src/util.ts", 1), ("src/main.ts", 1)}, r.plain
        r = await run.call("lsp", {"action": "diagnostics", "file": "src/main.ts"})
        assert [(d["line"], d["code"]) for d in r.data["diagnostics"]] == [(3, "2322")], r.plain
        r = await run.call(
            "edit",
            {"path": "src/main.ts", "old_string": 'console.log(g("b"));', "new_string": "console.log(g(2));"},
        )
        assert introduced(r) == [("src/main.ts", 4, "error")], r.plain
        require_binary("tsc", str(samples.node_bin() / "tsc"))  # npm's typescript, which CI installs
        r = await run.call("lsp", {"action": "diagnostics", "file": "*"})
        assert not r.is_error, r.plain
        assert {(d["file"], d["line"]) for d in r.data["diagnostics"]} == {
            ("src/main.ts", 3),
            ("src/main.ts", 4),
        }


async def test_gopls_definition_through_an_import_alias_and_diagnostics_on_write(
    tmp_path, samples, monkeypatch, no_leftover_processes
):
    gopls = require_binary("gopls", os.path.expanduser("~/go/bin/gopls"))
    require_binary("go")
    root = samples.write_tree(tmp_path / "go", GO_FILES)
    monkeypatch.setenv("PATH", f"{os.path.dirname(gopls)}{os.pathsep}{os.environ['PATH']}")
    async with tether.open_run(root, plugins=[tether.files]) as run:
        r = await run.call("lsp", {"action": "definition", "file": "main.go", "line": 10, "symbol": "Greet"})
        assert not r.is_error, r.plain
        assert [(x["file"], x["line"], x["column"]) for x in r.data["locations"]] == [("util/util.go", 4, 6)]
        r = await run.call("lsp", {"action": "hover", "file": "main.go", "line": 10, "symbol": "Greet"})
        assert "Greet says hello" in r.plain
        r = await run.call(
            "edit", {"path": "main.go", "old_string": 'u.Greet("a")', "new_string": "u.Greet(1)"}
        )
        assert [(f, line) for f, line, _ in introduced(r)] == [("main.go", 10)], r.plain
