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


def _send(calls):
    """Send calls to the run in one request over stdin; the run runs them (overlapping where its rule
    allows) and answers all of them at once, in order."""
    try:
        payload = json.dumps({"calls": calls})
    except TypeError as exc:
        names = ", ".join(sorted({c["tool"] for c in calls}))
        raise TypeError(f"tool({names}): the arguments must be JSON-serializable ({exc})") from None
    answer = _ask(MARKER + payload)
    try:
        return json.loads(answer)["results"]
    except (ValueError, KeyError, TypeError):
        raise RuntimeError("tools: no answer from the tether run (stdin is not connected)") from None


def _idle_flush():
    pass


def _ask(prompt):
    """builtins.input(prompt), without ipykernel's flush of an output stream that holds nothing.

    Each flush waits for the kernel's IO thread (a third of a tool() call's time in the kernel). The
    run keeps a cell's output apart from its tool calls, so a stream with output waiting is flushed
    as before, and the others are skipped: `_flush_pending` is ipykernel's mark of waiting output; a
    stream without it (redirected by the cell) is flushed."""
    idle = [
        s
        for s in (sys.stdout, sys.stderr)
        if getattr(s, "_flush_pending", True) is False
        and getattr(s, "_subprocess_flush_pending", False) is False
    ]
    for stream in idle:
        stream.flush = _idle_flush
    try:
        return builtins.input(prompt)
    finally:
        for stream in idle:
            vars(stream).pop("flush", None)


def tool_result(name, args=None, /, **kwargs):
    """Call a tool of the run; returns {'text', 'data', 'is_error', 'images'} and never raises on a tool error."""
    if not isinstance(name, str):
        raise TypeError(f"tool(): the tool name must be a string, got {type(name).__name__}")
    reply = _send([{"tool": name, "args": dict(args or {}, **kwargs)}])[0]
    return {**reply, "images": len(reply.get("images") or ())}


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


# -- tools: the run's tools as typed functions ---------------------------------------------------


class ToolArgumentsError(TypeError):
    """Arguments that do not fit a tool's schema: raised in the cell before the tool is called."""


class ToolNotFoundError(AttributeError):
    """A tool this kernel's surface cannot see: `tools` has no such attribute."""


class Image:
    """An image a tool returned: `.data` (bytes) and `.mime_type`; displayed as an image."""

    def __init__(self, mime_type, data):
        self.mime_type, self.data = mime_type, data

    def _repr_mimebundle_(self, include=None, exclude=None):
        import base64

        return {self.mime_type: base64.b64encode(self.data).decode()}

    def __repr__(self):
        return f"<Image {self.mime_type}, {len(self.data):,} bytes>"


class Result:
    """What a call of `tools.<name>(...)` returns: `str(r)` is the text the model would see, `r.data` the
    structured data, `r.is_error`, `r.images`, and `r.started` / `r.ended` (the run's clock, seconds)."""

    def __init__(self, reply):
        import base64

        self.tool = reply.get("tool", "")
        self.text = reply.get("text", "")
        self.data = reply.get("data") or {}
        self.is_error = bool(reply.get("is_error"))
        self.images = [Image(i["mime_type"], base64.b64decode(i["data"])) for i in reply.get("images") or ()]
        self.started, self.ended = reply.get("started"), reply.get("ended")

    def __str__(self):
        return self.text

    def __repr__(self):
        state = "error" if self.is_error else "ok"
        return f"<Result of {self.tool}: {state}, {len(self.text):,} characters, data keys {sorted(self.data)[:8]}>"

    def _repr_pretty_(self, printer, cycle):
        printer.text(self.text)


def _describe(value):
    """A value as the run's argument check names it (tether.args._describe)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {json.dumps(value)}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"string {shown!r}"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _mismatch(prop, value):
    """Why ``value`` does not fit a top-level property (the run's words), or None; deeper checks are the run's."""
    if "enum" in prop:
        allowed = prop["enum"]
        if value in allowed and type(value) in {type(a) for a in allowed}:
            return None
        return f"expected one of {', '.join(json.dumps(a) for a in allowed)}, got {_describe(value)}"
    kind = prop.get("type")
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = {
        "string": isinstance(value, str),
        "integer": number and (isinstance(value, int) or float(value).is_integer()),
        "number": number,
        "boolean": isinstance(value, bool),
        "array": isinstance(value, (list, tuple)),
        "object": isinstance(value, dict),
    }.get(kind, True)
    if ok:
        return None
    return f"expected {'boolean (true or false)' if kind == 'boolean' else kind}, got {_describe(value)}"


def _problems(schema, args):
    """The run's argument problems for what the kernel can check: names, required ones, top-level types."""
    props = schema.get("properties") or {}
    names = list(props)
    unknown = []
    for key in args:
        if key not in props:
            import difflib

            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            unknown.append(f"unknown argument '{key}'{hint}; allowed: {', '.join(names) or 'none'}")
    if unknown:
        return unknown
    required = set(schema.get("required") or ())
    out = []
    for key in names:
        if key not in args or (args[key] is None and key not in required):
            if key in required and key not in args:
                out.append(f"missing required argument '{key}'")
            continue
        why = _mismatch(props[key], args[key])
        if why:
            out.append(f"{key}: {why}")
    return out


def _annotation(prop):
    import typing

    if "enum" in prop:
        return typing.Literal[tuple(prop["enum"])]
    if "anyOf" in prop:
        return typing.Union[tuple(_annotation(p) for p in prop["anyOf"])]  # noqa: UP007 - built at run time
    kinds = {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict}
    kind = prop.get("type")
    if kind == "array":
        return list[_annotation(prop["items"])] if prop.get("items") else list
    return kinds.get(kind, typing.Any)


_ABSENT = object()


def _signature(schema):
    import inspect

    required = set(schema.get("required") or ())
    params = []
    for name, prop in (schema.get("properties") or {}).items():
        ann = _annotation(prop)
        if name in required:
            default = inspect.Parameter.empty
        else:
            default = prop.get("default")
            if default is None:
                import typing

                ann = typing.Optional[ann]  # noqa: UP045 - the kernel's Python may be older than 3.10
        params.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=ann)
        )
    return inspect.Signature(params, return_annotation=Result)


def _doc(entry):
    lines = [entry["description"], "", f"tier: {entry['tier']}. Arguments:"]
    required = set(entry["schema"].get("required") or ())
    for name, prop in (entry["schema"].get("properties") or {}).items():
        need = "required" if name in required else f"default {json.dumps(prop.get('default'))}"
        lines.append(f"  {name} ({need}): {prop.get('description', '')}")
    lines.append("Returns a Result: str(r) is the text, r.data the structured data, r.is_error, r.images.")
    return "\n".join(lines)


def _checked(entry, kwargs):
    """The arguments to send, or ToolArgumentsError with the message the tool itself would give."""
    args = {k: (list(v) if isinstance(v, tuple) else v) for k, v in kwargs.items()}
    problems = _problems(entry["schema"], args)
    if problems:
        raise ToolArgumentsError(f"invalid arguments for {entry['name']}: {'; '.join(problems)}")
    return {"tool": entry["name"], "args": args}


def _result(reply):
    if (reply.get("data") or {}).get("error") == "invalid_arguments":  # what only the run could check
        raise ToolArgumentsError(reply.get("text", ""))
    return Result(reply)


_pending = []  # (call, future, raw) of awaitables not yet sent: sent together at the loop's next turn


def _flush():
    batch = _pending[:]
    _pending.clear()
    try:
        replies = _send([call for call, _, _ in batch])
    except BaseException as exc:  # noqa: BLE001 - every waiting call gets it
        for _, fut, _ in batch:
            if not fut.done():
                fut.set_exception(exc)
        return
    for (_, fut, raw), reply in zip(batch, replies):
        if fut.done():
            continue
        try:
            fut.set_result(Result(reply) if raw else _result(reply))
        except ToolArgumentsError as exc:
            fut.set_exception(exc)


async def _submit(call, raw=False):
    import asyncio

    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    _pending.append((call, fut, raw))
    if len(_pending) == 1:
        loop.call_soon(_flush)  # after the other tasks started in this turn (asyncio.gather's) added theirs
    return await fut


def _stub(entry, asynchronous):
    def call(**kwargs):
        request = _checked(entry, kwargs)
        if asynchronous:
            return _submit(request)
        return _result(_send([request])[0])

    call.__name__ = call.__qualname__ = entry["name"]
    call.__doc__ = _doc(entry)
    call.__signature__ = _signature(entry["schema"])
    return call


class _Namespace:
    """Attribute access to the run's tools as stubs (sync, or async for ``tools.aio``)."""

    def __init__(self, asynchronous):
        self._async = asynchronous
        self._stubs = {}

    def _entry(self, name):
        entry = _catalog["tools"].get(name)
        if entry is None:
            shown = ", ".join(sorted(_catalog["tools"])[:40]) or "none"
            raise ToolNotFoundError(
                f"tools has no tool {name!r} on this surface; tools.help() lists them ({shown})"
            )
        return entry

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        key = (_catalog["version"], name)
        if key not in self._stubs:
            self._stubs[key] = _stub(self._entry(name), self._async)
        return self._stubs[key]

    def __dir__(self):
        own = {n for n in (*type(self).__dict__, *vars(self)) if not n.startswith("_")}
        return sorted(set(_catalog["tools"]) | own)


class AsyncTools(_Namespace):
    """``await tools.aio.read(path=...)``: awaitables; calls gathered together run at once in the run."""

    def __init__(self):
        super().__init__(True)

    async def call(self, name, args=None, /):
        """The untyped door: ``await tools.aio.call(name, {...})`` returns a Result, never raises on a tool error."""
        return await _submit({"tool": name, "args": dict(args or {})}, raw=True)


class Tools(_Namespace):
    """The run's tools seen from this kernel's surface, as functions with keyword-only arguments.

    ``tools.read(path="README.md")`` returns a Result; ``tools.help()`` lists the tools, ``tools.help("read")``
    shows one in full; ``tools.call(name, {...})`` calls any tool by name (also one named like a method here);
    ``await asyncio.gather(tools.aio.read(path="a"), tools.aio.read(path="b"))`` runs calls at once.
    If a cell rebinds the name ``tools``, ``from __tether__ import tools`` gets this object back.
    """

    def __init__(self):
        super().__init__(False)
        self.aio = AsyncTools()

    def call(self, name, args=None, /):
        """The untyped door: ``tools.call(name, {...})`` returns a Result, never raises on a tool error."""
        if not isinstance(name, str):
            raise TypeError(f"tools.call(): the tool name must be a string, got {type(name).__name__}")
        return Result(_send([{"tool": name, "args": dict(args or {})}])[0])

    def help(self, name=None, /):
        """One line per tool visible here; ``tools.help("read")``: one tool's arguments and full schema."""
        if name is None:
            entries = sorted(_catalog["tools"].values(), key=lambda e: e["name"])
            for e in entries:
                summary = e["description"].split(". ")[0].strip().rstrip(".")
                summary = summary if len(summary) <= 100 else summary[:97] + "..."
                print(f"{e['name']} ({e['tier']}): {summary}")
            print(f"[{len(entries)} tools; tools.help(name) shows one in full]")
            return
        entry = self._entry(name)
        print(f"tools.{name}{_signature(entry['schema'])}\n\n{_doc(entry)}\n\nschema: ")
        print(json.dumps(entry["schema"], indent=1))


_catalog = {"version": 0, "tools": {}}
tools = Tools()


def set_catalog(text):
    """The run's tools for this kernel's surface (sent before a cell when they changed)."""
    entries = json.loads(text)
    _catalog["tools"] = {e["name"]: e for e in entries}
    _catalog["version"] += 1


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
    for name, value in (("tool", tool), ("tool_result", tool_result), ("tools", tools)):
        shell.user_ns[name] = value
        shell.user_ns_hidden[name] = value
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
