"""`lsp diagnostics "*"`: the project's own checker (basedpyright --outputjson, tsc --noEmit, go vet,
cargo check), run in the server's root and its output parsed into diagnostics."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from tether.diagnostics import Diagnostic
from tether.tools import ToolError

from tether_lsp.servers import ServerDef, find_binary

if TYPE_CHECKING:
    from tether.run import Run

TSC = re.compile(
    r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+),(?P<col>\d+)\): (?P<sev>error|warning|message) (?P<code>TS\d+): (?P<msg>.*)$"
)
GNU = re.compile(r"^(?:vet: )?(?P<file>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+):\s*(?P<msg>.*)$")
RULE = re.compile(
    r"^(?P<code>[A-Z]{1,4}[0-9]{1,4})(?: \[\*\])? (?P<msg>.*)$"
)  # as in "F401 [*] `os` imported but unused"
SEV = re.compile(
    r"^(?P<sev>error|warning|info|note|hint)(?:\[(?P<code>[^\]]+)\])?:?\s*(?P<msg>.*)$", re.IGNORECASE
)


def _rel(run: Run, cwd: Path, file: str) -> str:
    path = Path(file)
    return run.relpath(path if path.is_absolute() else cwd / path)


def parse(
    fmt: str, out: str, run: Run, cwd: Path, server: ServerDef | None = None
) -> tuple[list[Diagnostic], list[str]]:
    """The checker's diagnostics, and where it says it stopped reporting (file:line of the Go compiler's
    "too many errors" after its first 10 errors of a package: a cut, not an error). ``server`` gives a
    "gnu" line's source and, for a line that states no severity, its severity (`checker_severity`)."""
    diags: list[Diagnostic] = []
    stopped: list[str] = []
    if fmt == "pyright-json":
        start = out.find("{")
        data = json.loads(out[start:]) if start >= 0 else {}
        for d in data.get("generalDiagnostics", []):
            pos = d.get("range", {}).get("start", {})
            sev = d.get("severity", "error")
            diags.append(
                Diagnostic(
                    _rel(run, cwd, d.get("file", "?")),
                    pos.get("line", 0) + 1,
                    pos.get("character", 0) + 1,
                    sev,
                    d.get("message", "").strip(),
                    d.get("rule"),
                    "basedpyright",
                )
            )
    elif fmt == "tsc":
        for line in out.splitlines():
            m = TSC.match(line.strip())
            if m:
                sev = {"message": "information"}.get(m["sev"], m["sev"])
                diags.append(
                    Diagnostic(
                        _rel(run, cwd, m["file"]),
                        int(m["line"]),
                        int(m["col"]),
                        sev,
                        m["msg"],
                        m["code"],
                        "tsc",
                    )
                )
    elif fmt == "cargo-json":
        for line in out.splitlines():
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("reason") != "compiler-message":
                continue
            m = msg.get("message", {})
            spans = [s for s in m.get("spans", []) if s.get("is_primary")]
            if not spans or m.get("level") not in ("error", "warning"):
                continue
            s = spans[0]
            code = (m.get("code") or {}).get("code")
            diags.append(
                Diagnostic(
                    _rel(run, cwd, s["file_name"]),
                    s["line_start"],
                    s["column_start"],
                    m["level"],
                    m["message"],
                    code,
                    "cargo",
                )
            )
    elif fmt == "gnu":
        for line in out.splitlines():
            m = GNU.match(line.strip())
            if not m:
                continue
            if m["msg"].strip() == "too many errors":
                stopped.append(f"{_rel(run, cwd, m['file'])}:{m['line']}")
                continue
            sev, code, msg = "error", None, m["msg"]
            if s := SEV.match(msg):
                sev = {"info": "information", "note": "information"}.get(s["sev"].lower(), s["sev"].lower())
                code, msg = s["code"], s["msg"]
            elif r := RULE.match(msg):
                sev, code, msg = server.checker_severity if server else "error", r["code"], r["msg"]
            source = server.id if server else None
            diags.append(
                Diagnostic(_rel(run, cwd, m["file"]), int(m["line"]), int(m["col"]), sev, msg, code, source)
            )
    return diags, stopped


async def run_checker(
    server: ServerDef, root: Path, run: Run, timeout: float
) -> tuple[list[Diagnostic], str, list[str]]:
    """Run the server's project checker in ``root``; (diagnostics, the command as shown, where it
    stopped reporting)."""
    if not server.checker or not server.checker_format:
        raise ToolError(
            f"{server.id} has no project checker; ask for diagnostics of one file at a time (file: 'path/to/file')",
            code="no_checker",
        )
    binary = find_binary(server.checker[0], [root, run.root], trusted=run.trusted)
    if binary is None:
        raise ToolError(
            f"the project checker `{server.checker[0]}` of {server.id} is not installed; install it or ask for "
            "diagnostics of one file at a time",
            code="checker_missing",
        )
    shown = " ".join(server.checker)
    proc = await asyncio.create_subprocess_exec(
        binary,
        *server.checker[1:],
        cwd=str(root),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        env=None if run.trusted else {**os.environ, **server.untrusted_env},
    )
    run.track_process(proc.pid)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        await run.stop_process(proc, 0.5)
        raise ToolError(
            f"`{shown}` did not finish within {timeout:g} s and was stopped; raise the run option lsp_checker_timeout "
            "or ask for diagnostics of one file",
            code="timeout",
        ) from None
    text = out.decode(errors="replace") + "\n" + err.decode(errors="replace")
    try:
        diags, stopped = parse(
            server.checker_format,
            out.decode(errors="replace") if server.checker_format == "pyright-json" else text,
            run,
            root,
            server,
        )
    except ValueError:
        tail = text.strip()[-500:]
        raise ToolError(
            f"could not read the output of `{shown}` (exit {proc.returncode}): {tail}",
            code="checker_output",
        ) from None
    return diags, shown, stopped
