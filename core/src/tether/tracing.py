"""Child spans for what a tool call asks of a live resource: a language server's request, a kernel's cell,
a debug adapter's request.

`tether serve` answers each `tools/call` inside the span the MCP SDK opens for it (tether's attributes
are on that span, see `tether.serve`). A family wraps each request it makes of its resource in
`span(...)`, and a harness that exports traces sees where a slow call spent its time, one child span per
request, in the call's trace.

A span is made only inside a span that records (a traced call): requests a family makes on its own
(a server's startup, a background poll) open no root spans of their own, and without OpenTelemetry
installed (it comes with the `mcp` extra) or without an SDK configured, `span` costs a context-variable
read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

try:
    from opentelemetry import trace as _trace
except ImportError:  # tether-core without its mcp extra: no tracing at all
    _trace = None

__all__ = ["annotate", "span"]


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[None]:
    """A client span ``name`` (e.g. ``"lsp textDocument/hover"``) around the block, a child of the
    current call's span; nothing when no traced call is current. An exception leaving the block is
    recorded on the span and goes on."""
    if _trace is None or not _trace.get_current_span().is_recording():
        yield
        return
    tracer = _trace.get_tracer("tether")
    with tracer.start_as_current_span(name, kind=_trace.SpanKind.CLIENT, attributes=dict(attributes or {})):
        yield


def annotate(attributes: Mapping[str, Any]) -> None:
    """Attributes on the current span (one `span` opened), when it records: what a request's answer
    says, known only at its end (a cell's status)."""
    if _trace is None:
        return
    current = _trace.get_current_span()
    if current.is_recording():
        current.set_attributes(dict(attributes))
