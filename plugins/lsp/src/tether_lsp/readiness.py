"""Whether a server was ready when it was asked, and the one line an answer says when it was not.

A server is not ready while it reports work-done progress for the project (indexing, loading packages,
a round of analysis), or before its first complete round (`Connection.indexing`). Each question a tool
asks records the server's state at the moment it is asked (`record`, called by `Supervisor._on`); the
answer then says, per server that was not ready, one line in one wording for every action
(`note`), and `ready` in its data. An answer after readiness says nothing extra.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tether_lsp.connection import Connection

# per call: server id -> what it was still doing when asked (None: it was ready)
ASKED: ContextVar[dict[str, str | None] | None] = ContextVar("tether_lsp_asked", default=None)


def busy(conn: Connection) -> str | None:
    """What the server is still doing, in the words of the note ("working on 'Setting up workspace' (3 s)"),
    or None when it is ready.

    A diagnosis round after the first one (gopls's "diagnosing opened files", `ServerDef.round_titles`,
    begun by the very document a question opens) does not count: gopls answers navigation from the
    packages it loaded, which that round does not change."""
    if not conn.indexing:
        return None
    now = time.monotonic()
    titles = conn.server.round_titles
    work = sorted(
        (at, title)
        for title, at in conn.progress_titles.values()
        if not (titles and conn.first_end is not None and title.startswith(titles))
    )
    if work:
        at, title = work[0]
        what = f"working on '{title}'" if title else "analysing the project"
        return f"{what} ({now - at:.0f} s)"
    if conn.progress_tokens and not (conn.progress_tokens - conn.progress_titles.keys()) and conn.quiescent:
        return None  # only such diagnosis rounds
    return f"analysing the project ({now - conn.started_at:.0f} s since it started)"


def record(conn: Connection, again: bool = False) -> str | None:
    """Record the server's state for the current call's answer: the first question asked of it counts, or
    (``again``) now, for an answer read after a wait for the server's round (diagnostics of a file)."""
    state = busy(conn)
    asked = ASKED.get()
    if asked is not None:
        if again:
            asked[conn.server.id] = state
        else:
            asked.setdefault(conn.server.id, state)
    return state


def pending(conn: Connection, state: str) -> None:
    """Record for the current call's answer that the server was still ``state`` (a change it was not seen to
    analyse), whatever it reported."""
    asked = ASKED.get()
    if asked is not None:
        asked[conn.server.id] = state


def was_busy(conn: Connection) -> bool:
    """Whether the server was not ready when the current call asked it (now, when the call recorded nothing)."""
    asked = ASKED.get()
    if asked is not None and conn.server.id in asked:
        return asked[conn.server.id] is not None
    return busy(conn) is not None


def line(server: str, state: str) -> str:
    """The one wording of every answer given while a server was not ready."""
    return f"{server} still {state}: this answer may be incomplete; ask again in a few seconds"


def notes() -> list[str]:
    """The lines of the current call: one per server that was not ready when asked."""
    asked = ASKED.get() or {}
    return [line(server, state) for server, state in asked.items() if state is not None]


def asked_any() -> bool:
    return bool(ASKED.get())


async def wait_ready(conn: Connection, timeout: float) -> str | None:
    """Wait (at most ``timeout`` s) until the server is ready; what it is still doing when it is not by then."""
    from tether_lsp.rounds import next_check

    deadline = time.monotonic() + timeout
    while (state := busy(conn)) is not None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return state
        # a first round may end by quiet alone: wake when it could, not only at the next event
        await conn.next_event(min(remaining, max(0.05, next_check(conn, conn.start_mark))))
    return None
