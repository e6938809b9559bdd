"""The `eval` tool: a cell in the run's persistent Python or JavaScript kernel."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs
from tether import Text, Tier, Tool, ToolError, ToolResult, arg
from tether.tools import Block

from tether_eval.bridge import answer_calls, calls_line, catalog
from tether_eval.options import EvalOptions

if TYPE_CHECKING:
    from tether.run import CallContext, Run

    from tether_eval.kernel import Kernel
    from tether_eval.kernels import KernelFactory

DESCRIPTION = (
    "Run a Python (default) or JavaScript (Deno) cell in this run's persistent kernel: variables, imports "
    "and loaded data persist between calls. The last expression is shown as a notebook shows it, display() "
    "works, a pandas DataFrame comes back as a text table and a matplotlib figure as an image. %pip, %cd, "
    "!cmd, %%bash, %%timeit and (Python) every IPython magic work; obj? shows a signature and docstring. "
    "From the cell, tool(name, args) calls another tool of this run and returns its text (a refused or failed "
    "call raises). reset=true starts a clean interpreter first. A cell that shows no new output for the "
    "inactivity budget (5 minutes by default), or runs past its total budget (1 hour), is interrupted."
)


@attrs.frozen
class EvalArgs:
    code: str = arg("The cell to run (several lines are fine; the last expression is displayed).")
    description: str = arg(
        "5 to 10 words saying what the cell does: its label in the transcript, e.g. 'Load sales.csv and show the first rows'."
    )
    language: Literal["python", "javascript"] = arg(
        "python (ipykernel, the project's .venv when it has ipykernel) or javascript (Deno, TypeScript works too).",
        default="python",
    )
    reset: bool = arg(
        "Throw the interpreter away and start a clean one before running the cell.", default=False
    )


def make_tools(factory: KernelFactory) -> list[Tool]:
    """The family's tool, `eval`, bound to the run's kernel factory."""
    missing = factory.javascript_unavailable()

    async def handler(ctx: CallContext, args: EvalArgs) -> ToolResult:
        return await run_cell(ctx, args, factory)

    return [
        Tool(
            name="eval",
            tier=Tier.EXEC,
            description=f"{DESCRIPTION} {missing}" if missing else DESCRIPTION,
            args=EvalArgs,
            handler=handler,
            parallel_safe=False,
        )
    ]


def _check(args: EvalArgs) -> None:
    words = args.description.split()
    if not 5 <= len(words) <= 10:
        raise ToolError(
            f"description must be 5 to 10 words (got {len(words)}: {args.description.strip()[:80]!r}); it labels the "
            "cell in the transcript. Say what the cell does, e.g. 'Load sales.csv and show the first rows'.",
            code="invalid_description",
            words=len(words),
        )
    if not args.code.strip() and not args.reset:
        raise ToolError(
            "code is empty: give the statements to run (or reset=true with empty code to only restart the interpreter).",
            code="empty_code",
        )


async def run_cell(ctx: CallContext, args: EvalArgs, factory: KernelFactory) -> ToolResult:
    from tether_eval.idioms import rewrite
    from tether_eval.kernels import describe
    from tether_eval.render import render_cell

    _check(args)
    run = ctx.run
    opts = run.options.of(EvalOptions)
    language = args.language
    code = args.code if args.code.strip() else ""
    if language == "javascript" and code:
        code = rewrite(code)  # Python cells go to IPython as they are: its transformers know !cmd and %magic
    notes: list[str] = []
    async with factory.lock(language):
        if args.reset:
            had = factory.live(language) is not None
            await factory.discard(language)
            if had:
                notes.append(f"[{language} interpreter reset: all earlier state is gone]")
        factory.lost_between_cells = False
        kernel, started = await factory.get(language)
        if factory.lost_between_cells:
            why = factory.lost_between_cells
            how = (
                f"was given up since the last cell ({why})"
                if isinstance(why, str)
                else "died since the last cell (killed from outside?)"
            )
            notes.append(f"[the previous {language} kernel {how}: its state is lost]")
        info = describe(kernel)
        if started:
            notes += _banner(run, kernel, factory.python_note)
        if not code:
            return ToolResult.text("\n".join(notes), {"status": "reset", "kernel": info})

        offered = catalog(run)
        if kernel.catalog != offered:  # the `tools` object follows the surface as it is now
            setter = "__import__('__tether__').set_catalog" if language == "python" else "__tether.setCatalog"
            pushed = await kernel.execute(f"{setter}({json.dumps(offered)})", timeout=30.0, silent=True)
            if pushed.status == "ok" and (pushed.reply or {}).get("status") == "ok":
                kernel.catalog = offered
        called: list[str] = []

        async def bridge(payload: str) -> str:
            return await answer_calls(ctx, payload, factory.overlap, called)

        end = await kernel.execute(
            code,
            timeout=opts.eval_timeout,
            total=opts.eval_total_timeout,
            grace=opts.eval_interrupt_grace,
            bridge=bridge,
            keep_chars=opts.eval_max_output_chars,
        )
        if end.status in ("died", "stuck"):
            await factory.discard(language, now=True)  # a stuck kernel would not answer a polite shutdown
    payloads = (end.reply or {}).get("payload") or []
    shown = await render_cell(end.messages, opts.eval_max_output_chars, payloads)
    blocks: list[Block] = [Text("\n".join(notes))] if notes else []
    blocks += shown.blocks
    status = end.status
    if status == "ok" and ((end.reply or {}).get("status") == "error" or shown.error):
        status = "error"
    tail: list[str] = []
    if kernel.spec.policy:
        from tether.sandbox import egress_notes, explain

        tail += explain("\n".join(b.text for b in shown.blocks if isinstance(b, Text)), kernel.spec.policy)
        tail += egress_notes(run)
    if end.spent == "total":
        why = f"ran for its total budget of {opts.eval_total_timeout:g} s (run option eval_total_timeout)"
    else:
        why = f"showed no output for {opts.eval_timeout:g} s (run option eval_timeout)"
    if end.status == "interrupted":
        tail.append(
            f"[the cell {why} and was interrupted; the kernel and its state survive. "
            "Print progress in long loops, or split the work into several cells]"
        )
    elif end.status == "stuck":
        tail.append(
            f"[the cell {why} and did not stop when interrupted, so the kernel was "
            "stopped: its state (variables, imports) was lost and the next call starts a fresh kernel]"
        )
    elif end.status == "died" and kernel.lost:
        tail.append(
            f"[the kernel was given up while running this cell: {kernel.lost}. Its state is lost; the next "
            "call starts a fresh kernel]"
        )
    elif end.status == "died":
        why = kernel.log_tail(8)
        tail.append(
            "[the kernel died while running this cell (e.g. os._exit, a crash or running out of memory): its state "
            "is lost; the next call starts a fresh kernel]" + (f"\nkernel log:\n{why}" if why else "")
        )
    if end.inputs:
        asked = ", ".join(repr(p) for p in end.inputs[:3])
        tail.append(f"[input() was called ({asked}); nobody can type into a cell, so it got an empty string]")
    if called:
        tail.append(calls_line(called))
    if tail:
        blocks.append(Text("\n".join(tail)))
    if not blocks:
        blocks.append(Text("[no output]"))
    data = {
        "status": status,
        "language": language,
        "kernel": {**info, "started": started},
        "execution_count": (end.reply or {}).get("execution_count"),
        "images": shown.images,
        "output_cut": shown.cut,
        "tool_calls": len(called),
        "tools_called": dict(collections.Counter(called)),
    }
    if shown.error:
        data["error"] = shown.error
    is_error = status in ("error", "interrupted", "stuck", "died")
    return ToolResult(tuple(blocks), is_error, data)


def _banner(run: Run, kernel: Kernel, python_note: str) -> list[str]:
    """The first cell's notes: which interpreter the cell sees, where it runs, where the project's code comes from."""
    spec = kernel.spec
    if spec.language != "python":
        started = f"[{spec.language} kernel started: {_shown(run, spec.interpreter)}, on the {spec.where} ({kernel.started_in:.1f} s)]"
        return [started, f"[sandboxed: {spec.policy}]"] if spec.policy else [started]
    notes = [
        f"[python kernel started: {_shown(run, kernel.installed.get('executable') or spec.interpreter)} (sys.executable) in {spec.environment}, "
        f"on the {spec.where} ({kernel.started_in:.1f} s)]"
    ]
    if python_note:
        notes.append(f"[{python_note}]")
    if spec.policy:
        notes.append(f"[sandboxed: {spec.policy}]")
    found = kernel.installed.get("project_modules") or []
    if found:
        where = " and ".join(_shown(run, p) for p in spec.project_paths)
        names = ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
        notes.append(
            f"[the project's own code comes first on sys.path ({where}): {names} are imported from the project, "
            f"not from {spec.environment}]"
        )
    early = kernel.installed.get("imported_before") or []
    if early:
        notes.append(
            f"[already imported by the kernel itself, so they still come from {spec.environment}: {', '.join(early[:10])}]"
        )
    return notes


def _shown(run: Run, path: str) -> str:
    """A path for the model: relative inside the root, else as it is (links not followed: a venv's
    python is a link to its base interpreter, and the venv is what the cell sees)."""
    p = Path(path)
    return p.relative_to(run.root).as_posix() or "." if p.is_relative_to(run.root) else path
