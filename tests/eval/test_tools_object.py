"""The `tools` object in Python and JavaScript cells: typed stubs of the run's tools, results, help, the
untyped door, calls run at once (with the run's overlap rule), the cell's answer listing its calls, absent
tools in one line, and a cell's write asking the run's approval as the model's own call does."""

from __future__ import annotations

import json

import pytest
import pytest_asyncio
import tether
import tether_eval.plugin as eval_plugin
from tether_eval.bridge import catalog
from tether_eval.hookspecs import tether_eval_kernels

pytestmark = pytest.mark.asyncio(loop_scope="module")
D = "call tools of the run from a cell"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def run(tmp_path_factory, module_children, fake_tools):
    root = tmp_path_factory.mktemp("tools_object")
    async with tether.open_run(root, plugins=[eval_plugin, fake_tools], load_entry_points=False) as r:
        yield r


async def cell(run, code):
    return await run.call("eval", {"code": code, "description": D})


def _shown(r) -> list[str]:
    """The cell's answer, without the banner of a kernel that started for it."""
    return [
        line
        for line in r.plain.strip().splitlines()
        if not line.endswith(")]") or " kernel started: " not in line
    ]


def _last_json(r) -> object:
    return json.loads(r.plain.strip().splitlines()[-2 if "tool call(s)" in r.plain else -1])


async def test_every_visible_tool_but_eval_has_a_stub_with_its_schema_parameters(run):
    code = (
        "import inspect, json\n"
        "print(json.dumps({n: {p.name: [p.kind.name, p.default is inspect.Parameter.empty]"
        " for p in inspect.signature(getattr(tools, n)).parameters.values()} for n in dir(tools)"
        " if n not in ('aio', 'call', 'help')}))"
    )
    r = await cell(run, code)
    assert not r.is_error, r.plain
    stubs = _last_json(r)
    expected = {
        t.name: {
            p: ["KEYWORD_ONLY", p in t.input_schema.get("required", [])] for p in t.input_schema["properties"]
        }
        for t in run.tools()
        if t.name != "eval"
    }
    assert stubs == expected


async def test_docstring_enum_literal_and_help(run):
    r = await cell(run, "print(tools.echo.__doc__.splitlines()[0]); tools.help()")
    assert "echo text" in r.plain.splitlines(), r.plain
    assert "write_file (write): write a file" in r.plain and "eval" not in r.plain.split("]", 1)[1]
    r = await cell(run, "tools.help('slow')")
    assert "tools.slow(*, seconds: float)" in r.plain and '"required"' in r.plain


async def test_result_object_text_data_and_error(run):
    r = await cell(run, "r = tools.echo(text='hi')\nprint(str(r), r.data, r.is_error, r.images)")
    assert "echo: hi {'echoed': 'hi'} False []" in r.plain, r.plain
    r = await cell(run, "r = tools.fail(text='x')\nprint(r.is_error, str(r)[:17])")
    assert "True fail tool refuses" in r.plain, r.plain


@pytest.mark.parametrize(
    "args",
    [{"txt": "a"}, {"text": 3}, {}, {"text": None}],
    ids=["unknown", "type", "missing", "null"],
)
async def test_wrong_arguments_fail_in_the_cell_with_the_tools_own_message(run, args):
    own = await run.call("echo", args)
    assert own.is_error
    shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
    r = await cell(run, f"calls_before = 0\ntools.echo({shown})")
    assert r.is_error and r.data["tool_calls"] == 0, r.plain  # nothing reached the run
    assert f"ToolArgumentsError: {own.plain}" in r.plain, (r.plain, own.plain)


async def test_untyped_door_absent_tools_and_a_rebound_name(run):
    r = await cell(run, "print(tools.call('echo', {'text': 'door'}), tools.call('nope', {}).is_error)")
    assert "echo: door True" in r.plain, r.plain
    r = await cell(run, "tools.eval")
    assert r.is_error and "ToolNotFoundError" in r.plain and "no tool 'eval'" in r.plain
    r = await cell(run, "tools = 5\nfrom __tether__ import tools as t\nprint(tools, t.echo(text='back'))")
    assert "5 echo: back" in r.plain, r.plain
    r = await cell(run, "from __tether__ import tools")
    assert not r.is_error


async def test_cell_answer_lists_its_calls(run):
    r = await cell(
        run,
        "for i in range(3): tools.echo(text=str(i))\ntools.call('fail', {'text': 'y'})\ntool('echo', text='z')",
    )
    assert "[5 tool call(s) from the cell: echo x4, fail]" in r.plain, r.plain
    assert r.data["tool_calls"] == 5 and r.data["tools_called"] == {"echo": 4, "fail": 1}


async def test_gathered_reads_overlap_and_writes_of_one_file_do_not(run):
    code = (
        "import asyncio, json\n"
        "rs = await asyncio.gather(*(tools.aio.slow(seconds=0.2) for _ in range(20)),"
        " tools.aio.write_file(path='same.txt', content='a'), tools.aio.write_file(path='same.txt', content='b'))\n"
        "print(json.dumps([[r.tool, r.started, r.ended, r.is_error] for r in rs]))"
    )
    r = await cell(run, code)
    assert not r.is_error, r.plain
    calls = _last_json(r)
    reads = [c for c in calls if c[0] == "slow"]
    writes = [c for c in calls if c[0] == "write_file"]
    assert len(reads) == 20 and not any(c[3] for c in calls)
    assert max(c[1] for c in reads) < min(c[2] for c in reads)  # every read started before any ended
    (_, e1), (s2, _) = sorted((c[1], c[2]) for c in writes)
    assert e1 <= s2  # the second write began after the first ended


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def exec_run(tmp_path_factory, module_children, fake_tools):
    root = tmp_path_factory.mktemp("tools_no_write")
    async with tether.open_run(
        root, plugins=[eval_plugin, fake_tools], load_entry_points=False, surface="exec_no_write"
    ) as r:
        yield r


async def test_a_surface_without_write_tools_has_no_write_stubs(exec_run):
    r = await cell(exec_run, "print(sorted(n for n in dir(tools) if n not in ('aio', 'call', 'help')))")
    assert not r.is_error, r.plain
    assert "write_file" not in r.plain and "'echo'" in r.plain
    r = await cell(exec_run, "tools.write_file")
    assert r.is_error and "no tool 'write_file'" in r.plain


async def test_an_absent_tool_is_one_line_not_a_traceback(run, exec_run):
    for r in (
        await cell(run, "x = 1\ntools.eval"),
        await cell(exec_run, "tools.write_file(path='a', content='b')"),
    ):
        assert r.is_error and r.data["error"]["ename"] == "ToolNotFoundError", r.plain
        (line,) = _shown(r)
        assert line.startswith("ToolNotFoundError: tools has no tool ") and "tools.help() lists them" in line
    r = await cell(exec_run, "print(hasattr(tools, 'write_file'), hasattr(tools, 'echo'))")
    assert "False True" in r.plain, r.plain


# -- JavaScript: the same object, each call a Promise ---------------------------------------------


async def js(run, code):
    return await run.call("eval", {"code": code, "description": D, "language": "javascript"})


async def test_js_every_visible_tool_but_eval_has_a_stub_with_its_schema(run):
    r = await js(
        run,
        "console.log(JSON.stringify(Object.fromEntries(Object.keys(tools)"
        ".filter((n) => !['call', 'declarations', 'help'].includes(n)).map((n) => [n, tools[n].schema]))))",
    )
    assert not r.is_error, r.plain
    assert _last_json(r) == {t.name: t.input_schema for t in run.tools() if t.name != "eval"}
    kernel = run.resource(tether_eval_kernels).live("javascript")
    assert kernel.catalog == catalog(run)  # the hidden execute that sends it succeeded (it is sent once)
    r = await js(run, "tools.help()")
    assert "write_file (write): write a file" in r.plain and "\neval " not in r.plain, r.plain


async def test_js_result_object_and_the_untyped_door(run):
    r = await js(
        run,
        "const r = await tools.echo({text: 'hi'}); const f = await tools.fail({text: 'x'});\n"
        "const n = await tools.call('nope', {});\n"
        "console.log(JSON.stringify([String(r), r.data, r.is_error, f.is_error, String(f).slice(0, 17), n.is_error,"
        " __tether.tools === tools]))",
    )
    assert _last_json(r) == ["echo: hi", {"echoed": "hi"}, False, True, "fail tool refuses", True, True], (
        r.plain
    )
    assert "[3 tool call(s) from the cell: echo, fail, nope]" in r.plain


@pytest.mark.parametrize(
    "args, shown",
    [({"txt": "a"}, "{txt: 'a'}"), ({"text": 3}, "{text: 3}"), ({}, "{}"), ({"text": None}, "{text: null}")],
    ids=["unknown", "type", "missing", "null"],
)
async def test_js_wrong_arguments_reject_before_any_call_with_the_tools_own_message(run, args, shown):
    own = await run.call("echo", args)
    r = await js(run, f"await tools.echo({shown})")
    assert r.is_error and r.data["tool_calls"] == 0, r.plain
    assert _shown(r) == [f"ToolArgumentsError: {own.plain}"], (r.plain, own.plain)


async def test_js_promise_all_overlaps_reads_and_never_two_writes_of_one_file(run):
    code = (
        "const rs = await Promise.all([...Array.from({length: 20}, () => tools.slow({seconds: 0.2})),"
        " tools.write_file({path: 'js.txt', content: 'a'}), tools.write_file({path: 'js.txt', content: 'b'})]);\n"
        "console.log(JSON.stringify(rs.map((r) => [r.tool, r.started, r.ended, r.is_error])))"
    )
    r = await js(run, code)
    assert not r.is_error, r.plain
    calls = _last_json(r)
    reads = [c for c in calls if c[0] == "slow"]
    writes = [c for c in calls if c[0] == "write_file"]
    assert len(reads) == 20 and len(writes) == 2 and not any(c[3] for c in calls)
    assert max(c[1] for c in reads) < min(c[2] for c in reads)  # every read started before any ended
    (_, e1), (s2, _) = sorted((c[1], c[2]) for c in writes)
    assert e1 <= s2


async def test_js_absent_tools_are_one_line_and_a_surface_hides_its_write_tools(run, exec_run):
    r = await js(run, "tools.eval")
    (line,) = _shown(r)
    assert line.startswith("ToolNotFoundError: tools has no tool 'eval' on this surface"), r.plain
    r = await js(
        exec_run, "console.log(JSON.stringify(['write_file' in tools, 'echo' in tools, Object.keys(tools)]))"
    )
    assert not r.is_error, r.plain
    assert _last_json(r) == [False, True, ["danger", "echo", "fail", "slow", "call", "declarations", "help"]]


# -- approval: a cell's write asks as the model's own call does -----------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def approved_run(tmp_path_factory, module_children):
    """A run whose write calls go to a human's approval card; the human answers from ``answers``."""
    import tether.files
    import tether_askuser.plugin as askuser_plugin

    cards, answers = [], []

    async def human(question):
        cards.append(question)
        return answers.pop(0)

    root = tmp_path_factory.mktemp("tools_approval")
    plugins = [tether.files, eval_plugin, askuser_plugin]
    options = {"askuser_port": human, "askuser_approval_by_card": ["write"]}
    async with tether.open_run(root, plugins=plugins, load_entry_points=False, options=options) as r:
        yield r, cards, answers


async def test_a_cells_write_asks_approval_as_the_models_own_call_does(approved_run):
    from tether_askuser import Answer

    run, cards, answers = approved_run
    answers[:] = [Answer.choose("Allow"), Answer.choose("Allow")]
    own = await run.call("write", {"path": "own.txt", "content": "x\n"})
    r = await cell(run, "print(tools.write(path='cell.txt', content='x\\n').is_error)")
    assert not own.is_error and "False" in r.plain, r.plain
    assert (run.root / "cell.txt").read_text() == "x\n"
    mine, theirs = cards[-2:]
    assert theirs.kind == mine.kind == "approval" and theirs.question == mine.question
    assert theirs.context == mine.context.replace("own.txt", "cell.txt")

    answers[:] = [Answer.choose("Deny"), Answer.choose("Deny")]
    own = await run.call("write", {"path": "no.txt", "content": "x\n"})
    r = await cell(run, "r = tools.write(path='no.txt', content='x\\n')\nprint(r.is_error, r.data, str(r))")
    assert own.is_error and f"True {{'error': 'refused'}} {own.plain}" in r.plain, (r.plain, own.plain)
    assert not (run.root / "no.txt").exists() and len(cards) == 4


async def test_with_nobody_to_approve_a_cells_write_is_refused(tmp_path, no_leftover_processes):
    import tether.files
    import tether_askuser.plugin as askuser_plugin

    options = {"askuser_approval_by_card": ["write"], "askuser_terminal": False}
    plugins = [tether.files, eval_plugin, askuser_plugin]
    async with tether.open_run(tmp_path, plugins=plugins, load_entry_points=False, options=options) as run:
        r = await cell(run, "r = tools.write(path='a.txt', content='x')\nprint(r.is_error, str(r))")
    assert "True call to write was not approved: approval by card is on but no human is connected" in r.plain
    assert not (tmp_path / "a.txt").exists()


async def test_js_declarations_type_check_calls_with_deno(run):
    """The documented way to an importable .d.ts: the cell writes tools.declarations() where it wants
    (nothing is written into the project unasked), and code importing it is checked by `deno check`."""
    import os
    import subprocess

    import deno

    r = await js(
        run,
        'Deno.mkdirSync("types", { recursive: true });\n'
        'Deno.writeTextFileSync("types/tools.d.ts", tools.declarations());\n'
        'Deno.readTextFileSync("types/tools.d.ts").split("\\n")[0]',
    )
    assert not r.is_error and "// The run's tools as the `tools` object" in r.plain, r.plain
    folder = run.root / "types"
    assert "export interface Tools" in (folder / "tools.d.ts").read_text()
    head = 'import type { Tools } from "./tools.d.ts";\ndeclare const t: Tools;\n'
    (folder / "good.ts").write_text(
        head + "const r = await t.echo({ text: 'a' });\nconst s: string = r.text;\n"
    )
    (folder / "bad.ts").write_text(head + "await t.echo({ txt: 'a' });\nawait t.slow({ seconds: 'x' });\n")

    command = [deno.find_deno_bin(), "check", "--quiet", "good.ts", "bad.ts"]
    env = {**os.environ, "NO_COLOR": "1"}
    checked = subprocess.run(
        command, cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert checked.returncode != 0 and "Found 2 errors." in checked.stderr, checked.stderr
    assert "good.ts" not in checked.stderr, checked.stderr  # both errors are bad.ts's
    assert (
        "'txt' does not exist" in checked.stderr
        and "'string' is not assignable to type 'number'" in checked.stderr
    )
