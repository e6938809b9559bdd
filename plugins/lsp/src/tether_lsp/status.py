"""The `lsp` tool's status: the servers running (their state, rounds and file sync) and every server
defined, with whether it is enabled and available at the root and why not."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.tools import ToolResult

from tether_lsp import readiness
from tether_lsp.watching import POLL_INTERVAL, SCAN_CAP

if TYPE_CHECKING:
    from tether.run import Run

    from tether_lsp.connection import Connection
    from tether_lsp.supervisor import Supervisor


async def status(run: Run, sup: Supervisor) -> ToolResult:
    running = []
    alive = [conn for conn in sup.connections.values() if conn.alive]
    for conn in alive:
        running.append(
            {
                "server": conn.server.id,
                "root": run.relpath(conn.root),
                "pid": conn.pid,
                "uptime_s": round(sup.uptime(conn), 1),
                "open_documents": len(conn.docs),
                "restarts": conn.restarts,
                "position_encoding": conn.encoding,
                "ready": (state := readiness.busy(conn)) is None,
                "still": state,  # what it is still doing, when not ready
                "binary": conn.binary,
                "rounds": conn.rounds,
                "file_sync": (
                    f"polled every {POLL_INTERVAL:g} s (large tree)"
                    if conn.watcher.poller is not None
                    else "checked before every query"
                )
                + (f" - only the first {SCAN_CAP} files" if conn.watcher.truncated else ""),
            }
        )
    servers = []
    for server in sup.definitions():
        avail = await sup.availability(server, run.root)
        servers.append(
            {
                "id": server.id,
                "languages": list(server.languages),
                "enabled": sup.enabled(server),
                "replaced_by": sup.replaced_by(server),
                "available": avail.ok,
                "reason": avail.reason,
                "binary": avail.binary,
                "note": avail.note,
                "root": run.relpath(avail.root) if avail.root else None,
            }
        )
    lines = ["running:" if running else "running: none (servers start on the first query for a file)"]
    lines += [
        f"  {r['server']} for {r['root']} (pid {r['pid']}, up {r['uptime_s']} s, {r['open_documents']} open document(s), "
        f"restarts {r['restarts']}, {r['position_encoding']}{', still ' + r['still'] if r['still'] else ''}; "
        f"files changed on disk: {r['file_sync']}){_rounds_note(conn)}"
        for r, conn in zip(running, alive, strict=True)
    ]
    lines.append(
        "servers (checked at the root; a subdirectory with its own marker is checked when a file there is asked about):"
    )
    for s in servers:
        langs = ", ".join(s["languages"])
        if s["replaced_by"]:
            state = f"switched off: {s['replaced_by']} replaces it (name both in the run option lsp_servers to use both)"
        elif not s["enabled"]:
            state = "alternative, not enabled (name it in the run option lsp_servers to use it)"
        elif s["available"]:
            state = f"available ({s['binary']})"
        else:
            state = f"unavailable: {s['reason']}"
        if s["note"]:
            state += f"; {s['note']}"
        lines.append(f"  {s['id']} ({langs}): {state}")
    return ToolResult.text("\n".join(lines), {"running": running, "servers": servers})


def _rounds_note(conn: Connection) -> str:
    """Said of a server read by another round rule than its definition's (`ServerDef.round_titles`)."""
    if conn.rounds == conn.server.rounds:
        return ""
    titles = "/".join(conn.server.round_titles)
    return f"; it reports no '{titles}' progress, so the end of its rounds is read from its publishes"
