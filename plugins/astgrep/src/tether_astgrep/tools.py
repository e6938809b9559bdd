"""The family's tools, bound to the run's parser pool: ast_grep (`tether_astgrep.grep`) and ast_edit (`tether_astgrep.edit`).

Listing them imports only their arguments (`tether_astgrep.args`); each tool's code loads at its first call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether import Tool, ToolResult

from tether_astgrep.args import EditArgs, GrepArgs

if TYPE_CHECKING:
    from tether.run import CallContext

    from tether_astgrep.parsers import ParserPool


def make_tools(pool: ParserPool) -> list[Tool]:
    """The family's tools; their handlers search with ``pool``, the run's parser pool."""

    async def grep(ctx: CallContext, args: GrepArgs) -> ToolResult:
        from tether_astgrep.grep import ast_grep

        return await ast_grep(ctx, args, pool)

    async def edit(ctx: CallContext, args: EditArgs) -> ToolResult:
        from tether_astgrep.edit import ast_edit

        return await ast_edit(ctx, args, pool)

    return [
        Tool(
            "ast_grep",
            "read",
            "Find code by its syntax shape, not its text: the pattern is code with metavariables ($A, $$$ARGS), "
            "so `dispose($X)` matches every call to dispose however it is spaced, and never a string or comment. "
            "For conditions a pattern cannot state (not inside a `with`, inside a loop, a capture matching a "
            "regex) give an ast-grep rule object as rule instead. Answers file:line:col, the matched code and "
            "the captures.",
            GrepArgs,
            grep,
        ),
        Tool(
            "ast_edit",
            "write",
            "Stage a structural rewrite: every match of pattern is replaced by rewrite, with captured "
            "metavariables substituted and re-indented. Only the code the pattern covers is replaced (code a "
            "matched node has past the end of the pattern stays; a rewrite that breaks the parse of a file is "
            "refused with file:line). Takes a rule instead of a pattern, as ast_grep. Writes nothing: answers a "
            "diff preview, the diagnostics the change would introduce (checked without writing), and an edit_id for "
            "resolve.",
            EditArgs,
            edit,
            stages=True,
        ),
    ]
