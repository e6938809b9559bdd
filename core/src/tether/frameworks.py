"""A run's tools as an agent framework's own tools, in process: pydantic-ai, LangChain, OpenAI Agents SDK.

    async with tether.open_run(root, surface="plan") as run:
        agent = pydantic_ai.Agent(model, tools=tether.frameworks.pydantic_ai_tools(run))

Each tool keeps tether's name, description and JSON Schema, and its handler is ``run.call``, so
tiers, approval and diagnostics on write apply as in any call. Each framework imports only when its
function is called. What the frameworks do not share is mapped here:

| | an error result | `data` (structured, for programs) | an image |
|---|---|---|---|
| pydantic-ai | `ToolFailed`: the model sees it, no retry budget spent | `ToolReturn.metadata` | `BinaryContent` in the return value |
| LangChain | `ToolException`, answered as an error `ToolMessage` | the `ToolMessage.artifact` | an image content block |
| OpenAI Agents SDK | the text, returned (the SDK sends it to the model) | (in the text; the SDK keeps no side channel) | `ToolOutputImage` |

The tools of the run at the time of the call: a surface or family added later needs a new list.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from tether.tools import Image, ToolResult

if TYPE_CHECKING:
    from tether.run import Run


def _text(result: ToolResult) -> str:
    return "\n".join(b.text for b in result.content if not isinstance(b, Image))


def _images(result: ToolResult) -> list[Image]:
    return [b for b in result.content if isinstance(b, Image)]


def pydantic_ai_tools(run: Run) -> list[Any]:
    """The run's tools as `pydantic_ai.Tool`s."""
    from pydantic_ai import BinaryContent, Tool, ToolFailed, ToolReturn

    def make(tool) -> Tool:
        async def call(**arguments: Any) -> Any:
            result = await run.call(tool.name, arguments)
            if result.is_error:
                raise ToolFailed(result.plain)
            images = [BinaryContent(data=i.data, media_type=i.mime_type) for i in _images(result)]
            return ToolReturn(
                return_value=[_text(result), *images] if images else _text(result), metadata=result.data
            )

        return Tool.from_schema(
            call, name=tool.name, description=tool.description, json_schema=tool.input_schema
        )

    return [make(t) for t in run.listed_tools()]


def langchain_tools(run: Run) -> list[Any]:
    """The run's tools as LangChain `StructuredTool`s (content and artifact: the artifact is `data`)."""
    from langchain_core.tools import StructuredTool, ToolException

    def make(tool) -> StructuredTool:
        async def call(**arguments: Any) -> tuple[Any, Any]:
            result = await run.call(tool.name, arguments)
            if result.is_error:
                raise ToolException(result.plain)
            images = [
                {"type": "image", "base64": base64.b64encode(i.data).decode(), "mime_type": i.mime_type}
                for i in _images(result)
            ]
            content = [{"type": "text", "text": _text(result)}, *images] if images else _text(result)
            return content, result.data

        return StructuredTool(
            name=tool.name,
            description=tool.description,
            args_schema=tool.input_schema,
            coroutine=call,
            response_format="content_and_artifact",
            handle_tool_error=True,
        )

    return [make(t) for t in run.listed_tools()]


def openai_agents_tools(run: Run) -> list[Any]:
    """The run's tools as OpenAI Agents SDK `FunctionTool`s.

    Not in the SDK's strict mode: tether's schemas have optional arguments, which strict mode would
    make required (tether reads a null for them as "not given", so a strict client works too)."""
    from agents import FunctionTool
    from agents.tool import ToolOutputImage, ToolOutputText

    def make(tool) -> FunctionTool:
        async def call(context: Any, arguments_json: str) -> Any:
            try:
                arguments = json.loads(arguments_json or "{}")
            except json.JSONDecodeError as exc:
                return f"the arguments are not JSON ({exc.msg} at column {exc.colno}); send a JSON object"
            result = await run.call(tool.name, arguments)
            if result.is_error:
                return result.plain
            images = [
                ToolOutputImage(image_url=f"data:{i.mime_type};base64,{base64.b64encode(i.data).decode()}")
                for i in _images(result)
            ]
            return [ToolOutputText(text=_text(result)), *images] if images else _text(result)

        return FunctionTool(
            name=tool.name,
            description=tool.description,
            params_json_schema=tool.input_schema,
            on_invoke_tool=call,
            strict_json_schema=False,
        )

    return [make(t) for t in run.listed_tools()]
