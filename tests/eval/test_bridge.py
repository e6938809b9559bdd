"""tool() from a cell: the call goes through the run (surfaces, approval, post-write diagnostics) over stdin."""

from __future__ import annotations

import pytest
import pytest_asyncio
import tether
import tether_eval.plugin as eval_plugin

pytestmark = pytest.mark.asyncio(loop_scope="module")
D = "call tools of the run from a cell"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def run(tmp_path_factory, module_children, fake_tools):
    root = tmp_path_factory.mktemp("bridge")
    async with tether.open_run(root, plugins=[eval_plugin, fake_tools], load_entry_points=False) as r:
        yield r


async def cell(run, code, language="python"):
    return await run.call("eval", {"code": code, "description": D, "language": language})


async def test_python_round_trip_returns_text_and_data(run):
    r = await cell(run, "out = tool('echo', {'text': 'hi'})\nprint(out)\nout.data")
    assert not r.is_error, r.plain
    assert "echo: hi" in r.plain and "{'echoed': 'hi'}" in r.plain
    assert r.data["tool_calls"] == 1


async def test_python_keyword_arguments_and_tool_result(run):
    r = await cell(run, "res = tool_result('fail', text='x')\n(res['is_error'], res['text'][:21])")
    assert "(True, \"fail tool refuses 'x'" in r.plain, r.plain


async def test_python_tool_error_raises_in_cell_with_its_message(run):
    r = await cell(
        run, "try:\n    tool('fail', {'text': 'bad'})\nexcept RuntimeError as e:\n    caught = str(e)\ncaught"
    )
    assert "fail tool refuses 'bad': give it something else" in r.plain and not r.is_error
    r = await cell(run, "tool('fail', {'text': 'bad'})")
    assert r.is_error and r.data["error"]["ename"] == "RuntimeError"
    assert "<tether-helper>" not in r.plain and "tether's helper not shown" in r.plain


async def test_python_invalid_arguments_raise_with_the_core_message(run):
    r = await cell(run, "tool('echo', {'txt': 1})")
    assert r.is_error and "unknown argument 'txt'" in r.plain and "did you mean 'text'" in r.plain


async def test_python_refused_by_approval_raises(run):
    r = await cell(run, "tool('danger', {'text': 'x'})")
    assert r.is_error and "was not approved" in r.plain and "never allows 'danger'" in r.plain


async def test_python_eval_cannot_call_itself(run):
    r = await cell(run, "tool('eval', {'code': '1', 'description': 'a b c d e'})")
    assert r.is_error and "cannot be called from inside a cell" in r.plain


async def test_python_write_tool_brings_post_write_diagnostics_into_the_cell(run):
    r = await cell(
        run,
        "res = tool('write_file', {'path': 'pkg/mod.py', 'content': 'x = 1  # TODO fix\\n'})\n"
        "print(res)\n[d['message'] for d in res.data['diagnostics']]",
    )
    assert not r.is_error, r.plain
    assert "wrote pkg/mod.py" in r.plain
    assert "This write introduced 1 error(s)" in r.plain and "pkg/mod.py:1:1: error [todo]" in r.plain
    assert "['TODO left in the code']" in r.plain
    assert (run.root / "pkg" / "mod.py").read_text() == "x = 1  # TODO fix\n"


async def test_python_hundred_calls_in_a_loop(run):
    r = await cell(
        run, "got = [tool('echo', {'text': str(i)}) for i in range(100)]\n(len(got), got[0], got[-1])"
    )
    assert "(100, 'echo: 0', 'echo: 99')" in r.plain, r.plain
    assert r.data["tool_calls"] == 100


async def test_calls_from_a_cell_leave_the_look_for_orphans_to_the_cell_call(run, monkeypatch):
    """Each look lists every process of the machine; the cell's own call looks once, at its end."""
    from tether.procs import Keeper

    looks: list[int] = []
    seen = Keeper.note_adopted
    monkeypatch.setattr(Keeper, "note_adopted", lambda self: (looks.append(1), seen(self))[1])
    r = await cell(run, "for _ in range(5): tool('echo', {'text': 'x'})")
    assert not r.is_error and r.data["tool_calls"] == 5, r.plain
    assert run._keeper is not None, "the kernel is a process of the run: its keeper is up"
    assert len(looks) == 1, f"{len(looks)} looks for orphans for one cell of 5 tool() calls"


COUNT_FLUSHES = """
import sys
_flushes = []
_cls = type(sys.stdout)
_orig = _cls.flush
_cls.flush = lambda self: (_flushes.append(self.name), _orig(self))[1]
try:
    {body}
finally:
    _cls.flush = _orig
print(sorted(_flushes))
"""


async def test_python_tool_calls_flush_only_streams_with_output_waiting(run):
    """Each flush waits for the kernel's IO thread: calls with nothing printed flush nothing."""
    r = await cell(run, COUNT_FLUSHES.format(body="for _ in range(5): tool('echo', {'text': 'x'})"))
    assert not r.is_error and "[]" in r.plain.splitlines(), r.plain
    r = await cell(run, COUNT_FLUSHES.format(body="print('a'); tool('echo', {'text': 'x'}); print('b')"))
    assert not r.is_error, r.plain
    assert r.plain.index("a\n") < r.plain.index("b\n") and "'stdout'" in r.plain, r.plain


async def test_python_unserialisable_arguments_raise_clearly(run):
    r = await cell(run, "tool('echo', {'text': object()})")
    assert r.is_error and r.data["error"]["ename"] == "TypeError" and "JSON-serializable" in r.plain


async def test_javascript_round_trip_and_loop(run):
    r = await cell(
        run,
        "const got = []; for (let i = 0; i < 100; i++) got.push(tool('echo', {text: String(i)}));\n[got.length, got[99]]",
        "javascript",
    )
    assert not r.is_error, r.plain
    assert "100" in r.plain and "echo: 99" in r.plain and r.data["tool_calls"] == 100


async def test_javascript_tool_error_and_refusal_throw(run):
    r = await cell(
        run, "let msg; try { tool('fail', {text: 'js'}) } catch (e) { msg = e.message }\nmsg", "javascript"
    )
    assert "fail tool refuses 'js'" in r.plain and not r.is_error
    r = await cell(run, "tool('danger', {text: 'x'})", "javascript")
    assert r.is_error and "was not approved" in r.plain


async def test_javascript_write_tool_diagnostics(run):
    r = await cell(
        run,
        "const res = toolResult('write_file', {path: 'web/app.js', content: '// TODO\\n'});\nres.data.diagnostics.length + ' ' + res.text",
        "javascript",
    )
    assert "1 wrote web/app.js" in r.plain and "This write introduced 1 error(s)" in r.plain


async def test_surface_hides_write_tool_from_cells(tmp_path, fake_tools, no_leftover_processes):
    async with tether.open_run(
        tmp_path, surface="exec_no_write", plugins=[eval_plugin, fake_tools], load_entry_points=False
    ) as run:
        r = await run.call(
            "eval", {"code": "tool('write_file', {'path': 'a.txt', 'content': 'x'})", "description": D}
        )
        assert r.is_error and "unknown tool 'write_file'" in r.plain
        assert not (tmp_path / "a.txt").exists()


async def test_core_write_and_read_tools_from_a_cell(tmp_path, fake_tools, no_leftover_processes):
    import tether.files

    async with tether.open_run(
        tmp_path, plugins=[eval_plugin, tether.files, fake_tools], load_entry_points=False
    ) as run:
        r = await run.call(
            "eval",
            {
                "code": "res = tool('write', {'path': 'lib/auth.py', 'content': 'def login():\\n    pass  # TODO\\n'})\n"
                "print(res)\ncontents = tool('read', {'path': 'lib/auth.py'})\nprint(contents)",
                "description": D,
            },
        )
        assert not r.is_error, r.plain
        assert "This write introduced 1 error(s)" in r.plain and "lib/auth.py:2:1: error [todo]" in r.plain
        assert "def login():" in r.plain and r.data["tool_calls"] == 2
        assert (tmp_path / "lib" / "auth.py").read_text() == "def login():\n    pass  # TODO\n"
