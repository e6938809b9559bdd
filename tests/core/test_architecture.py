"""The one door for each concern, kept closed: the families' sources read as the rules say.

Ruff holds what it can say (``banned-api`` in pyproject.toml: `tether.procs.kill_tree` outside the core);
this module holds the rest, read from the syntax trees (`ast`, never a regex over the text) of every module
under ``plugins/*/src``, and of the tests where a rule is about tests. Each failure names ``file:line``, what
was found and what to write instead:

- options are read typed, ``run.options.of(<Family>Options).<field>``: no ``run.options["x"]``,
  ``run.options.get("x")``, ``"x" in run.options``, ``sup.option("x")`` or ``option(run, "x")``;
- ``Tool(...)`` is never given ``family=`` (the registrar stamps the registering family);
- ``ToolError(message, code="...", **fields)``: no dict, no second positional argument;
- ``register.unavailable(reason)``, one argument (the registrar knows the family);
- no `kill_tree` in a family: ``await run.stop_process(proc)`` stops a process and its whole tree;
- a test checks an error result with `tether.testing.assert_model_error`, not ``"Traceback" not in
  result.plain`` (a check of a process's stderr, which is no tool result, is not this rule's);
- no module of a family over MAX_LINES lines;
- no run-time import cycle inside a family: every import counts (top level, in a function, relative or
  absolute), but those under ``if TYPE_CHECKING:``.

The scanners take their files as arguments, so tests/core/test_contributing.py runs them on the family
CONTRIBUTING.md builds.
"""

from __future__ import annotations

import ast
import functools
import itertools
import tomllib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAX_LINES = 700
# tether.testing's own tests show what assert_model_error refuses: they may spell the check out
KIT_TESTS = {"tests/core/test_core_testing.py"}


def family_sources(repo: Path = REPO) -> list[Path]:
    return sorted(repo.glob("plugins/*/src/**/*.py"))


def suite_files(repo: Path = REPO) -> list[Path]:
    return sorted(p for p in (repo / "tests").rglob("*.py") if rel(p, repo) not in KIT_TESTS)


def rel(path: Path, repo: Path = REPO) -> str:
    try:
        return path.relative_to(repo).as_posix()
    except ValueError:
        return path.as_posix()


@functools.cache
def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_bytes(), filename=str(path))


def _where(path: Path, node: ast.AST, repo: Path) -> str:
    line = getattr(node, "lineno", None) or getattr(getattr(node, "iter", None), "lineno", 0)
    return f"{rel(path, repo)}:{line}"


def _shown(node: ast.AST) -> str:
    """The node's code, its first line (a loop is shown by its head), cut at 120 characters."""
    if isinstance(node, ast.comprehension):
        return f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}"
    return ast.unparse(node).splitlines()[0][:120]


def _str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_options(node: ast.AST) -> bool:
    """``<anything>.options``: the run's options mapping (``run.options``, ``ctx.run.options``)."""
    return isinstance(node, ast.Attribute) and node.attr == "options"


def _callee(node: ast.Call) -> str:
    """The called name: ``Tool`` for ``Tool(...)`` and ``tether.Tool(...)``."""
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


# -- the scanners: (file:line, what was found, what to write instead) ----------------------------------

OPTIONS_FIX = (
    "read options typed: run.options.of(<Family>Options).<field> (the attrs class in the family's "
    "options.py, registered through tether_addoptions)"
)


MAPPING_READS = {"get", "items", "keys", "values", "__getitem__", "__contains__", "__iter__"}


def _is_run_options(node: ast.AST) -> bool:
    """``run.options``, ``self.run.options``, ``ctx.run.options``: the run's options, whatever the key."""
    if not _is_options(node):
        return False
    base = node.value  # type: ignore[attr-defined]
    return (isinstance(base, ast.Name) and base.id == "run") or (
        isinstance(base, ast.Attribute) and base.attr == "run"
    )


def _option_read(node: ast.AST) -> bool:
    """A read of the run's options by name, or as a mapping."""
    if isinstance(node, ast.Subscript):  # run.options[name], x.options["lsp_servers"]
        return _is_run_options(node.value) or (_is_options(node.value) and _str(node.slice) is not None)
    if isinstance(node, ast.Compare):  # "x" in run.options
        return any(
            isinstance(op, ast.In | ast.NotIn)
            and (_is_run_options(right) or (_is_options(right) and _str(node.left) is not None))
            for op, right in zip(node.ops, node.comparators)
        )
    if isinstance(node, ast.For | ast.comprehension):  # for name in run.options
        return _is_run_options(node.iter)
    if isinstance(node, ast.Dict):  # {**run.options}
        return any(k is None and _is_run_options(v) for k, v in zip(node.keys, node.values))
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        if func.attr in MAPPING_READS and _is_run_options(func.value):
            return True  # run.options.get(name), run.options.items()
        if func.attr == "get" and _is_options(func.value) and node.args and _str(node.args[0]) is not None:
            return True  # sup.run_options.get("x") spelled through another name
        if func.attr == "option" and node.args:
            return True  # sup.option("x"), Supervisor.option(self, "x")
    if isinstance(func, ast.Name):
        if func.id == "option" and node.args:
            return True  # option(run, "x")
        if func.id == "dict" and node.args and _is_run_options(node.args[0]):
            return True  # dict(run.options)
    return any(k.arg is None and _is_run_options(k.value) for k in node.keywords)  # f(**run.options)


def string_option_reads(paths: Iterable[Path], repo: Path = REPO) -> list[str]:
    return [
        f"{_where(path, node, repo)}: {_shown(node)}"
        for path in paths
        for node in ast.walk(parse(path))
        if _option_read(node)
    ]


TOOL_FAMILY_POSITION = 5  # Tool(name, tier, description, args, handler, family, ...)


def _calls(paths: Iterable[Path], repo: Path, wrong: Callable[[ast.Call], bool]) -> list[str]:
    """Each call of the files that ``wrong`` finds, as "file:line: code"."""
    return [
        f"{_where(path, node, repo)}: {_shown(node)}"
        for path in paths
        for node in ast.walk(parse(path))
        if isinstance(node, ast.Call) and wrong(node)
    ]


def family_keywords(paths: Iterable[Path], repo: Path = REPO) -> list[str]:
    return _calls(
        paths,
        repo,
        lambda node: (
            _callee(node) == "Tool"
            and (any(k.arg == "family" for k in node.keywords) or len(node.args) > TOOL_FAMILY_POSITION)
        ),
    )


def dict_tool_errors(paths: Iterable[Path], repo: Path = REPO) -> list[str]:
    return _calls(
        paths,
        repo,
        lambda node: (
            _callee(node) == "ToolError"
            and (len(node.args) > 1 or any(isinstance(a, ast.Dict) for a in node.args))
        ),
    )


def two_argument_unavailable(paths: Iterable[Path], repo: Path = REPO) -> list[str]:
    return _calls(
        paths,
        repo,
        lambda node: (
            isinstance(node.func, ast.Attribute)
            and node.func.attr == "unavailable"
            and len(node.args) + len(node.keywords) > 1
        ),
    )


def kill_tree_uses(paths: Iterable[Path], repo: Path = REPO) -> list[str]:
    found = []
    for path in paths:
        for node in ast.walk(parse(path)):
            imported = isinstance(node, ast.ImportFrom) and any(a.name == "kill_tree" for a in node.names)
            if imported or (isinstance(node, ast.Attribute) and node.attr == "kill_tree"):
                found.append(f"{_where(path, node, repo)}: {_shown(node)}")
    return found


def hand_written_traceback_checks(paths: Iterable[Path], repo: Path = REPO) -> list[str]:
    """``"Traceback..." not in <x>.plain``: a tool result's text checked by hand."""
    found = []
    for path in paths:
        if b"Traceback" not in path.read_bytes():
            continue  # no such string at all: no tree to read
        for node in ast.walk(parse(path)):
            if not isinstance(node, ast.Compare) or "Traceback" not in (_str(node.left) or ""):
                continue
            for op, right in zip(node.ops, node.comparators):
                if isinstance(op, ast.NotIn) and isinstance(right, ast.Attribute) and right.attr == "plain":
                    found.append(f"{_where(path, node, repo)}: {_shown(node)}")
    return found


def long_modules(paths: Iterable[Path], repo: Path = REPO, limit: int = MAX_LINES) -> list[str]:
    found = []
    for path in paths:
        lines = path.read_bytes().count(b"\n")  # as `wc -l` counts
        if lines > limit:
            found.append(f"{rel(path, repo)}: {lines} lines")
    return found


# -- import cycles ------------------------------------------------------------------------------------


def _package_modules(src: Path) -> dict[str, Path]:
    """Every module under a family's ``src`` folder by its dotted name (a package by its ``__init__``)."""
    modules = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts:
            modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_time_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, at any depth, but those under ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)  # the else branch runs
            continue
        stack.extend(ast.iter_child_nodes(node))


def import_graph(src: Path) -> tuple[dict[str, dict[str, int]], dict[str, Path]]:
    """``{module: {imported module: line}}`` within one family's source folder, and the modules' files.

    ``from pkg import name`` imports the submodule ``pkg.name`` when there is one, else ``pkg``.
    """
    modules = _package_modules(src)
    graph: dict[str, dict[str, int]] = {m: {} for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in _run_time_imports(parse(path)):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base_parts = package.split(".")
                    if node.level > 1:
                        base_parts = base_parts[: -(node.level - 1)]
                    base = ".".join([*base_parts, *([node.module] if node.module else [])])
                else:
                    base = node.module or ""
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                while target and target not in modules:  # `import a.b.c` of a module a.b holds
                    target = target.rpartition(".")[0]
                if target and target != module:
                    graph[module].setdefault(target, node.lineno)
    return graph, modules


def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's components, each sorted; only those of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _shortest_cycle(graph: dict[str, dict[str, int]], start: str, within: set[str]) -> list[str]:
    """The shortest chain start -> ... -> start inside one component (breadth first)."""
    came: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    chain = [v]
                    while chain[-1] != start:
                        chain.append(came[chain[-1]])
                    return [*reversed(chain), start]
                if w in within and w not in came:
                    came[w] = v
                    following.append(w)
        frontier = following
    return [start, start]


def import_cycles(srcs: Iterable[Path], repo: Path = REPO) -> list[str]:
    found = []
    for src in srcs:
        graph, modules = import_graph(src)
        for component in _strongly_connected(graph):
            chain = _shortest_cycle(graph, component[0], set(component))
            steps = [
                f"{a} ({rel(modules[a], repo)}:{graph[a][b]}) -> {b}" for a, b in itertools.pairwise(chain)
            ]
            others = sorted(set(component) - set(chain))
            also = f"; the same cycle also takes in {', '.join(others)}" if others else ""
            found.append(f"{' -> '.join(chain)}: " + ", ".join(steps) + also)
    return found


def family_src_folders(repo: Path = REPO) -> list[Path]:
    return sorted(p for p in repo.glob("plugins/*/src") if p.is_dir())


# -- the gates -------------------------------------------------------------------------------------


def _in_order(found: list[str]) -> list[str]:
    def key(line: str) -> tuple[str, int]:
        where = line.split(": ", 1)[0].split(":")
        return where[0], int(where[1]) if len(where) > 1 and where[1].isdigit() else 0

    return sorted(found, key=key)


def _fail(found: list[str], rule: str, fix: str) -> None:
    if found:
        pytest.fail(f"{len(found)} {rule}; {fix}:\n  " + "\n  ".join(_in_order(found)), pytrace=False)


def test_options_are_read_through_the_declared_class_only():
    _fail(string_option_reads(family_sources()), "string-keyed option read(s) in the families", OPTIONS_FIX)


def core_sources(repo: Path = REPO) -> list[Path]:
    """The core's modules but its options module, which is where the options are structured."""
    return sorted(
        p for p in repo.glob("core/src/tether/**/*.py") if rel(p, repo) != "core/src/tether/options.py"
    )


def test_the_core_reads_its_own_options_typed_too():
    _fail(
        string_option_reads(core_sources()),
        "string-keyed option read(s) in the core outside tether/options.py",
        "read them as run.options.of(CoreOptions).<field> (tether.options.CoreOptions)",
    )


def test_no_tool_is_given_its_family_by_hand():
    _fail(
        family_keywords(family_sources()),
        "Tool(...) call(s) with family=",
        "drop family=: the registrar stamps the family of the plugin that registers the tool",
    )


def test_tool_errors_take_a_code_not_a_dict():
    _fail(
        dict_tool_errors(family_sources()),
        "ToolError(...) call(s) with a dict or a second positional argument",
        'write ToolError(message, code="snake_case_code", **fields), the dict\'s "error" as code= and its '
        "other keys as keywords",
    )


def test_unavailable_takes_the_reason_alone():
    _fail(
        two_argument_unavailable(family_sources()),
        "register.unavailable(...) call(s) with more than the reason",
        "write register.unavailable(reason): the registrar knows which family it asks",
    )


def test_no_family_kills_a_process_tree_itself():
    _fail(
        kill_tree_uses(family_sources()),
        "use(s) of tether.procs.kill_tree in the families",
        "stop a process with `await run.stop_process(proc)` (the run tracks and stops its whole tree); "
        "start it with run.child_env() and run.track_process(proc)",
    )


def test_error_results_are_checked_with_the_test_kit():
    _fail(
        hand_written_traceback_checks(suite_files()),
        'hand-written "Traceback" not in <result>.plain check(s)',
        "use tether.testing.assert_model_error(result, *fragments): no traceback, no fault of the tool, "
        "each fragment present",
    )


def test_no_family_module_is_over_the_limit():
    _fail(
        long_modules(family_sources()),
        f"module(s) of the families over {MAX_LINES} lines",
        "split by story (one feature read top to bottom in one module), not into arbitrary halves",
    )


def test_no_family_has_a_run_time_import_cycle():
    _fail(
        import_cycles(family_src_folders()),
        "run-time import cycle(s) inside a family",
        "move what both sides need into a leaf module that imports neither, or import a name used only "
        "in annotations under `if TYPE_CHECKING:`",
    )


def test_ruff_keeps_kill_tree_out_of_the_families():
    """The half of the gate that ruff holds (`banned-api`), as pyproject.toml configures it."""
    lint = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    assert {"TID251", "TID"} & set(lint["select"]), "ruff's rule set must select TID251 (banned-api)"
    assert "tether.procs.kill_tree" in lint["flake8-tidy-imports"]["banned-api"]
    exempt = [
        glob for glob, rules in lint.get("per-file-ignores", {}).items() if {"TID251", "TID"} & set(rules)
    ]
    assert not [g for g in exempt if not g.startswith(("core/", "benchmarks/"))], exempt


# -- the scanners themselves ------------------------------------------------------------------------


def test_the_scanners_find_each_old_door(tmp_path):
    src = tmp_path / "src" / "fam"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "reads.py").write_text(
        "def f(run, self, ctx, sup, name):\n"
        '    a = run.options["fam_a"]\n'
        '    b = ctx.run.options.get("fam_b", 1)\n'
        '    c = "fam_c" in run.options\n'
        '    d = sup.option("fam_d")\n'
        '    e = option(run, "fam_e")\n'
        "    g = self.run.options[name]\n"  # a helper that takes the name
        "    h = name in ctx.run.options\n"
        "    i = dict(run.options)\n"
        "    j = [k for k in run.options]\n"
        "    for k in self.run.options:\n"
        "        pass\n"
        "    m = {**run.options}\n"
        "    n = f(**run.options)\n"
        "    o = run.options.items()\n"
        '    p = sup.options["fam_p"]\n'
    )
    (src / "bad.py").write_text(
        "from tether import Tool, ToolError\n"
        "from tether.procs import kill_tree\n"
        "def f(run, register):\n"
        "    pass\n"
        "    pass\n"
        "    pass\n"
        "    pass\n"
        "    pass\n"
        '    Tool("t", "read", "d", args=A, handler=h, family="fam"); Tool("t", "read", "d", A, h, "fam")\n'
        '    raise ToolError("m", {"error": "x"})\n'
        '    ToolError("m", data)\n'
        '    register.unavailable("fam", "why")\n'
        "    import tether.procs\n"
        "    tether.procs.kill_tree(1)\n"
    )
    (src / "good.py").write_text(
        "from tether import Tool, ToolError\n"
        "def f(run, register, options, question, server):\n"
        "    a = run.options.of(FamOptions).fam_a\n"
        '    b = options["not the run\'s"]\n'
        "    c = question.options[0]\n"  # a question's choices, not the run's options
        '    d = server.initialization_options["x"]\n'
        '    Tool("t", "read", "d", args=A, handler=h)\n'
        '    raise ToolError("m", code="x", path="p")\n'
        '    register.unavailable("why")\n'
        '    open_run(root, options={"fam_a": 1})\n'
    )
    files = sorted(src.glob("*.py"))
    lines = lambda found: sorted(int(f.split(":")[1]) for f in found)  # noqa: E731
    reads = string_option_reads(files, tmp_path)
    assert lines(reads) == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16], reads
    assert all(f.startswith("src/fam/reads.py:") for f in reads), reads
    assert lines(family_keywords(files, tmp_path)) == [9, 9]
    assert lines(dict_tool_errors(files, tmp_path)) == [10, 11]
    assert lines(two_argument_unavailable(files, tmp_path)) == [12]
    assert lines(kill_tree_uses(files, tmp_path)) == [2, 14]

    tests = tmp_path / "test_x.py"
    tests.write_text(
        "def test(result, proc):\n"
        '    assert "Traceback" not in result.plain\n'
        '    assert "Traceback (most recent call last)" not in r.plain and "x" in r.plain\n'
        '    assert "Traceback" not in proc.stderr\n'  # a process's stderr is no tool result
    )
    assert lines(hand_written_traceback_checks([tests], tmp_path)) == [2, 3]

    (src / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert long_modules([*files, src / "long.py"], tmp_path) == [f"src/fam/long.py: {MAX_LINES + 1} lines"]


def test_the_cycle_finder_counts_function_level_and_relative_imports_not_type_checking_ones(tmp_path):
    src = tmp_path / "src"
    pkg = src / "fam"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from fam import b\n",  # a submodule by `from package import name`
        "b.py": "def f():\n    from .c import thing\n",  # relative, in a function
        "c.py": "import fam.a\nthing = 1\n",  # absolute: back to a
        "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fam.e import E\nelse:\n    pass\n",
        "e.py": "from fam import d\n",  # d -> e only for type checkers: no cycle
        "sub/__init__.py": "",
        "sub/x.py": "from .. import a\nfrom ..sub import y\n",
        "sub/y.py": "from fam.sub.x import name\n",  # x <-> y
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    graph, _ = import_graph(src)
    assert (
        graph["fam.a"] == {"fam.b": 1} and graph["fam.b"] == {"fam.c": 2} and graph["fam.c"] == {"fam.a": 1}
    )
    assert graph["fam.d"] == {} and graph["fam.sub.x"] == {"fam.a": 1, "fam.sub.y": 2}
    cycles = import_cycles([src], tmp_path)
    assert cycles == [
        "fam.a -> fam.b -> fam.c -> fam.a: fam.a (src/fam/a.py:1) -> fam.b, "
        "fam.b (src/fam/b.py:2) -> fam.c, fam.c (src/fam/c.py:1) -> fam.a",
        "fam.sub.x -> fam.sub.y -> fam.sub.x: fam.sub.x (src/fam/sub/x.py:2) -> fam.sub.y, "
        "fam.sub.y (src/fam/sub/y.py:1) -> fam.sub.x",
    ], cycles
