"""The `tools` object in a Python cell: typed stubs of the run's tools, results, help, the untyped door,
calls run at once (with the run's overlap rule), and the cell's answer listing its calls."""

from __future__ import annotations

import json

import pytest
import pytest_asyncio
import tether
import tether_eval.plugin as eval_plugin

pytestmark = pytest.mark.asyncio(loop_scope="module")
D = "call tools of the run from a cell"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def run(tmp_path_factory, module_children, fake_tools):
    root = tmp_path_factory.mktemp("tools_object")
    async with tether.open_run(root, plugins=[eval_plugin, fake_tools], load_entry_points=False) as r:
        yield r


async def cell(run, code):
    return await run.call("eval", {"code": code, "description": D})


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
    assert r.is_error and "AttributeError" in r.plain and "no tool 'eval'" in r.plain
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
