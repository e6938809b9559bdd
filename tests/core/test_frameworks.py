"""A run's tools in agent frameworks (`tether.frameworks`), each driven offline by a scripted model through
the framework's own tool execution: pydantic-ai's FunctionModel, LangChain's GenericFakeChatModel, and
for the OpenAI Agents SDK (which ships no test model) a `Model` of the SDK's interface that plays a
script. Each script calls: `read` with a strict-mode null, `read` of a missing file (an error result),
and `snap` (a result with an image and data)."""

from __future__ import annotations

import attrs
import pytest
import tether
import tether.files
from tether import Tier, Tool, ToolResult, hookimpl
from tether.frameworks import langchain_tools, openai_agents_tools, pydantic_ai_tools
from tether.tools import Image, Text

PNG = b"\x89PNG\r\n\x1a\nnot really"
CALLS = [("read", {"path": "hello.txt", "offset": None}), ("read", {"path": "missing.txt"}), ("snap", {})]


@attrs.frozen
class NoArgs:
    pass


async def snap(ctx, args):
    return ToolResult((Text("a picture"), Image(PNG)), data={"width": 1})


class Camera:
    @hookimpl
    def tether_register_tools(self, run, register):
        register(Tool("snap", Tier.READ, "Take a picture.", NoArgs, snap, family="camera"))


@pytest.fixture
async def run(tmp_path):
    (tmp_path / "hello.txt").write_text("hello\n")
    async with tether.open_run(tmp_path, plugins=[tether.files, Camera()], load_entry_points=False) as run:
        yield run


async def test_pydantic_ai(run):
    from pydantic_ai import Agent, BinaryContent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    def script(messages, info):
        if len(messages) == 1:
            tools = {t.name: t for t in info.function_tools}
            assert tools["read"].parameters_json_schema["required"] == ["path"]  # tether's own schema
            return ModelResponse(
                parts=[ToolCallPart(n, a, tool_call_id=str(i)) for i, (n, a) in enumerate(CALLS)]
            )
        return ModelResponse(parts=[TextPart("done")])

    result = await Agent(FunctionModel(script), tools=pydantic_ai_tools(run)).run("go")
    assert result.output == "done"
    returns = {
        p.tool_call_id: p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)
    }
    assert returns["0"].content == "     1\thello" and returns["0"].metadata["total_lines"] == 1
    assert returns["1"].outcome == "failed" and "no such file: 'missing.txt'" in returns["1"].content
    assert returns["2"].content == ["a picture", BinaryContent(data=PNG, media_type="image/png")]
    assert returns["2"].metadata == {"width": 1}


async def test_langchain(run):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    tools = {t.name: t for t in langchain_tools(run)}
    assert tools["read"].args["offset"]["type"] == "integer" and tools["read"].description.startswith(
        "Read a text"
    )
    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    content="",
                    tool_calls=[{"name": n, "args": a, "id": str(i)} for i, (n, a) in enumerate(CALLS)],
                )
            ]
        )
    )
    answer = await model.ainvoke("go")
    done = [await tools[c["name"]].ainvoke({**c, "type": "tool_call"}) for c in answer.tool_calls]
    assert (done[0].status, done[0].content, done[0].artifact["total_lines"]) == (
        "success",
        "     1\thello",
        1,
    )
    assert done[1].status == "error" and "no such file: 'missing.txt'" in done[1].content
    assert done[2].content == [
        {"type": "text", "text": "a picture"},
        {"type": "image", "base64": "iVBORw0KGgpub3QgcmVhbGx5", "mime_type": "image/png"},
    ]
    assert done[2].artifact == {"width": 1}


async def test_openai_agents(run):
    import json

    from agents import Agent, ModelResponse, RunConfig, Runner, Usage
    from agents.items import ToolCallOutputItem
    from agents.models.interface import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class Script(Model):
        def __init__(self):
            self.turn = 0

        async def get_response(self, system_instructions, input, model_settings, tools, *args, **kwargs):
            self.turn += 1
            if self.turn == 1:
                assert {t.name for t in tools} >= {"read", "snap"}
                output = [
                    ResponseFunctionToolCall(
                        type="function_call", call_id=str(i), name=n, arguments=json.dumps(a)
                    )
                    for i, (n, a) in enumerate(CALLS)
                ]
            else:
                output = [
                    ResponseOutputMessage(
                        id="m",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[ResponseOutputText(type="output_text", text="done", annotations=[])],
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError("the script is not streamed")

    agent = Agent(name="harness", model=Script(), tools=openai_agents_tools(run))
    result = await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == "done"
    outputs = {i.raw_item["call_id"]: i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)}
    assert outputs["0"] == "     1\thello"
    assert "no such file: 'missing.txt'" in outputs["1"]
    assert [o.type for o in outputs["2"]] == ["text", "image"]
    assert outputs["2"][1].image_url == "data:image/png;base64,iVBORw0KGgpub3QgcmVhbGx5"


async def test_openai_agents_through_mcp(tmp_path, no_leftover_processes):
    """The same harness on `tether serve`, through the SDK's own MCP client, instead of in process."""
    import json
    import sys

    from agents import Agent, ModelResponse, RunConfig, Runner, Usage
    from agents.items import ToolCallOutputItem
    from agents.mcp import MCPServerStdio
    from agents.models.interface import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    (tmp_path / "hello.txt").write_text("hello\n")

    class Script(Model):
        def __init__(self):
            self.turn = 0

        async def get_response(self, system_instructions, input, model_settings, tools, *args, **kwargs):
            self.turn += 1
            if self.turn == 1:
                assert "read" in {t.name for t in tools}
                output = [
                    ResponseFunctionToolCall(
                        type="function_call", call_id=str(i), name=n, arguments=json.dumps(a)
                    )
                    for i, (n, a) in enumerate(CALLS[:2])
                ]
            else:
                output = [
                    ResponseOutputMessage(
                        id="m",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[ResponseOutputText(type="output_text", text="done", annotations=[])],
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError("the script is not streamed")

    server = MCPServerStdio(
        params={"command": sys.executable, "args": ["-m", "tether.cli", "serve", "--root", str(tmp_path)]},
        name="tether",
    )
    async with server:
        agent = Agent(name="harness", model=Script(), mcp_servers=[server])
        result = await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == "done"
    outputs = {i.raw_item["call_id"]: i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)}
    assert outputs["0"] == {"type": "text", "text": "     1\thello"}
    assert "no such file: 'missing.txt'" in json.dumps(outputs["1"])


async def test_pydantic_ai_through_mcp(tmp_path, no_leftover_processes):
    """pydantic-ai's MCP toolset (a FastMCP client) on `tether serve`: the model sees the text of the
    result (this client would show it `structuredContent` instead, were `data` sent as that)."""
    import sys

    from fastmcp.client import Client
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    (tmp_path / "hello.txt").write_text("hello\n")

    def script(messages, info):
        if len(messages) == 1:
            assert "read" in {t.name for t in info.function_tools}
            return ModelResponse(
                parts=[ToolCallPart(n, a, tool_call_id=str(i)) for i, (n, a) in enumerate(CALLS[:2])]
            )
        return ModelResponse(parts=[TextPart("done")])

    serve = StdioTransport(
        command=sys.executable, args=["-m", "tether.cli", "serve", "--root", str(tmp_path)]
    )
    async with Agent(
        FunctionModel(script), toolsets=[MCPToolset(Client(serve), tool_error_behavior="failed")]
    ) as agent:
        result = await agent.run("go")
    assert result.output == "done"
    returns = {
        p.tool_call_id: p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)
    }
    assert returns["0"].content == "     1\thello"
    assert returns["1"].outcome == "failed" and "no such file: 'missing.txt'" in str(returns["1"].content)
