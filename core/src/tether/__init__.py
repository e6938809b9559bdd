"""tether: run-bound tools for coding agents.

``import tether`` stays light: plugins are discovered when a run opens, and each family imports its
heavy machinery only when one of its tools needs it.
"""

from typing import TYPE_CHECKING

from tether.args import arg
from tether.diagnostics import Diagnostic
from tether.hookspecs import NO_RESOURCE, hookimpl, hookspec
from tether.tools import Image, Text, Tier, Tool, ToolError, ToolResult

if TYPE_CHECKING:  # for type checkers; at run time __getattr__ below imports these on first use
    from tether.run import CallContext, Run, list_tools, open_run, open_run_sync
    from tether.surfaces import Surface

__all__ = [
    "NO_RESOURCE",
    "CallContext",
    "Diagnostic",
    "Image",
    "Run",
    "Surface",
    "Text",
    "Tier",
    "Tool",
    "ToolError",
    "ToolResult",
    "arg",
    "hookimpl",
    "hookspec",
    "list_tools",
    "open_run",
    "open_run_sync",
]


def __getattr__(name: str):  # lazy: the run machinery is imported on first use
    if name in {"open_run", "open_run_sync", "list_tools", "Run", "CallContext"}:
        from tether import run

        return getattr(run, name)
    if name == "Surface":
        from tether.surfaces import Surface

        return Surface
    raise AttributeError(name)
