"""The `debug` tool: its description and the tool.

Imported when tools are registered, so it stays light: the handler (`tether_debug.dispatch`), the
actions, sessions and the DAP client load on the first call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether import Tool, ToolResult

from tether_debug.args import DebugArgs

if TYPE_CHECKING:
    from tether.run import CallContext

    from tether_debug.supervisor import DebugSupervisor


DESCRIPTION = (
    "Drive a real debugger (Debug Adapter Protocol: debugpy for Python, lldb-dap for C/C++/Rust binaries, "
    "delve for Go, dart) - one session per conversation. Typical use: action='breakpoints' (file, lines; or "
    "points=[{line, condition, hit_condition, log_message}] for conditional breakpoints and logpoints; "
    "functions=[...] for function breakpoints; exceptions='none'|'uncaught'|'raised') then action='launch' "
    "(program, args; or module='pytest' for `python -m pytest`; test=true for Go tests; stop_on_entry) which "
    "runs to the first stop and says where it stopped, with the top frame's locals; "
    "then 'stack', 'scopes' (frame_id), 'variables' (reference), 'evaluate' (expression, frame_id; an "
    "assignment such as 'x = 5' sets a variable); 'step_over'/'step_in'/'step_out'/'continue'/'pause' each "
    "wait for the next stop and return it with its locals and any logpoint lines; "
    "'output' gives the program's stdout/stderr since the last read; 'terminate' ends the session; "
    "launch with restart=true starts the same program again with the same breakpoints. "
    "'adapters' lists which debuggers are usable in this project and why not; 'status' says where it "
    "stopped and lists every breakpoint (verified, the line it bound to); 'attach' connects to a program "
    "already listening for a debugger (port: python -m debugpy --listen 127.0.0.1:PORT) or to a running "
    "native process (pid, lldb). A second launch while a session lives is refused: terminate first (or "
    "restart=true). Sessions end after a time limit (30 min by default)."
)


def make_tools(supervisor: DebugSupervisor) -> list[Tool]:
    """The family's one tool, bound to the run's session supervisor: a session per conversation, so it
    is not parallel-safe."""

    async def handle(ctx: CallContext, args: DebugArgs) -> ToolResult:
        from tether_debug.dispatch import handle  # the actions load at the first call, not at registration

        return await handle(ctx, supervisor, args)

    return [
        Tool(
            name="debug",
            tier="exec",
            description=DESCRIPTION,
            args=DebugArgs,
            handler=handle,
            parallel_safe=False,
        )
    ]
