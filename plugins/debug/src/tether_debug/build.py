"""The build before the adapter starts (delve: `go build` with its flags), so a build error is
answered from the build's own output: where the program is written, the build run where the adapter
will run, its failure bounded, and its command as it is shown to type again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from tether_debug.session import SessionError

if TYPE_CHECKING:
    from tether.run import Run

    from tether_debug.adapters import Build, LaunchRequest
    from tether_debug.session import LaunchBound, Session


async def build_first(
    session: Session, request: LaunchRequest, bound: LaunchBound, *, cwd_given: bool
) -> LaunchRequest:
    """The launch request for the adapter: ``request`` itself, or, when the adapter builds the program
    first (delve), one for the executable it built (a Go test binary runs in its package directory
    unless the launch named a cwd, ``cwd_given``).

    The program is written to a new directory, removed when the session closes.
    """
    make = session.adapter.build
    if make is None:
        return request
    session.scratch = scratch_dir(session.run)
    build = make(request, session.scratch)
    if build is None:  # nothing to build (a binary)
        return request
    await run_build(session, build, bound)  # built here, so a build error is the build's own answer
    cwd = build.run_in if not cwd_given and build.run_in is not None else request.cwd
    return attrs.evolve(request, program=build.output, test=False, cwd=cwd)


def scratch_dir(run: Run) -> Path:
    """A new directory for the program a build writes: in the run's private directory, or, where that
    is on a noexec mount (a program there cannot run), in the root; removed when the session closes,
    and by the run (`Run.scratch_dir`) if the session could not."""
    places = (
        (run.private_dir(), "debug-build-", "the run's temporary directory"),
        (run.root, ".tether-debug-build-", "the root"),
    )
    for base, prefix, said in places:
        if os.statvfs(base).f_flag & os.ST_NOEXEC:
            continue
        try:
            return run.scratch_dir(base, prefix)
        except OSError as exc:
            raise SessionError(
                f"could not make a directory for the build's program in {said}: {exc.strerror}"
            ) from None
    raise SessionError(
        "the temporary directory and the root are both on noexec mounts, so a program built there cannot "
        "run; set TMPDIR to a directory on a mount that allows executables, or build the program yourself "
        "(`go build -gcflags='all=-N -l'`) somewhere it can run and launch that binary"
    )


async def run_build(session: Session, build: Build, bound: LaunchBound) -> None:
    """Run the adapter's build of the program; a failure says the build's own words.

    It runs where the adapter will (the run's envelope), tracked like it, so it is stopped with
    the run. Its output is bounded, and paths in it are relative to the root.
    """
    run = session.run
    argv: list[str] = list(build.argv)
    envelope = await session.envelope()
    if envelope is not None:
        argv = list(envelope.wrap(argv))
    added = {
        **build.env,
        **({} if run.trusted else build.untrusted_env),
    }  # the launch's env cannot lift them
    shown, _ = build_command(build, added, run.root)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=str(build.cwd or run.root),
            env=run.child_env({**os.environ, **added}),
            # no session of its own (unlike the adapter): under load, a new session's scheduler
            # group made go build take 1.5-2x as long; the run's tag finds what it started
        )
    except OSError as exc:
        raise SessionError(f"could not run `{shown}`: {exc}") from None
    run.track_process(proc)
    session.building = proc
    try:
        async with bound.phase("the build", f" (`{shown}`)"):
            out, _ = await proc.communicate()
    finally:
        # stopped, with the compilers it started, when the bound ran out and on a cancel alike: else
        # it runs on and writes the binary back into the directory close() removes; killed by a
        # signal, its compilers may outlive it
        if proc.returncode is None or proc.returncode < 0:
            await asyncio.shield(run.stop_process(proc))
    if proc.returncode is not None and proc.returncode < 0:
        raise SessionError(f"`{shown}` was killed by {signal.Signals(-proc.returncode).name}")
    if proc.returncode != 0:
        text = out.decode(errors="replace")
        if build.cwd is not None and build.cwd != run.root:  # go's paths relative to its cwd: to the root's
            within = build.cwd.relative_to(run.root).as_posix()
            text = re.sub(r"^(?:\./)?(?=[^\s:/][^\s:]*\.go:)", f"{within}/", text, flags=re.MULTILINE)
        text = text.replace(f"{run.root}{os.sep}", "")
        rerun, whole = build_command(build, added, run.root, os.devnull)
        said = f"the build failed (`{shown}`, exit status {proc.returncode}):\n{_bounded(text, rerun, whole)}"
        untrusted = {} if run.trusted else build.untrusted_env
        if any(f"{k}=" in text for k in untrusted):  # the build ran into one of them
            said += (
                "\n(this run does not trust its root, so the build ran with "
                + " ".join(f"{k}={v}" for k, v in untrusted.items())
                + ": nothing is downloaded; the run option trust lifts it)"
            )
        raise SessionError(said)
    # a library package builds an archive, not a program: told by its content (a noexec mount
    # would make the mode bits say the same of a program)
    with contextlib.suppress(OSError), build.output.open("rb") as fh:
        if not fh.read(8).startswith(b"!<arch>"):
            return
    raise SessionError(build.no_output)


MAX_BUILD_LINES = 60  # lines of a failed build's output shown
MAX_BUILD_COMMAND = 600  # characters of the build's command shown
MAX_BUILD_VALUE = 80  # characters of one variable's value in it
MAX_BUILD_LINE = 500  # characters of one line of its output


def build_command(
    build: Build, added: dict[str, str], root: Path, output: str | None = None
) -> tuple[str, bool]:
    """The build as it ran, to type in the root, and whether it is whole (nothing cut).

    A ``cd`` to where it ran, the variables the launch (or the untrusted run) added, each value
    bounded, then its argv whole (we made it); paths under the root relative; the variables cut
    first when the whole is too long. With ``output``, that path in place of the program's (the
    hint to rerun it writes nothing that stays: ``os.devnull``).
    """
    cwd = build.cwd or root

    def word(arg: str) -> str:
        if output is not None and arg == str(build.output):
            return shlex.quote(output)
        path = Path(arg)
        inside = path.is_absolute() and path.is_relative_to(root)
        return shlex.quote(os.path.relpath(path, cwd) if inside else arg)

    def var(key: str, value: str) -> str:
        if len(value) <= MAX_BUILD_VALUE:
            return f"{key}={shlex.quote(value)}"
        return f"{key}={shlex.quote(value[:MAX_BUILD_VALUE])}…[{len(value) - MAX_BUILD_VALUE:,} more characters cut]"

    whole = all(len(v) <= MAX_BUILD_VALUE for v in added.values())
    cd = f"cd {shlex.quote(cwd.relative_to(root).as_posix())} && " if cwd != root else ""
    argv = " ".join(map(word, build.argv))
    variables = " ".join(var(k, v) for k, v in added.items())
    room = MAX_BUILD_COMMAND - len(cd) - len(argv) - 1
    if len(variables) > room:
        said = f"…[{len(variables) - room:,} more characters of variables cut]"
        variables = variables[: max(room - len(said), 0)] + said
        whole = False
    text = cd + (f"{variables} {argv}" if variables else argv)
    if len(text) > MAX_BUILD_COMMAND:  # an argv that long is not ours to make; bounded all the same
        text = text[:MAX_BUILD_COMMAND] + f" [{len(text) - MAX_BUILD_COMMAND:,} more characters cut]"
        whole = False
    return text, whole


def _bounded(text: str, rerun: str, whole: bool) -> str:
    """The build's output bounded; the cut said with how to see it all (``rerun``: the build
    writing nothing, to type in the root when ``whole``)."""
    lines = [
        line if len(line) <= MAX_BUILD_LINE else line[:MAX_BUILD_LINE] + " [...]"
        for line in text.splitlines()
    ]
    if len(lines) <= MAX_BUILD_LINES:
        return "\n".join(lines)
    cut = len(lines) - MAX_BUILD_LINES
    how = (
        f"run `{rerun}` in the root"
        if whole
        else f"build as `{rerun}` does in the root, with the launch's env in full (its values are cut here),"
    )
    return "\n".join(lines[:MAX_BUILD_LINES]) + f"\n[{cut} more lines cut: {how} to see them all]"
