"""Actions that let the program run: launch, attach, continue/step/pause, and what came of it."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether import ToolError, ToolResult

from tether_debug.adapters import AdapterDef, LaunchRequest, adapter_table, handles_safely
from tether_debug.args import DebugArgs
from tether_debug.breakpoints import bp_summary
from tether_debug.build import build_first
from tether_debug.dap import DapError
from tether_debug.options import DebugOptions
from tether_debug.render import (
    MAX_VALUE,
    cap_output,
    ended_words,
    signal_data,
    stop_result,
    trim_launcher_frames,
)
from tether_debug.session import MAX_LOGGED, Ended, LaunchBound, Session, SessionError, Stop

if TYPE_CHECKING:
    from tether.run import CallContext, Run

    from tether_debug.supervisor import DebugSupervisor


def refuse_second(run: Run, session: Session) -> ToolError:
    age = (time.monotonic() - session.started) / 60
    where = (
        f", stopped at {run.relpath(session.stop.file)}:{session.stop.line}"
        if session.stop and session.stop.file
        else ""
    )
    return ToolError(
        f"a debug session is already running in this conversation ({session.program}, started {age:.1f} min ago{where}); "
        "a second launch/attach does not replace it. End it first with action='terminate', then launch again.",
        code="session_exists",
        program=session.program,
    )


def pick_adapter(run: Run, program: Path | None, forced: str | None) -> AdapterDef:
    """The forced adapter, else the first usable one that handles the program (or a module)."""
    known = adapter_table(run)
    if forced is not None:
        if forced not in known:
            raise ToolError(
                f"unknown adapter '{forced}'; known adapters: {', '.join(known)}. See action='adapters'."
            )
        return known[forced]
    if program is None:
        candidates = [a for a in known.values() if a.modules]
    else:
        candidates = [a for a in known.values() if handles_safely(a, program)]
    for adapter in candidates:
        if adapter.availability(run.root).usable:
            return adapter
    if candidates:
        return candidates[0]  # none is usable here: the first one's refusal says why
    takes = "; ".join(f"{a.id} ({a.takes})" if a.takes else a.id for a in known.values())
    what = f"'{run.relpath(program)}'" if program is not None else "a module launch (module=)"
    raise ToolError(
        f"no debug adapter handles {what}. The registered adapters take: {takes}. "
        "Or force one with adapter='<id>'.",
        code="no_adapter",
        adapters=list(known),
    )


def _no_program(run: Run, args: DebugArgs) -> ToolError:
    name = args.program or ""
    hint = " Build it first, or check the name."
    if "/" not in name and "." not in name:
        hint = (
            f" To run a Python module or a command installed by one (pytest), give module='{name}' and its "
            "arguments in args."
        )
    return ToolError(f"no such program: '{name}' (paths are relative to the root).{hint}", code="no_program")


def _cwd(run: Run, cwd: str | None) -> Path:
    if cwd is None:
        return run.root
    path = run.resolve_path(cwd, must_exist=True)
    if not path.is_dir():
        raise ToolError(
            f"cwd '{cwd}' is not a directory; give the program's working directory, relative to the root."
        )
    return path


def _env(env: dict[str, str] | None) -> dict[str, str]:
    bad = [k for k, v in (env or {}).items() if not isinstance(v, str) or not k or "=" in k]
    if bad:
        raise ToolError(
            f"env: each variable needs a name without '=' and a string value (check {', '.join(map(repr, bad))})."
        )
    return dict(env or {})


async def launch(
    ctx: CallContext, supervisor: DebugSupervisor, conversation: str, session: Session | None, args: DebugArgs
) -> ToolResult:
    run = ctx.run
    prefix = ""
    if args.restart:
        last = supervisor.launches.get(conversation)
        if not (args.program or args.module):
            if last is None:
                raise ToolError(
                    "restart=true needs a launch to repeat: launch a program first (or give program)."
                )
            args = attrs.evolve(last, stop_on_entry=args.stop_on_entry, restart=False)
        if session is not None:
            async with session.lock:
                await supervisor.end(conversation, session)
            supervisor.remember_end(
                conversation, session, Ended(session.exit_code, "was terminated for the restart"), "", 0
            )
            prefix = f"restarted: the previous session of {session.program} was ended.\n"
            session = None
    if session is not None:
        raise refuse_second(run, session)
    if args.program == "-m":
        module = (args.args or ["<module>"])[0]
        raise ToolError(
            f"'-m' is not a program: to run `python -m {module}`, give module='{module}' and the rest in args.",
            code="no_program",
        )
    if args.module and args.program:
        raise ToolError(
            "give program or module, not both: module='pytest' runs `python -m pytest` with args."
        )
    if not args.program and not args.module:
        raise ToolError(
            "action='launch' needs program: the file to debug, relative to the root (e.g. 'app.py'); or module='pytest' for a Python module."
        )
    program = run.resolve_path(args.program) if args.program else None
    if program is not None and not program.exists():
        raise _no_program(run, args)
    adapter = pick_adapter(run, program, args.adapter)
    if args.module and not adapter.modules:
        raise ToolError(f"the {adapter.id} adapter does not launch modules; module= is for debugpy (Python).")
    availability = adapter.availability(run.root)
    if not availability.usable or availability.located is None:
        raise ToolError(
            f"the {adapter.id} adapter cannot start here: {availability.reason}. See action='adapters'.",
            code="adapter_unavailable",
            adapter=adapter.id,
        )
    request = LaunchRequest(
        program=program,
        args=list(args.args or ()),
        root=run.root,
        located=availability.located,
        cwd=_cwd(run, args.cwd),
        env=_env(args.env),
        module=args.module,
        test=args.test,
        stop_on_entry=args.stop_on_entry,
    )
    shown = run.relpath(program) if program is not None else f"-m {args.module}"
    options = run.options.of(DebugOptions)
    new = Session(adapter, run, shown)
    try:
        # one bound for the build, the start and the configuration
        bound = LaunchBound(options.debug_launch_timeout)
        request = await build_first(new, request, bound, cwd_given=args.cwd is not None)
        await new.start(availability.located, bound)
        await new.configure(
            "launch", adapter.launch_config(request), supervisor.plan_for(conversation), bound
        )
        outcome = await new.wait_stop(0, options.debug_stop_timeout)
        if args.stop_on_entry and isinstance(outcome, Stop) and "SIGSTOP" in (outcome.description or ""):
            # lldb-dap holds a native program at its entry point with a SIGSTOP: that is the entry stop
            outcome = new.stop = attrs.evolve(outcome, reason="entry", description=None, exception=None)
            new.last_signal = None
    except (SessionError, DapError) as exc:
        output, _ = new.output.take()
        await new.close()
        message = exc.message if isinstance(exc, DapError) else str(exc)
        more = f"\nprogram output:\n{cap_output(output, 0)[0]}" if output.strip() else ""
        raise ToolError(
            f"could not launch {shown} under {adapter.id}: {message}{more}",
            code="launch_failed",
            adapter=adapter.id,
        ) from None
    except BaseException:
        await asyncio.shield(new.close())
        raise
    supervisor.adopt(new)
    supervisor.launches[conversation] = attrs.evolve(args, restart=False)
    return await after_run(run, supervisor, conversation, new, outcome, prefix=prefix + bp_summary(run, new))


LLDB_LOST = "lost connection"  # lldb-19's whole answer when its debug server could not attach


async def attach(
    ctx: CallContext, supervisor: DebugSupervisor, conversation: str, session: Session | None, args: DebugArgs
) -> ToolResult:
    run = ctx.run
    if session is not None:
        raise refuse_second(run, session)
    if args.pid is not None and args.port is None:
        by_pid, number = True, args.pid
    elif args.port is not None and args.pid is None:
        by_pid, number = False, args.port
    else:
        raise ToolError(
            "action='attach' needs port (the local port a debugger listens on, e.g. from "
            "`python -m debugpy --listen 127.0.0.1:5678`) or pid (a running native process, attached with lldb), not both."
        )
    known = adapter_table(run)
    adapter = known.get(args.adapter or ("lldb" if by_pid else "debugpy"))
    make = (adapter.attach_pid_config if by_pid else adapter.attach_config) if adapter is not None else None
    if adapter is None or make is None:
        can = [
            a.id for a in known.values() if (a.attach_pid_config if by_pid else a.attach_config) is not None
        ]
        how = "by process id" if by_pid else "to a port"
        raise ToolError(f"adapter '{args.adapter}' cannot attach {how}; adapters that can: {', '.join(can)}.")
    target = f"process {number}" if by_pid else f"port {number}"
    if by_pid:
        problem = ptrace_problem(number)
        if problem:
            raise ToolError(f"cannot attach to process {number}: {problem}", code="attach_refused")
    options = run.options.of(DebugOptions)
    new = Session(adapter, run, f"process {number}" if by_pid else f"process on port {number}")
    try:
        bound = LaunchBound(options.debug_launch_timeout)
        if by_pid:
            availability = adapter.availability(run.root)
            if not availability.usable or availability.located is None:
                raise ToolError(
                    f"the {adapter.id} adapter cannot start here: {availability.reason}. See action='adapters'.",
                    code="adapter_unavailable",
                    adapter=adapter.id,
                )
            await new.start(availability.located, bound)
            new.attached = True
        else:
            await new.connect("127.0.0.1", number, min(bound.seconds, 10.0))
        await new.configure("attach", make(number), supervisor.plan_for(conversation), bound)
        # an attached program usually keeps running: wait briefly for a breakpoint, not the full bound
        waited = min(options.debug_stop_timeout, options.debug_attach_wait)
        outcome = await new.wait_stop(0, waited)
    except (SessionError, DapError) as exc:
        debugger = new.proc.pid if new.proc is not None and new.proc.returncode is None else None
        message = exc.message if isinstance(exc, DapError) else str(exc)
        if by_pid and message.strip() == LLDB_LOST:  # read before the adapter is gone
            message = lost_connection(number, debugger)
        elif by_pid and ("not permitted" in message or "ptrace" in message.lower()):
            message += f". {PTRACE_FORBIDDEN}"
        await new.close()
        raise ToolError(f"could not attach to {target}: {message}", code="attach_failed") from None
    except BaseException:
        await asyncio.shield(new.close())
        raise
    supervisor.adopt(new)
    prefix = f"attached to the {target.replace('port', 'process on port')}.\n" + bp_summary(run, new)
    return await after_run(run, supervisor, conversation, new, outcome, prefix=prefix, waited=waited)


PTRACE_FORBIDDEN = (
    "The operating system forbids tracing it: the process must be yours, and ptrace must be allowed "
    "(Linux: kernel.yama.ptrace_scope 0, or CAP_SYS_PTRACE for the debugger; containers and "
    "sandboxes may drop it). Launch the program under the debugger instead (action='launch')."
)
CAP_SYS_PTRACE = 19


def _status(pid: int) -> dict[str, str]:
    """/proc/<pid>/status as fields (empty when it cannot be read: gone, or not Linux)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return {key: value.strip() for key, _, value in (line.partition(":") for line in text.splitlines())}


def lost_connection(pid: int, debugger: int | None) -> str:
    """What lldb's bare "lost connection" on attaching to ``pid`` means, told by what the kernel shows.

    Another tracer (TracerPid), or a debugger without CAP_SYS_PTRACE facing another user's process
    (an EPERM, seen under strace); with neither, both causes are said, as lldb cannot tell them apart.
    """
    target = _status(pid)
    tracer = int(target.get("TracerPid", "0") or 0)
    if tracer:
        name = _status(tracer).get("Name", "unknown")
        return (
            f"lldb's debug server could not attach: process {pid} is already traced by pid {tracer} ({name}), "
            "and a process can have only one tracer. Detach that one (end it, or detach in it) and attach "
            "again, or launch the program under the debugger instead (action='launch')."
        )
    own = _status(debugger if debugger is not None else os.getpid())
    capabilities = int(own.get("CapEff", "0") or "0", 16)
    uid = target.get("Uid", "").split()[:1]
    if target and own and not capabilities & (1 << CAP_SYS_PTRACE) and uid != own.get("Uid", "").split()[:1]:
        return (
            "lldb's debug server could not attach (lldb says only 'lost connection'; the kernel refuses ptrace "
            "with EPERM here: the process belongs to another user and the debugger lacks CAP_SYS_PTRACE). "
            + PTRACE_FORBIDDEN
        )
    return (
        "lldb's debug server could not attach (lldb says only 'lost connection': what it says when the kernel "
        "refuses ptrace, or when its debug server failed). If ptrace is refused: "
        + PTRACE_FORBIDDEN
        + f" If the debug server failed: run `lldb -p {pid}` in a shell to see its own error."
    )


YAMA_PTRACE_SCOPE = Path("/proc/sys/kernel/yama/ptrace_scope")


def ptrace_problem(pid: int) -> str | None:
    """Why the OS will not let a debugger trace ``pid`` (before lldb says it less clearly), or None."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return "it has already exited."
        if proc.uids().real != os.getuid() and os.geteuid() != 0:
            return "it belongs to another user; a debugger may trace only your own processes."
    except psutil.NoSuchProcess:
        return "no such process. List processes with `ps` and give the program's pid."
    except psutil.Error:
        pass
    try:
        scope = int(YAMA_PTRACE_SCOPE.read_text().strip())
    except (OSError, ValueError):
        return None
    if scope >= 2:
        return (
            f"ptrace is restricted (kernel.yama.ptrace_scope={scope}): only an administrator may attach "
            "(or nobody, at 3). Launch the program under the debugger instead (action='launch')."
        )
    if scope == 1 and os.geteuid() != 0:
        return (
            "ptrace is restricted to a debugger's own children (kernel.yama.ptrace_scope=1), and this process "
            "was not started by the debugger. Launch the program under the debugger instead (action='launch'), "
            "or set kernel.yama.ptrace_scope=0."
        )
    return None


async def after_run(
    run: Run,
    supervisor: DebugSupervisor,
    conversation: str,
    session: Session,
    outcome: Stop | Ended | None,
    prefix: str = "",
    waited: float | None = None,
) -> ToolResult:
    """The result of anything that let the program run: a stop, the end (session closed), or still running.

    Logpoint lines printed meanwhile, and what the adapter said of breakpoints, come with it.
    """
    if outcome is None:
        bound = run.options.of(DebugOptions).debug_stop_timeout if waited is None else waited
        hint = "" if waited is None else ", run option debug_attach_wait"
        text = (
            prefix
            + f"the program is running and has not stopped (waited up to {bound:g} s{hint}). Use action='pause' to stop it, "
            "'status' to check, or 'output' to read what it printed."
        )
        return _with_said(session, text, {"stopped": None, "running": True})
    if isinstance(outcome, Ended):
        await supervisor.end(conversation, session)  # first: output still in flight arrives while it closes
        output, dropped = session.output.take()
        shown, cut = cap_output(trim_launcher_frames(output), dropped)
        supervisor.remember_end(conversation, session, outcome, "", 0)
        text = prefix + f"{ended_words(outcome)}; the debug session is over."
        text += f"\noutput:\n{shown}" if shown.strip() else "\n(no output)"
        ended = {"exit_code": outcome.exit_code, "how": outcome.how, **signal_data(outcome)}
        return _with_said(session, text, {"stopped": None, "ended": ended, "output": shown, "cut": cut})
    result = stop_result(run, session, outcome, prefix)
    return _with_said(session, result.plain, result.data or {})


def _with_said(session: Session, text: str, data: dict[str, Any]) -> ToolResult:
    """A result with the logpoint lines and breakpoint notices that came while the program ran (then forgotten)."""
    said, logged = session.notices, session.logged
    session.notices, session.logged = [], []
    if said:
        data["breakpoint_notices"] = said
        text += "".join(f"\n{n}" for n in said)
    if logged:
        data["logged"] = logged
        note = (
            f" (the first {len(logged)} only; all are in action='output')"
            if len(logged) >= MAX_LOGGED
            else ""
        )
        text += f"\nlogpoints{note}:\n" + "\n".join(line[:MAX_VALUE] for line in logged)
    return ToolResult.text(text, data=data)


async def resume(
    run: Run,
    supervisor: DebugSupervisor,
    conversation: str,
    session: Session,
    command: str,
    thread_id: int | None,
    need_stop: bool,
) -> ToolResult:
    assert session.client is not None
    if need_stop and session.stop is None:
        raise ToolError(
            f"the program is running, so there is nothing to {command}; use action='pause' to stop it first.",
            code="running",
        )
    if not need_stop and session.stop is not None:
        return stop_result(run, session, session.stop, prefix="already stopped; nothing to pause.\n")
    thread = thread_id if thread_id is not None else (session.stop.thread_id if session.stop else None)
    if thread is None:
        threads = (await session.client.request("threads")).get("threads") or []
        if not threads:
            raise ToolError("the program has no threads to act on; it may have ended. Use action='status'.")
        thread = threads[0]["id"]
    after = len(session.client.events)
    await session.client.request(command, {"threadId": thread})
    session.stop = None
    session.frames = {}
    session.references = set()
    outcome = await session.wait_stop(after, run.options.of(DebugOptions).debug_stop_timeout)
    return await after_run(run, supervisor, conversation, session, outcome)
