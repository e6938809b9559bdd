"""Runs INSIDE the Python kernel (compiled as '<tether-helper>' into the module `__tether__`).

It backs `tool()` (a call into the tether run over Jupyter's stdin channel) and the little tether
does on top of IPython, which otherwise runs the cell as it is (`!cmd`, `%cd`, `%timeit`, `%%bash`
are IPython's own): `%pip` into the kernel's own environment with `sys.modules` cleared, the exit
code of a failed `!cmd` said, and the project's code first on `sys.path` when the kernel runs
outside the project's environment. Imports stay cheap: this runs at every kernel start.
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
    """`%pip ...` in the kernel's own environment (with pip, or uv where it has none); then drop the
    affected modules from sys.modules. IPython's own %pip needs pip and keeps the old modules."""
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
                except Exception:  # noqa: BLE001 - a removed distribution's files may be gone
                    pass
    dropped = [m for m in list(sys.modules) if m.split(".")[0] in tops]
    for m in dropped:
        del sys.modules[m]
    if dropped:
        shown = ", ".join(sorted({m.split(".")[0] for m in dropped}))
        print(
            f"[cleared {len(dropped)} module(s) from sys.modules ({shown}): the next import loads the installed version]"
        )


# -- display ------------------------------------------------------------------------------------


def _dataframe_text(df, printer, cycle):
    """A DataFrame as a bounded plain table (the notebook's HTML is not for a model)."""
    printer.text(
        df.to_string(max_rows=40, min_rows=20, max_cols=20, max_colwidth=60, show_dimensions="truncate")
    )


def _said_exit_code(shell):
    """IPython's `!cmd` keeps a failure's exit code in `_exit_code` only: say it in the output too."""
    system = shell.system

    def run(cmd):
        system(cmd)
        code = shell.user_ns.get("_exit_code")
        if code:
            print(f"[exit code {code}]")

    return run


def install(shell, project_paths=()):
    """Called once at kernel start: tool()/tool_result(), %pip, the table formatter, the project's paths.

    Returns what the first cell's banner says: the interpreter the cell sees, the project's modules
    found on its paths, and which of them had been imported (from elsewhere) before they came first.
    """
    shell.user_ns["tool"] = tool
    shell.user_ns["tool_result"] = tool_result
    shell.user_ns_hidden["tool"] = tool
    shell.user_ns_hidden["tool_result"] = tool_result
    shell.register_magic_function(pip, "line", "pip")
    shell.system = _said_exit_code(shell)
    plain = shell.display_formatter.formatters["text/plain"]
    plain.for_type_by_name("pandas.core.frame", "DataFrame", _dataframe_text)
    sys.path[:0] = [p for p in project_paths if p not in sys.path]
    found = {name: path for path in reversed(project_paths) for name in _names_in(path)}
    early = [
        name
        for name, path in found.items()
        if name in sys.modules and not str(getattr(sys.modules[name], "__file__", "") or "").startswith(path)
    ]
    return {"executable": sys.executable, "project_modules": sorted(found), "imported_before": sorted(early)}


def _names_in(path):
    """Top-level module names a directory provides (packages and .py files)."""
    try:
        entries = os.listdir(path)
    except OSError:
        return []
    return [
        e[:-3] if e.endswith(".py") else e
        for e in entries
        if e.endswith(".py") or os.path.isfile(os.path.join(path, e, "__init__.py"))
    ]
