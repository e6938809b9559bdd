"""The `tether` console script: a small harness over one run.

    tether tools [--root DIR] [--surface S] [--vibe] [--option K=V ...] [-p MODULE|no:NAME ...] [--json]
    tether call TOOL [ARGS_JSON] [--root DIR] [--surface S] [--vibe] [--option K=V ...] [-p ...] [--json]
    tether serve [--root DIR] [--surface S] [--vibe] [--option K=V ...] [-p ...] [--http HOST:PORT [--token-file F]]
    tether --version

`call` exits 0 on success, 1 when the tool's result is an error, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
from typing import Any

from tether.options import OptionsError
from tether.tools import Text


class _Usage(Exception):
    pass


# Starting fills the interpreter with modules, classes and functions that live to the end, so the
# young-generation collections while the families load find nothing to free (about a twentieth of a
# cold `tether tools`). Collect rarely until the run is open, then as usual (`_started`).
_STARTUP_GC_THRESHOLD = 50_000
_gc_threshold = gc.get_threshold()


def _started() -> None:
    """The run is open: collect garbage as Python does by default again."""
    gc.set_threshold(*_gc_threshold)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # exit 2 with one line, as argparse does, but through our path
        raise _Usage(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tether", description="Run-bound tools for coding agents.")
    p.add_argument("--version", action=_Version, help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--root", default=".", help="the run's root (default: the current directory)")
        sp.add_argument(
            "--surface", default="full", help="full, plan, readonly or one a plugin defines (default: full)"
        )
        sp.add_argument("--vibe", action="store_true", help="turn vibe mode on for the run")
        sp.add_argument(
            "--option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a run option (VALUE as JSON when it parses, else a string); repeatable; "
            "`tether tools --json` lists them",
        )
        sp.add_argument(
            "-p",
            "--plugin",
            action="append",
            default=[],
            metavar="MODULE|no:NAME",
            help="load an importable module as a plugin (a harness policy), or never load the "
            "plugin NAME (an entry point, e.g. no:lsp); repeatable",
        )
        sp.add_argument(
            "--trust",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="whether the run may execute the root's code (its own binaries, checkers that "
            "run it); default: trusted on the full surface, untrusted on plan and readonly",
        )
        sp.add_argument(
            "--sandbox",
            action="store_true",
            help="run exec tools (eval, debug, vibe workers) inside the built-in bubblewrap sandbox "
            "(the sandbox_* options set its policy); they refuse to run when it cannot be had",
        )

    t = sub.add_parser("tools", help="list the tools of a run on a surface, with tiers and schemas")
    common(t)
    t.add_argument("--json", action="store_true")
    c = sub.add_parser("call", help="call one tool in a fresh run")
    c.add_argument("tool")
    c.add_argument("arguments", nargs="?", default="{}", help="the arguments as a JSON object")
    common(c)
    c.add_argument("--json", action="store_true")
    s = sub.add_parser("serve", help="serve one run over MCP (stdio, or Streamable HTTP with --http)")
    common(s)
    s.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve MCP's Streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: any free "
        "port, printed on stderr); a HOST other than loopback needs a bearer token",
    )
    s.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"the bearer token HTTP clients must send, read from FILE (or set ${TOKEN_ENV}); "
        "never on the command line",
    )
    return p


TOKEN_ENV = "TETHER_SERVE_TOKEN"


class _Version(argparse.Action):
    """``--version``, looked up only when asked for (reading package metadata is not free at start-up)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(f"tether {_version()}")
        parser.exit()


def _version() -> str:
    from importlib.metadata import version

    return version("tether-core")


def _serve(ns: argparse.Namespace) -> int:
    """`tether serve`: the SDK is an extra of tether-core, so its absence is a usage error naming it."""
    run_kwargs = _run_kwargs(ns)
    http = _http_bind(ns.http) if ns.http else None
    if http is None and ns.token_file:
        raise _Usage("--token-file is for --http HOST:PORT; stdio needs no token")
    token = _token(ns) if http is not None else None
    if http is not None and token is None and not _loopback(http[0]):
        raise _Usage(
            f"--http {ns.http} listens beyond this machine, so clients must send a bearer token: set "
            f'${TOKEN_ENV} or pass --token-file FILE (make one with: python -c "import secrets; '
            'print(secrets.token_urlsafe(32))")'
        )
    from tether.run import Run

    Run(**run_kwargs)  # a bad option or surface stops the server before a client connects
    _started()
    try:
        from tether.serve import serve
    except ModuleNotFoundError as exc:
        raise _Usage(
            f"tether serve needs the MCP SDK, which is not installed (no module {exc.name!r}): install "
            "the mcp extra, e.g. pip install 'tether-core[mcp]', or install 'tether', which includes it"
        ) from None
    return serve(http=http, token=token, **run_kwargs)


def _http_bind(value: str) -> tuple[str, int]:
    hostname, sep, port = value.rpartition(":")
    hostname = hostname.strip("[]")
    if not sep or not hostname or not port.isdigit() or int(port) > 65535:
        raise _Usage(
            f"--http takes HOST:PORT, e.g. 127.0.0.1:8765 or 0.0.0.0:8765 or [::1]:8765; got {value!r}"
        )
    return hostname, int(port)


def _loopback(hostname: str) -> bool:
    import ipaddress

    try:
        return hostname == "localhost" or ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False


def _token(ns: argparse.Namespace) -> str | None:
    if ns.token_file:
        try:
            with open(ns.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as exc:
            raise _Usage(f"--token-file {ns.token_file!r} cannot be read: {exc.strerror}") from None
        where = f"--token-file {ns.token_file!r}"
    elif os.environ.get(TOKEN_ENV):
        token, where = os.environ[TOKEN_ENV].strip(), f"${TOKEN_ENV}"
    else:
        return None
    if len(token) < 16 or any(c.isspace() for c in token):
        raise _Usage(
            f"the bearer token in {where} must be at least 16 characters without spaces; make one with: "
            'python -c "import secrets; print(secrets.token_urlsafe(32))"'
        )
    return token


def _run_kwargs(ns: argparse.Namespace) -> dict[str, Any]:
    import tether.files

    if not os.path.isdir(ns.root):
        raise _Usage(f"--root {ns.root!r} is not a directory")
    options: dict[str, Any] = {}
    for item in ns.option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise _Usage(f"--option takes KEY=VALUE, got {item!r}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    if ns.trust is not None:
        options["trust"] = ns.trust
    if ns.sandbox:
        options["sandbox"] = True
    plugins, block = _plugins(ns.plugin)
    return {
        "root": ns.root,
        "options": options,
        "surface": ns.surface,
        "conversation_id": os.urandom(16).hex(),
        "modes": {"vibe"} if ns.vibe else set(),
        "plugins": [tether.files, *plugins],
        "block": block,
    }


def _plugins(given: list[str]) -> tuple[list[Any], list[str]]:
    """``-p module`` imports a plugin module; ``-p no:name`` blocks a plugin (as pytest's ``-p``)."""
    import importlib

    plugins, block = [], []
    for item in given:
        name = item.removeprefix("no:")
        if not name:
            raise _Usage(f"-p takes a module name or no:NAME, got {item!r}")
        if item.startswith("no:"):
            block.append(name)
            continue
        try:
            plugins.append(importlib.import_module(name))
        except Exception as exc:  # noqa: BLE001 - any failure to import is the user's to fix
            raise _Usage(
                f"-p {name}: the plugin module cannot be imported ({type(exc).__name__}: {exc}); "
                "give an importable module name (PYTHONPATH=. for one in the current directory)"
            ) from None
    return plugins, block


def _summarize_schema(schema: dict[str, Any]) -> str:
    req = set(schema.get("required", ()))
    parts = []
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type") or "any"
        if "enum" in prop:
            kind = "|".join(map(str, prop["enum"]))
        parts.append(f"{name}{'' if name in req else '?'}: {kind}")
    return ", ".join(parts) or "(no arguments)"


def _tools(ns: argparse.Namespace) -> int:
    from tether.run import list_tools

    # no event loop: a listing registers the tools and opens the run for no work (see list_tools)
    listing = list_tools(**_run_kwargs(ns))
    if ns.json:
        print(json.dumps(listing, indent=2))
        return 0
    print(f"Tools on surface '{ns.surface}':")
    for t in listing["tools"]:
        print(f"  {t['name']} [{t['tier']}] ({t['family']}) {t['description']}")
        print(f"      args: {_summarize_schema(t['input_schema'])}")
    if listing["unavailable"]:
        print("Installed but not available in this run:")
        for u in listing["unavailable"]:
            print(f"  {u['family']}: {u['reason']}")
    print(f"Sandbox: {listing['sandbox']}")
    return 0


def _terminal_progress():
    if not sys.stderr.isatty():
        return None

    def show(done: float, total: float | None, message: str | None) -> None:
        pct = f"{100 * done / total:.0f}%" if total else f"{done:g}"
        _to_terminal(f"\r\x1b[2K[{pct}] {message or ''}")

    return show


def _to_terminal(text: str) -> None:
    """Best effort: a terminal that hung up (EIO) must not cost the result, which goes to stdout."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except OSError:
        pass


async def _call(ns: argparse.Namespace) -> int:
    from tether.run import open_run

    try:
        arguments = json.loads(ns.arguments)
    except json.JSONDecodeError as exc:
        raise _Usage(
            f'ARGS_JSON is not valid JSON ({exc.msg} at column {exc.colno}); pass an object like \'{{"path": "x.py"}}\''
        ) from None
    if not isinstance(arguments, dict):
        raise _Usage('ARGS_JSON must be a JSON object, e.g. \'{"path": "x.py"}\'')
    progress = _terminal_progress()
    async with open_run(**_run_kwargs(ns)) as run:
        _started()
        result = await run.call(ns.tool, arguments, progress=progress)
    if progress:
        _to_terminal("\r\x1b[2K")
    if ns.json:
        print(json.dumps(result.to_json()))
    else:
        for block in result.content:
            if isinstance(block, Text):
                print(block.text)
            else:
                print(f"[image: {block.mime_type}, {len(block.data)} bytes; use --json to get it]")
    return 1 if result.is_error else 0


def main(argv: list[str] | None = None) -> int:
    global _gc_threshold
    _gc_threshold = gc.get_threshold()
    gc.set_threshold(_STARTUP_GC_THRESHOLD, *_gc_threshold[1:])
    try:
        return _main(argv)
    finally:
        _started()


def _main(argv: list[str] | None) -> int:
    logging.basicConfig(
        level=os.environ.get("TETHER_LOG_LEVEL", "WARNING"),
        stream=sys.stderr,
        format="tether %(levelname)s %(name)s: %(message)s",
    )
    try:
        ns = _parser().parse_args(argv)
        if ns.command in ("serve", "call"):
            from tether.procs import adopt_orphans

            adopt_orphans()  # our own process: orphans of what a run starts come back to it
        if ns.command == "serve":
            return _serve(ns)
        if ns.command == "tools":
            return _tools(ns)
        import asyncio

        return asyncio.run(_call(ns))
    except _Usage as exc:
        print(f"tether: {exc}", file=sys.stderr)
        return 2
    except OptionsError as exc:
        for problem in exc.problems:
            print(f"tether: {problem}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`tether tools | head`): nothing more can be said on stdout, and a
        # traceback on stderr would say nothing true; leave as `head`'s other writers do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a writer killed by it


def console() -> int:
    """The console script: `main`, then an exit that skips the collector's last sweeps of the heap.

    The interpreter collects garbage several times while it shuts down, each time visiting every
    object the families' modules made, which all live to the end: about a tenth of a cold `tether
    tools`. Frozen, they are left out of those sweeps; everything else about the exit is as usual
    (atexit handlers, flushing, objects freed by reference count). The run is already closed here.
    Only the program's own exit does this: `main` leaves the collector as it found it.
    """
    code = main()
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(console())
