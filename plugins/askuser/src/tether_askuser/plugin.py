"""Entry point of the askuser family: the question-port resource, ask_user, and approval by card.

Imports only the standard library and the core at import time; ports are built on first use.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tether.hookspecs import hookimpl, tether_elicitation

from tether_askuser import hookspecs
from tether_askuser.options import DEPRECATED, AskuserOptions

if TYPE_CHECKING:
    from tether.plugins import Registrar
    from tether.run import Run
    from tether.tools import Tool


@hookimpl
def tether_addoptions(register: Any) -> None:
    register(AskuserOptions, deprecated=DEPRECATED)


@hookimpl
def tether_addhooks(pluginmanager: Any) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def tether_askuser_port(run: Run) -> Any:
    """The harness's port, else MCP elicitation, else the controlling terminal when stdin is a TTY."""
    options = run.options.of(AskuserOptions)
    given = options.askuser_port
    if given is not None:
        if hasattr(given, "ask"):
            return given
        if callable(given):
            from tether_askuser.programmatic import CallbackPort

            # callable() cannot check for an async fn(question) -> Answer: that is the option's documented contract
            return CallbackPort(given)  # pyright: ignore[reportArgumentType]
        raise TypeError(
            f"run option askuser_port must be a question port or an async callable, not {type(given).__name__}"
        )
    elicit = run.resource(tether_elicitation)  # the host's channel to its client's human
    if elicit is not None:
        from tether_askuser.elicitation import ElicitationPort

        return ElicitationPort(elicit)
    terminal = options.askuser_terminal
    # stdin that is not a TTY means a program drives us (e.g. MCP over stdio): a human's terminal that
    # happens to be our controlling terminal belongs to that program's UI, not to our cards
    if terminal is True or (terminal is None and os.isatty(0)):
        from tether_askuser.terminal import TerminalPort

        return TerminalPort.open()
    return None


@hookimpl
def tether_register_tools(run: Run, register: Registrar) -> None:
    try:
        port = run.resource(hookspecs.tether_askuser_port)
    except Exception as exc:  # noqa: BLE001 - a harness's broken port must not break the run
        register.unavailable(f"the question port could not be created: {type(exc).__name__}: {exc}")
        return
    if port is None:
        register.unavailable(
            "no human is reachable in this run (no terminal on stdin, no MCP client with the elicitation "
            "capability, no harness port in run option 'askuser_port'); decide under an assumption you state",
        )
        return
    if getattr(port, "target", None) is None:
        register.unavailable(
            "the question port has no place to show a card right now; decide under an assumption you state"
        )
        return
    from tether_askuser.tools import make_tools

    for tool in make_tools(port):
        register(tool)


@hookimpl
def tether_approve(run: Run, tool: Tool, arguments: dict[str, Any]) -> Any:
    from tether_askuser.approval import approve_by_card, wants_card

    if not wants_card(run, tool):
        return None
    return approve_by_card(run, tool, arguments)
