"""Runs INSIDE the Python kernel (compiled as '<tether-helper>' into the module `__tether__`).

It backs `tool()` (a call into the tether run over Jupyter's stdin channel) and the IPython idioms
that eval rewrites to plain calls (`%pip`, `%cd`, `!cmd`, `%%bash`, `%%timeit`), so they behave the
same in any kernel. Imports stay cheap: this runs at every kernel start.
"""

import builtins
import json
import os
import shlex
import subprocess
import sys

MARKER = "\u2063tether-call:"  # an invisible separator no human prompt starts with


class ToolText(str):
    """The text of a tool's result; `.data` holds its structured data, `.is_error` is always False."""

    data: dict = {}  # noqa: RUF012 - replaced on every instance tool() returns
    is_error = False


def tool_result(name, args=None, /, **kwargs):
    """Call a tool of the run; returns {'text', 'data', 'is_error', 'images'} and never raises on a tool error."""
    if not isinstance(name, str):
        raise TypeError(f"tool(): the tool name must be a string, got {type(name).__name__}")
    merged = dict(args or {}, **kwargs)
    try:
        payload = json.dumps({"tool": name, "args": merged})
    except TypeError as exc:
        raise TypeError(f"tool({name!r}): the arguments must be JSON-serializable ({exc})") from None
    answer = builtins.input(MARKER + payload)
    try:
        return json.loads(answer)
    except ValueError:
        raise RuntimeError(
            f"tool({name!r}): no answer from the tether run (stdin is not connected)"
        ) from None


def ping():
    """The stdin probe at kernel start: proves tether can answer input_requests."""
    builtins.input(MARKER + '{"ping": true}')


def tool(name, args=None, /, **kwargs):
    """Call a tool of the run and return its text; a refused or failed call raises RuntimeError with its message."""
    reply = tool_result(name, args, **kwargs)
    if reply.get("is_error"):
        raise RuntimeError(reply.get("text") or f"tool {name!r} failed")
    out = ToolText(reply.get("text", ""))
    out.data = reply.get("data") or {}
    return out


# -- shell ------------------------------------------------------------------------------------------

exit_code = 0


def sh(command, capture=False, shell="/bin/sh"):
    """`!cmd` (streamed, exit code said when not 0) and `x = !cmd` (capture: a list of lines)."""
    global exit_code
    sys.stdout.flush()
    proc = subprocess.Popen(
        [shell, "-c", command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        bufsize=1,
    )
    lines = []
    try:
        for line in proc.stdout:
            if capture:
                lines.append(line.rstrip("\n"))
            else:
                sys.stdout.write(line)
                sys.stdout.flush()  # streamed output keeps the cell's inactivity budget alive
    except KeyboardInterrupt:
        proc.kill()
        raise
    finally:
        proc.stdout.close()
        exit_code = proc.wait()
    if exit_code and not capture:
        print(f"[exit code {exit_code}]")
    return lines if capture else None


def cd(path=""):
    target = os.path.expanduser(path.strip().strip("'\"") or "~")
    os.chdir(target)
    print(os.getcwd())


# -- pip ----------------------------------------------------------------------------------------


def _top_levels(dist):
    text = dist.read_text("top_level.txt")
    if text:
        return {line.strip() for line in text.splitlines() if line.strip()}
    tops = set()
    for f in dist.files or ():
        first = f.parts[0] if f.parts else ""
        if (
            not first
            or first.endswith((".dist-info", ".egg-info", ".data"))
            or first in {"..", "__pycache__"}
        ):
            continue
        if len(f.parts) == 1:
            if first.endswith(".py"):
                tops.add(first[:-3])
            continue
        tops.add(first)
    return tops


def _installed():
    import importlib.metadata as md

    return {(d.metadata["Name"] or "").lower().replace("_", "-"): d for d in md.distributions()}


def pip(argline):
    """`%pip ...` in the kernel's own environment; then drop the affected modules from sys.modules."""
    import importlib
    import shutil

    args = shlex.split(argline)
    if importlib.util.find_spec("pip") is not None:
        cmd = [sys.executable, "-m", "pip", *args]
    else:
        uv = os.environ.get("TETHER_EVAL_UV") or shutil.which("uv")
        if not uv:
            raise RuntimeError("%pip: this environment has neither pip nor uv; install pip into it first")
        cmd = [uv, "pip", *args[:1], "--python", sys.executable, *args[1:]]
    before = _installed()
    before_versions = {k: d.version for k, d in before.items()}
    sys.stdout.flush()
    proc = subprocess.run(
        cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace", check=False
    )
    out = (proc.stdout + proc.stderr).strip()
    if out:
        print(out)
    if proc.returncode:
        print(f"[pip exited with code {proc.returncode}]")
    importlib.invalidate_caches()
    after = _installed()
    changed = {
        k
        for k in set(before) | set(after)
        if before_versions.get(k) != (after[k].version if k in after else None)
    }
    tops = set()
    for key in changed:
        for dist in (after.get(key), before.get(key)):
            if dist is not None:
                try:
                    tops |= _top_levels(dist)
                except Exception:  # noqa: BLE001, S110 - a removed distribution's files may be gone
                    pass
    dropped = [m for m in list(sys.modules) if m.split(".")[0] in tops]
    for m in dropped:
        del sys.modules[m]
    if dropped:
        shown = ", ".join(sorted({m.split(".")[0] for m in dropped}))
        print(
            f"[cleared {len(dropped)} module(s) from sys.modules ({shown}): the next import loads the installed version]"
        )


# -- timeit -------------------------------------------------------------------------------------


def _fmt(seconds):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("\u00b5s", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def timeit(stmt, namespace, options=""):
    """`%timeit stmt` / `%%timeit [-n N] [-r R] [setup]`: mean +- std over R runs of N loops."""
    import statistics
    import timeit as _timeit

    opts = shlex.split(options)
    number = repeat = None
    setup_parts = []
    i = 0
    while i < len(opts):
        if opts[i] in ("-n", "-r") and i + 1 < len(opts):
            if opts[i] == "-n":
                number = int(opts[i + 1])
            else:
                repeat = int(opts[i + 1])
            i += 2
        else:
            setup_parts.append(opts[i])
            i += 1
    setup = " ".join(setup_parts) or "pass"
    timer = _timeit.Timer(stmt, setup, globals=namespace)
    if number is None:
        number, _ = timer.autorange()
    repeat = repeat or 5
    runs = [t / number for t in timer.repeat(repeat=repeat, number=number)]
    mean = statistics.mean(runs)
    std = statistics.stdev(runs) if len(runs) > 1 else 0.0
    print(
        f"{_fmt(mean)} \u00b1 {_fmt(std)} per loop (mean \u00b1 std. dev. of {repeat} runs, {number:,} loops each)"
    )


# -- display ------------------------------------------------------------------------------------


def _dataframe_text(df, printer, cycle):
    """A DataFrame as a bounded plain table (the notebook's HTML is not for a model)."""
    printer.text(
        df.to_string(max_rows=40, min_rows=20, max_cols=20, max_colwidth=60, show_dimensions="truncate")
    )


def install(shell):
    """Called once at kernel start: expose tool()/tool_result() and register the table formatter."""
    shell.user_ns["tool"] = tool
    shell.user_ns["tool_result"] = tool_result
    shell.user_ns_hidden["tool"] = tool
    shell.user_ns_hidden["tool_result"] = tool_result
    plain = shell.display_formatter.formatters["text/plain"]
    plain.for_type_by_name("pandas.core.frame", "DataFrame", _dataframe_text)
