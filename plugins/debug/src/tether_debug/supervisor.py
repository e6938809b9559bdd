"""The debug-session supervisor: one session per conversation, a hard TTL, breakpoints kept before launch.

Created cheaply by the family's resource hook (nothing starts until `launch` or `attach`); the run
calls `aclose` when it closes, which ends every session it still holds.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from tether_debug.args import DebugArgs

if TYPE_CHECKING:  # the supervisor is created at registration: sessions and the DAP client load on launch
    import asyncio

    from tether_debug.breakpoints import Plan
    from tether_debug.session import Ended, Session

log = logging.getLogger("tether.debug")


class DebugSupervisor:
    def __init__(self) -> None:
        self.sessions: dict[str, Session] = {}
        self.plans: dict[str, Plan] = {}  # conversation -> its breakpoints
        self.launches: dict[str, DebugArgs] = {}  # conversation -> its last launch (for restart)
        self.notes: dict[str, str] = {}  # conversation -> what happened behind its back (TTL expiry)
        # conversation -> (program, end, unread output, dropped)
        self.last: dict[str, tuple[str, Ended, str, int]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._closing: set[asyncio.Task] = set()

    def session(self, conversation: str) -> Session | None:
        """The live session of a conversation; an expired one is ended here if its timer has not yet."""
        session = self.sessions.get(conversation)
        if session is not None and time.monotonic() >= session.deadline:
            self._expire(conversation, session)
            return None
        # A closed connection under a running program is reported by the handler as the program's end;
        # under a stopped one nothing can drive the program any more.
        if (
            session is not None
            and session.stop is not None
            and session.client is not None
            and session.client.closed
        ):
            self._lost(conversation, session)
            return None
        return session

    def _lost(self, conversation: str, session: Session) -> None:
        """The adapter died under a stopped program: nothing can drive it any more."""
        stderr = session.stderr_text()
        self.notes[conversation] = (
            f"The debug adapter of {session.program} exited unexpectedly and the session was ended"
            + (f" (adapter said: {stderr})" if stderr else "")
            + ". Start a new one with action='launch'."
        )
        self._forget(conversation)
        self._close_later(session)

    def take_note(self, conversation: str) -> str | None:
        return self.notes.pop(conversation, None)

    def adopt(self, session: Session) -> None:
        """Hold a started session and arm its TTL timer."""
        import asyncio

        conversation = session.conversation_id
        # the time limit counts from when the session is there to use (a slow launch does not eat it)
        session.started = time.monotonic()
        session.deadline = session.started + session.ttl
        self.sessions[conversation] = session
        self.last.pop(conversation, None)
        loop = asyncio.get_running_loop()
        self._timers[conversation] = loop.call_at(
            loop.time() + max(0.0, session.deadline - time.monotonic()), self._expire, conversation, session
        )

    def _expire(self, conversation: str, session: Session) -> None:
        if self.sessions.get(conversation) is not session:
            return
        minutes = session.ttl / 60
        limit = f"{minutes:g} min" if minutes >= 1 else f"{session.ttl:g} s"
        self.notes[conversation] = (
            f"The debug session of {session.program or 'the program'} reached its time limit ({limit}) and was "
            "ended: the debuggee and the adapter were terminated. Start a new one with action='launch' if you need it."
        )
        self._forget(conversation)
        self._close_later(session)

    def _close_later(self, session: Session) -> None:
        """Close a session from a sync path (a timer, a check); `aclose` waits for what is still closing."""
        import asyncio

        task = asyncio.get_running_loop().create_task(session.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _forget(self, conversation: str) -> None:
        self.sessions.pop(conversation, None)
        timer = self._timers.pop(conversation, None)
        if timer is not None:
            timer.cancel()

    async def end(self, conversation: str, session: Session) -> None:
        """Forget and close a session (terminate, or the program ended)."""
        if self.sessions.get(conversation) is session:
            self._forget(conversation)
        await session.close()

    def remember_end(
        self, conversation: str, session: Session, ended: Ended, output: str, dropped: int
    ) -> None:
        self.last[conversation] = (session.program, ended, output, dropped)

    def plan_for(self, conversation: str) -> Plan:
        from tether_debug.breakpoints import Plan  # with the code that fills it: loads at the first launch

        return self.plans.setdefault(conversation, Plan())

    def idle(self) -> bool:
        """Nothing to close: no session, no session closing, no timer (see `tether.run.list_tools`)."""
        return not self.sessions and not self._closing and not self._timers

    async def aclose(self) -> None:
        import asyncio

        sessions = list(self.sessions.items())
        for conversation, _ in sessions:
            self._forget(conversation)
        await asyncio.gather(*(s.close() for _, s in sessions), return_exceptions=True)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
