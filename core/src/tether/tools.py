"""What a tool is, and what it answers: the value types every family shares."""

from __future__ import annotations

import base64
import enum
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from tether.run import CallContext


class Tier(str, enum.Enum):
    """What a tool can do to the world; the tier decides which surfaces see it."""

    READ = "read"
    WRITE = "write"
    EXEC = "exec"


@attrs.frozen
class Text:
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@attrs.frozen
class Image:
    data: bytes
    mime_type: str = "image/png"

    def to_json(self) -> dict[str, Any]:
        return {"type": "image", "mimeType": self.mime_type, "data": base64.b64encode(self.data).decode()}


Block = Text | Image


@attrs.frozen
class ToolResult:
    """Content blocks for the model, an error flag, and the same facts as data for programs."""

    content: tuple[Block, ...] = attrs.field(converter=tuple)
    is_error: bool = False
    data: dict[str, Any] | None = None

    @classmethod
    def text(cls, text: str, data: dict[str, Any] | None = None) -> ToolResult:
        return cls((Text(text),), False, data)

    @classmethod
    def error(cls, text: str, data: dict[str, Any] | None = None) -> ToolResult:
        return cls((Text(text),), True, data)

    @property
    def plain(self) -> str:
        """All text blocks joined: what a test or a log wants to read."""
        return "\n".join(b.text for b in self.content if isinstance(b, Text))

    def to_json(self) -> dict[str, Any]:
        return {
            "is_error": self.is_error,
            "content": [b.to_json() for b in self.content],
            "data": self.data or {},
        }


class ToolError(Exception):
    """Raise from a handler for an error the model can act on: its message becomes the result, no traceback.

    ``ToolError("no such worker 'w9'; vibe_list shows the workers", code="unknown_worker", worker="w9")``:
    ``code`` lands in the result's structured data as ``"error"`` (what a program branches on, first), and
    every other keyword beside it. Passing another error's data on: ``ToolError(note, **exc.data)``.
    """

    def __init__(self, message: str, *, code: str | None = None, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        # the code first, as a program reading the data (and a model reading its JSON) meets it
        merged = {"error": code} if code is not None else {}
        merged.update(fields)
        if code is not None:
            merged["error"] = code
        self.code: str | None = merged.get("error")
        self.data: dict[str, Any] | None = merged or None


Handler = Callable[["CallContext", Any], "ToolResult | str | Awaitable[ToolResult | str]"]


@attrs.frozen
class Tool:
    """One tool on offer for a run.

    Attributes:
        name: the tool's name, unique in the run (a second registration of it is refused and said).
        tier: `read`, `write` or `exec`: which surfaces see the tool (`tether_tool_tier` may override it).
        description: what the model is told the tool does.
        args: an attrs class: its fields are the tool's arguments, the JSON Schema the model sees is
            derived from it (see `tether.args`), and the handler receives an instance of it.
        handler: ``handler(ctx, args)``, sync or async: the result (a `ToolResult` or a string); a
            `ToolError` it raises is the model's error message.
        family: the family that offers the tool; empty: the registering plugin's entry-point name.
        parallel_safe: whether calls may run at the same time as other calls.
        touches: when set, ``touches(args)`` names the files a call will write, relative to the root:
            the tool is a file-writing tool, its calls approved with those paths and wrapped by the
            diagnostics-on-write hooks.
        read_only: what MCP clients are told (readOnlyHint); None: read-only exactly when the tier is
            read. A read-tier tool that starts work with effects of its own (vibe_spawn's worker) says
            False.
        stages: whether the tool can stage changes for `resolve` (`tether.staging`): the core registers
            `resolve` when a tool of the run can.
    """

    name: str
    tier: Tier = attrs.field(converter=Tier)
    description: str
    args: type
    handler: Handler = attrs.field(repr=False)
    family: str = ""
    parallel_safe: bool = True
    touches: Callable[[Any], Sequence[str]] | None = attrs.field(default=None, repr=False)
    read_only: bool | None = None
    stages: bool = False

    @property
    def input_schema(self) -> dict[str, Any]:
        from tether.args import schema_for

        return schema_for(self.args)
