"""The vibe tools: spawn, send, wait, kill and list background workers of a roster, and merge one's work.

The five that steer are tier read: the gate belongs on the worker's own tools, where the work
happens; a worker runs with its own surface. `vibe_merge` lands a worker's changes in the root, so it
is tier write: plan and read-only surfaces can steer workers but not land their work.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import attrs
from tether import Tool, ToolError, ToolResult, arg
from tether.output import cap_items, cap_text

from tether_vibe.options import DEFAULT_WAIT, VibeOptions
from tether_vibe.roster import Roster, Status, WorkerInfo, WorkerTier

if TYPE_CHECKING:
    from tether.run import CallContext
    from tether.tools import Handler

    from tether_vibe.merge import MergePlan

LIST_CAP = 50  # workers shown by vibe_list
LIST_RESULT_CHARS = 1_000  # of a result, in vibe_list's data
LINE_CHARS = 160  # of a result, in a one-line summary
TEXT_CHARS = 8_000  # of a result or log, in a wait/kill answer
LOG_LINES = 20  # of a failed worker's log
PROGRESS_EVERY = 5.0  # seconds between progress reports while waiting
ROSTER_TIMEOUT = 60.0  # bound on a roster's answer (beyond the asked wait); the command roster answers in ms

TIER_HELP = "'fast' for mechanical work with a clear spec, 'good' for design, review, or reviewing a fast worker's output"


@attrs.frozen
class SpawnArgs:
    brief: str = arg(
        "Everything the worker needs to know: the task, the files, what done looks like.", min_length=1
    )
    label: str = arg(
        "A short name for the worker, shown by vibe_list (e.g. 'tests for parser').",
        min_length=1,
        max_length=80,
    )
    tier: WorkerTier = arg(f"Which kind of worker: {TIER_HELP}.", default="fast")
    isolation: Literal["worktree", "none"] | None = arg(
        "Where it works: 'worktree' (a git worktree and branch of its own, from HEAD plus the uncommitted "
        "changes; land its work with vibe_merge) or 'none' (the root itself). Default: the run option "
        "vibe_isolation (worktree in a git repository with a commit, else none).",
        default=None,
    )
    budget_seconds: float | None = arg(
        "A total budget in seconds for its run: at the end it is stopped and marked 'timed out' (not "
        "vibe_wait's timeout_seconds, which only bounds one wait). Default: none.",
        default=None,
        minimum=1,
        maximum=86_400,
    )


@attrs.frozen
class SendArgs:
    worker_id: str = arg("The worker's id, as vibe_spawn or vibe_list gave it (e.g. 'w1').", min_length=1)
    message: str = arg(
        "What to add to the worker's briefing (a correction, the next step, review notes).", min_length=1
    )


@attrs.frozen
class WaitArgs:
    worker_id: str = arg("The worker's id, as vibe_spawn or vibe_list gave it (e.g. 'w1').", min_length=1)
    timeout_seconds: float | None = arg(
        "How long to wait at most; when it passes the worker is still running (not an error). "
        f"Default: the run option vibe_wait_timeout ({DEFAULT_WAIT:.0f} s unless the harness set it).",
        default=None,
        minimum=0,
        maximum=3600,
    )


@attrs.frozen
class KillArgs:
    worker_id: str = arg("The worker's id, as vibe_spawn or vibe_list gave it (e.g. 'w1').", min_length=1)


@attrs.frozen
class ListArgs:
    pass


@attrs.frozen
class MergeArgs:
    worker_id: str = arg("The worker's id, as vibe_spawn or vibe_list gave it (e.g. 'w1').", min_length=1)
    action: Literal["apply", "discard"] = arg(
        "'apply' brings the worker's changes into the root (all or nothing); 'discard' removes its "
        "worktree and branch."
    )
    paths: list[str] | None = arg(
        "apply only these of the files it changed (relative to the root, as vibe_wait lists them). "
        "Default: all of them.",
        default=None,
        min_length=1,
    )


# -- rendering ---------------------------------------------------------------------------------------


def _seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s"
    m, s = divmod(int(s), 60)
    return f"{m} min {s} s" if m < 60 else f"{m // 60} h {m % 60} min"


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 3] + "..."


def _head(w: WorkerInfo) -> str:
    return f"{w.id} ('{w.label}', {w.tier})"


def _state(w: WorkerInfo) -> str:
    elapsed = _seconds(w.elapsed())
    if w.status.active:
        queued = f", {w.queued} message(s) queued for its next run" if w.queued else ""
        if w.status is Status.STALLED:
            return f"is stalled after {elapsed}{queued}"
        return f"is still running after {elapsed}{queued}"
    if w.status is Status.TIMED_OUT:
        return f"timed out after {elapsed} (its budget ran out; it was stopped)"
    if w.status is Status.DONE:
        return f"is done after {elapsed}"
    if w.status is Status.KILLED:
        return f"was killed after {elapsed}"
    code = f" with exit code {w.exit_code}" if w.exit_code is not None else ""
    return f"failed{code} after {elapsed}"


def _log_tail(w: WorkerInfo) -> str:
    lines = w.log.rstrip("\n").splitlines()
    tail = "\n".join(lines[-LOG_LINES:])
    cut = f"[last {LOG_LINES} of {len(lines)} log lines]\n" if len(lines) > LOG_LINES else ""
    return cut + cap_text(tail, TEXT_CHARS)


CHANGES_SHOWN = 30  # files in a change summary's text


def _changes(w: WorkerInfo) -> str:
    """What the worker changed, as a bounded diffstat; empty when the roster does not know."""
    if w.changes is None:
        return ""
    if not w.changes:
        return "Changes: none against its starting point."
    counts = {k: sum(c["status"] == k for c in w.changes) for k in "AMDT"}
    words = {"A": "added", "M": "modified", "D": "deleted", "T": "type changed"}
    head = ", ".join(f"{n} {words[k]}" for k, n in counts.items() if n)
    lines = [f"Changes against its starting point ({head}; merge with vibe_merge):"]
    for c in w.changes[:CHANGES_SHOWN]:
        stat = "binary" if c["added"] is None else f"+{c['added']} -{c['deleted']}"
        lines.append(f"  {c['status']} {c['path']} ({stat})")
    if len(w.changes) > CHANGES_SHOWN:
        lines.append(f"  [{len(w.changes) - CHANGES_SHOWN} more files; vibe_list's data has them all]")
    return "\n".join(lines)


def _report(w: WorkerInfo) -> str:
    """A worker's state with its result (and, when it failed, the tail of its log)."""
    parts = [f"Worker {_head(w)} {_state(w)}" + (f" (run {w.runs})." if w.runs > 1 else ".")]
    if w.note:
        parts.append(cap_text(w.note, TEXT_CHARS))
    if w.status in (Status.FAILED, Status.TIMED_OUT) or (w.status is Status.KILLED and w.log.strip()):
        parts.append("Last lines of its log (stderr):\n" + (_log_tail(w) or "(empty)"))
    if not w.status.active:
        result = cap_text(
            w.result.rstrip("\n"), TEXT_CHARS, "The worker's full result is longer; ask it for less."
        )
        parts.append("Result:\n" + result if result.strip() else "Result: (it wrote nothing to stdout)")
        if w.data is not None:
            parts.append("It wrote a JSON result to $TETHER_VIBE_RESULT: it is the data of this result.")
    changes = _changes(w)
    if changes:
        parts.append(changes)
    return "\n".join(parts)


def _summary(w: WorkerInfo) -> dict[str, Any]:
    """A worker in vibe_list's data: no log, the result's end only (vibe_wait gives the rest)."""
    data = w.to_json()
    del data["log"]
    data["result"] = w.result[-LIST_RESULT_CHARS:]
    data["data"] = None if w.data is None else "(in vibe_wait's answer)"
    return data


def _data(w: WorkerInfo, **extra: Any) -> dict[str, Any]:
    return {**w.to_json(), **extra}


# -- handlers ----------------------------------------------------------------------------------------


async def _ask(what: str, value: Any, extra: float = 0.0) -> Any:
    """A roster's answer, awaited within a bound: a roster that hangs must not hang the model's call."""
    if not inspect.isawaitable(value):
        return value
    timeout = extra + ROSTER_TIMEOUT
    try:
        return await asyncio.wait_for(value, timeout)
    except TimeoutError:
        raise ToolError(
            f"the worker roster did not answer {what} within {timeout:g} s; the worker may still be running. "
            "Check it with vibe_list, or try again later.",
            code="roster_timeout",
        ) from None


def _not_blank(name: str, value: str, fix: str) -> None:
    if not value.strip():
        raise ToolError(f"{name} is blank: {fix}.", code="invalid_arguments", problems=[f"{name}: blank"])


def _kept_text(kept: list[str]) -> str:
    shown = ", ".join(kept[:10]) + (f" and {len(kept) - 10} more" if len(kept) > 10 else "")
    return (
        f"Kept from earlier runs (unmerged work of their workers, committed on these branches): {shown}. "
        "See one with `git diff HEAD...<branch>`; merge it with git, or delete it with `git branch -D`."
    )


def make_tools(roster: Roster) -> list[Tool]:
    """The tools, bound to one run's roster (vibe_merge when the roster can merge)."""
    tiers = getattr(roster, "tiers", None)  # optional: the tiers this roster can run
    tiers_note = f" Tiers configured for this run: {', '.join(tiers)}." if tiers else ""
    try:
        spawn_keywords = set(inspect.signature(roster.spawn).parameters)
    except (TypeError, ValueError):
        spawn_keywords = set()

    async def spawn(ctx: CallContext, args: SpawnArgs) -> ToolResult:
        _not_blank("brief", args.brief, "say what the worker should do")
        label = " ".join(args.label.split())  # one line: it is shown in vibe_list's one-line rows
        _not_blank("label", label, "give a short name such as 'tests for parser'")
        extra = {
            k: v
            for k, v in (("isolation", args.isolation), ("budget_seconds", args.budget_seconds))
            if v is not None
        }
        missing = [k for k in extra if k not in spawn_keywords]
        if missing:
            raise ToolError(
                f"this run's worker roster does not take {' or '.join(missing)}; call vibe_spawn without it.",
                code="unsupported",
                arguments=missing,
            )
        w: WorkerInfo = await _ask("vibe_spawn", roster.spawn(args.brief, label, args.tier, **extra))
        text = (
            f"Started worker {_head(w)}. It works in the background: vibe_wait '{w.id}' for its result, "
            "vibe_list to see every worker, vibe_send to add to its briefing, vibe_kill to stop it."
        )
        if w.note:
            text += f" Where: {w.note}."
        if w.sandbox:
            text += f" It runs {w.sandbox}."
        if args.budget_seconds is not None:
            text += f" Its budget: {args.budget_seconds:g} s, then it is stopped (timed out)."
        return ToolResult.text(text, _data(w))

    async def send(ctx: CallContext, args: SendArgs) -> ToolResult:
        _not_blank("message", args.message, "say what to add to the worker's briefing")
        w: WorkerInfo = await _ask("vibe_send", roster.send(args.worker_id, args.message))
        if w.queued:
            text = (
                f"Worker {_head(w)} is still running, so the message was added to its briefing and queued "
                f"({w.queued} queued): when the current run ends it runs again with the whole briefing. To "
                f"restart it now instead, vibe_kill '{w.id}' and then vibe_send."
            )
        else:
            text = (
                f"Worker {_head(w)} is running again (run {w.runs}) with the message added to its briefing."
            )
        return ToolResult.text(text, _data(w))

    async def wait(ctx: CallContext, args: WaitArgs) -> ToolResult:
        timeout = args.timeout_seconds
        if timeout is None:
            timeout = ctx.run.options.of(VibeOptions).vibe_wait_timeout
        begun = time.monotonic()
        while True:  # in slices, to report progress on a long wait
            left = timeout - (time.monotonic() - begun)
            chunk = max(0.0, min(left, PROGRESS_EVERY))
            w: WorkerInfo = await _ask("vibe_wait", roster.wait(args.worker_id, chunk), chunk)
            if w.status is not Status.RUNNING or left <= PROGRESS_EVERY:  # a stall returns at once
                break
            await ctx.progress(time.monotonic() - begun, timeout, f"worker {w.id} still running")
        waited = time.monotonic() - begun
        if w.status is Status.STALLED:
            text = (
                f"{_report(w)}\nThis is not an error: it may be waiting on input or a lock. vibe_kill '{w.id}' "
                "to stop it, vibe_wait again if it may resume (it goes back to running when it does)."
            )
            return ToolResult.text(text, _data(w, timed_out=False))
        if w.status is Status.RUNNING:
            text = (
                f"Worker {_head(w)} {_state(w)} (waited {_seconds(waited)}). This is not an error: call "
                f"vibe_wait again, vibe_send to add to its briefing, or vibe_kill to stop it."
            )
            return ToolResult.text(text, _data(w, timed_out=True))
        return ToolResult.text(_report(w), _data(w, timed_out=False))

    async def kill(ctx: CallContext, args: KillArgs) -> ToolResult:
        before: list[WorkerInfo] = list(await _ask("vibe_list", roster.list()))
        was = next((b for b in before if b.id == args.worker_id), None)
        w: WorkerInfo = await _ask("vibe_kill", roster.kill(args.worker_id))
        if was is not None and not was.status.active:
            text = f"Worker {_head(w)} was not running (it is {w.status.value}); nothing was stopped."
            return ToolResult.text(text + "\n" + _report(w), _data(w, stopped=False))
        dropped = (
            f" {was.queued} queued message(s) stay in its briefing." if was is not None and was.queued else ""
        )
        text = (
            f"Stopped worker {_head(w)} and every process it started.{dropped} vibe_send '{w.id}' runs it again "
            "with its whole briefing."
        )
        return ToolResult.text(text + "\n" + _report(w), _data(w, stopped=True))

    async def list_(ctx: CallContext, args: ListArgs) -> ToolResult:
        workers: list[WorkerInfo] = list(await _ask("vibe_list", roster.list()))
        if not workers:
            kept = await _kept()
            text = "No workers yet in this run; start one with vibe_spawn."
            return ToolResult.text(
                text + (f"\n{_kept_text(kept)}" if kept else ""),
                {"workers": [], **({"kept_branches": kept} if kept else {})},
            )
        # the running ones and the latest matter most: show those when there are too many
        ordered = sorted(workers, key=lambda w: (not w.status.active, -w.started_at))
        shown, note = cap_items(ordered, LIST_CAP, "workers", "vibe_wait on an id shows that worker.")
        counts = {s.value: sum(w.status is s for w in workers) for s in Status}
        lines = [f"{len(workers)} worker(s): " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)]
        for w in shown:
            line = f"- {w.id} [{w.tier}] {w.status.value}, {_seconds(w.elapsed())}: {w.label}"
            if w.status is Status.STALLED:
                line += " | no CPU, output or file written lately (vibe_wait shows its processes)"
            elif w.status is Status.FAILED:
                last = next((ln for ln in reversed(w.log.splitlines()) if ln.strip()), "")
                line += f" | exit code {w.exit_code}; log ends: {_one_line(last) or '(empty)'}"
            elif not w.status.active or w.runs > 1:
                line += f" | last result: {_one_line(w.result) or '(empty)'}"
            if w.queued:
                line += f" | {w.queued} message(s) queued"
            if w.changes:
                line += f" | changed {len(w.changes)} file(s), on {w.branch}"
            lines.append(line)
        if note:
            lines.append(note)
        kept = await _kept()
        if kept:
            lines.append(_kept_text(kept))
        data: dict[str, Any] = {"workers": [_summary(w) for w in workers]}
        if kept:
            data["kept_branches"] = kept
        return ToolResult.text("\n".join(lines), data)

    async def _kept() -> list[str]:
        finder = getattr(roster, "kept", None)
        if finder is None:
            return []
        return list(await _ask("vibe_list", finder()))

    def tool(
        name: str, description: str, args: type, handler: Handler, read_only: bool | None = None
    ) -> Tool:
        return Tool(
            name,
            "read",
            description,
            args=args,
            handler=handler,
            parallel_safe=True,
            read_only=read_only,
        )

    tools = [
        tool(
            "vibe_spawn",
            "Start a background worker on a brief and return at once with its worker_id. Tier 'fast' "
            "(default) is for mechanical work with a clear spec; 'good' for design, review, or reviewing "
            "a fast worker's output. The worker works on its own; collect its result with vibe_wait."
            + tiers_note,
            SpawnArgs,
            spawn,
            read_only=False,  # tier read by design (the gate is on the worker's own tools), but it starts an agent
        ),
        tool(
            "vibe_send",
            "Add a message to a worker's briefing and run it again with the whole briefing. If it is still "
            "running, the message is queued and it reruns when its current run ends.",
            SendArgs,
            send,
        ),
        tool(
            "vibe_wait",
            "Wait until a worker is done and return its result (a failed worker shows the end of its log). "
            "If the timeout passes first, says it is still running and for how long; that is not an error.",
            WaitArgs,
            wait,
        ),
        tool("vibe_kill", "Stop a worker and every process it started.", KillArgs, kill),
        tool(
            "vibe_list",
            "Every worker of this run: tier, status (running, stalled, done, failed, killed, timed out), "
            "elapsed time, last result and the files it changed in its worktree.",
            ListArgs,
            list_,
        ),
    ]
    if hasattr(roster, "merge_plan") and hasattr(roster, "merge"):
        tools.append(_merge_tool(cast("Merging", roster)))
    return tools


class Merging(Protocol):
    """A roster that can land a worker's work (the built-in command roster): it offers vibe_merge."""

    def merge_plan(self, worker_id: str, action: str, paths: tuple[str, ...] | None) -> MergePlan: ...

    async def merge(self, plan: MergePlan) -> dict[str, Any]: ...


def _merge_tool(roster: Merging) -> Tool:
    """vibe_merge, bound to the roster: its ``touches`` makes the plan (the files it names are approved
    and checked as every write is), and the handler of the same call carries out that very plan."""

    async def merge(ctx: CallContext, args: MergeArgs) -> ToolResult:
        made = plans.pop() if plans else None
        plan = made[1] if made is not None and made[0] is args else None
        if plan is None:  # touches made it for these very arguments; else it is made here
            plan = await asyncio.to_thread(plan_for, args)
        outcome = await roster.merge(plan)
        if plan.action == "discard":
            return ToolResult.text(
                f"Discarded worker {args.worker_id}'s work: its worktree and branch are being removed; nothing was "
                "written to the root.",
                {"worker_id": args.worker_id, "action": "discard", **outcome},
            )
        rows = [f"  {status} {path}" for status, path, _ in plan.applied]
        if plan.applied:
            text = (
                f"Applied {len(plan.applied)} file(s) of worker {args.worker_id} to the root:\n"
                + "\n".join(rows)
            )
        else:
            text = f"Nothing of worker {args.worker_id} was left to apply."
        if plan.same:
            text += f"\nAlready as the worker left them in the root: {', '.join(plan.same)}."
        made_x = [p for _, p, x in plan.applied if x]
        if made_x:
            text += f"\nMade executable as in the worker's tree: {', '.join(made_x)}."
        if plan.rest:
            text += f"\nNot applied (left out of paths), still in its worktree: {', '.join(plan.rest)}."
        if plan.outside:
            text += f"\nOutside the run's root, not applied: {', '.join(plan.outside)}."
        if outcome["removed"]:
            text += "\nIts worktree and branch are being removed (all of its work is in the root now)."
        data = {
            "worker_id": args.worker_id,
            "action": "apply",
            "applied": [{"status": st, "path": p} for st, p, _ in plan.applied],
            "unchanged": plan.same,
            "not_applied": plan.rest,
            **outcome,
        }
        return ToolResult.text(text, data)

    plans: list[tuple[MergeArgs, MergePlan]] = []  # the plan touches made, for the handler of the same call

    def plan_for(args: MergeArgs) -> MergePlan:
        paths = tuple(args.paths) if args.paths is not None else None
        return roster.merge_plan(args.worker_id, args.action, paths)

    def touches(args: MergeArgs) -> list[str]:
        plan = plan_for(args)  # in a thread: git runs; a refusal (a conflict) is the call's answer
        plans[:] = [(args, plan)]
        return [ctx_path for _, ctx_path, _ in plan.applied]

    return Tool(
        "vibe_merge",
        "write",
        "Land a finished worker's work: 'apply' writes the files it changed in its worktree into the "
        "root, all or nothing (refused, naming the files, where the root changed a file since the "
        "worker started; answers with the diagnostics the change introduced); 'discard' removes its "
        "worktree and branch.",
        args=MergeArgs,
        handler=merge,
        touches=touches,
    )
