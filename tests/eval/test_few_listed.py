"""A harness offers its model few tools and lets cells reach the rest: `Surface(..., listed=...)`.

The model is listed only the surface's `listed` tools (MCP tools/list, `tether tools`, the framework
adapters); every tool of the surface's tiers stays callable, from a cell's `tools` object (which
`tools.help()` shows) and by name. What the surface's tiers leave out stays out of both.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import tether
import tether.files
import tether_eval.plugin as eval_plugin
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from tether import Surface, hookimpl
from tether.frameworks import pydantic_ai_tools

PLUGINS = str(Path(__file__).with_name("plugins"))
D = "reach the unlisted tools from a cell"


class Few:
    @hookimpl
    def tether_register_surfaces(self, run):
        return [
            Surface("few", {"read", "write", "exec"}, listed={"eval", "read"}),
            Surface("few_reads", {"read"}, listed={"read"}),  # eval is exec: not even callable here
        ]


@pytest.mark.asyncio
async def test_the_model_is_listed_eval_and_read_and_a_cell_reaches_the_rest(
    tmp_path, fake_tools, no_leftover_processes
):
    (tmp_path / "notes.txt").write_text("first\n")
    plugins = [eval_plugin, tether.files, fake_tools, Few()]
    async with tether.open_run(tmp_path, plugins=plugins, load_entry_points=False, surface="few") as run:
        assert [t.name for t in run.listed_tools()] == ["eval", "read"]
        assert [t["name"] for t in run.tool_listing()["tools"]] == ["eval", "read"]
        assert [t.name for t in pydantic_ai_tools(run)] == ["eval", "read"]
        callable_ = {t.name for t in run.tools()}
        assert {"echo", "write", "write_file", "edit", "apply_patch"} <= callable_

        r = await run.call(
            "eval",
            {
                "code": "tools.help()\n"
                "print(tools.echo(text='from a cell'))\n"
                "print(tools.write(path='made.txt', content='by the cell\\n').is_error)",
                "description": D,
            },
        )
        assert not r.is_error, r.plain
        shown = r.plain.splitlines()
        assert any(line.startswith("echo (read): echo text") for line in shown), r.plain
        assert any(line.startswith("write (write): ") for line in shown), r.plain
        assert "echo: from a cell" in r.plain and "False" in r.plain, r.plain
        assert (tmp_path / "made.txt").read_text() == "by the cell\n"
        # not listed, still callable by name: the listing is what the model is shown, not a gate
        assert (await run.call("echo", {"text": "direct"})).plain == "echo: direct"


@pytest.mark.asyncio
async def test_listed_never_widens_the_surfaces_tiers(tmp_path, fake_tools, no_leftover_processes):
    plugins = [eval_plugin, tether.files, fake_tools, Few()]
    async with tether.open_run(
        tmp_path, plugins=plugins, load_entry_points=False, surface="few_reads"
    ) as run:
        assert [t.name for t in run.listed_tools()] == ["read"]
        assert "write" not in {t.name for t in run.tools()} and "eval" not in {t.name for t in run.tools()}
        refused = await run.call("write", {"path": "x.txt", "content": "x"})
        assert refused.is_error and "unknown tool 'write'" in refused.plain
        assert not (tmp_path / "x.txt").exists()


@pytest.mark.parametrize(
    ("listed", "message"),
    [
        ("eval", "listed takes a set of tool names, not the string 'eval'"),
        ({"eval", ""}, "surface 'bad': listed takes tool names (non-empty strings)"),
        ({"eval", 3}, "surface 'bad': listed takes tool names (non-empty strings)"),
    ],
)
def test_a_bad_listed_is_one_clear_line(listed, message):
    with pytest.raises(ValueError) as caught:
        Surface("bad", {"read"}, listed=listed)
    assert str(caught.value) == message


@pytest.mark.asyncio
async def test_serve_lists_eval_and_read_and_a_cell_calls_the_rest(tmp_path, no_leftover_processes):
    (tmp_path / "a.py").write_text("def greet(name):\n    return 'hi ' + name\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([PLUGINS, os.environ.get("PYTHONPATH", "")])}
    env.pop("TETHER_PLUGINS", None)
    server = StdioServerParameters(
        command=sys.executable,
        args=[
            *("-m", "tether.cli", "serve", "--root", str(tmp_path)),
            *("-p", "tether_test_few_listed", "--surface", "few"),
        ],
        env=env,
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = sorted(t.name for t in (await session.list_tools()).tools)
        assert listed == ["eval", "read"]
        code = (
            "import contextlib, io, json\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    tools.help()\n"
            "names = [line.split()[0] for line in out.getvalue().splitlines()[:-1]]\n"
            "found = tools.ast_grep(pattern='def $F($$$A): $$$B', path='.')\n"
            "print(json.dumps({'help': names, 'found': [m['text'].splitlines()[0] for m in found.data['matches']]}))"
        )
        result = await session.call_tool("eval", {"code": code, "description": D})
        assert result.is_error is False, result.content
        text = "\n".join(block.text for block in result.content if block.type == "text")
        seen = json.loads(next((line for line in text.splitlines() if line.startswith("{")), text))
        assert {"ast_grep", "write", "edit", "lsp"} <= set(seen["help"]) and "eval" not in seen["help"]
        assert seen["found"] == ["def greet(name):"]
