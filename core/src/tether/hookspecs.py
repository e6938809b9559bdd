"""The hook specifications of tether: the whole surface a family or a harness plugs into.

Every hook takes the run it is for; implement only the arguments you need (pluggy passes by name).
A hook implementation may return an awaitable where the spec says so; the run awaits it.

Families add their own `firstresult` resource hooks with `tether_addhooks` (as pytest's
`pytest_addhooks`): e.g. the lsp family declares `tether_lsp_supervisor(run)`. A harness overrides a
resource by registering its own implementation with `tryfirst=True`; a resource hook that returns
None means the family registers nothing for the run. Since a `firstresult` hook passes over None to
the next implementation, a harness that wants to switch a family OFF returns `NO_RESOURCE`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from pathlib import Path

    from tether.diagnostics import Diagnostic, PreviewDiagnostics
    from tether.options import OptionRegistry
    from tether.plugins import Registrar
    from tether.run import Run
    from tether.sandbox import Envelope
    from tether.surfaces import Surface
    from tether.tools import Tier, Tool, ToolResult

hookspec = pluggy.HookspecMarker("tether")  # for a family's own hooks: ``@tether.hookspec(firstresult=True)``
hookimpl = pluggy.HookimplMarker("tether")


class _NoResource:
    """Returned by a resource hook: this run has no such resource, and no later implementation may offer one."""

    def __repr__(self) -> str:
        return "NO_RESOURCE"

    def __bool__(self) -> bool:
        return False


NO_RESOURCE = _NoResource()

# the host's channel to its client's human: ``await elicit(message, requested_schema)`` -> ``(action,
# content)``, MCP's elicitation (action "accept", "decline" or "cancel"; content the form's answers)
Elicit = Callable[[str, dict[str, Any]], Awaitable[tuple[str, "dict[str, Any] | None"]]]

CORE_PLUGIN = "tether.builtin"  # the name the core's own implementations register under

# old hook names still served for one release: a plugin implementing one gets a DeprecationWarning
DEPRECATED_HOOKS = {
    "tether_post_write": "tether_write_result",
    "tether_add_surfaces": "tether_register_surfaces",
}


@hookspec(historic=True)
def tether_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    """Add hook specifications (a family's resource hook) with ``pluginmanager.add_hookspecs(module)``."""


@hookspec(historic=True)
def tether_addoptions(register: OptionRegistry) -> None:
    """Declare run options: ``register(MyOptions)``, an attrs class whose fields are built with `tether.arg`.

    Name each option ``<family>_<name>``; give every field a default. The run structures its options
    once, when it opens, strictly (see `tether.options`), and a family reads them typed with
    ``run.options.of(MyOptions)``. ``register(MyOptions, deprecated={"old": "new"})`` keeps an old
    name working, with a DeprecationWarning.
    """


# -- registration -----------------------------------------------------------------------------


@hookspec
def tether_register_tools(run: Run, register: Registrar) -> None:
    """Offer tools for this run: ``register(tool)`` for each.

    Register only when your resource exists for the run (``run.resource(hookspecs.tether_x_resource)``
    is not None); otherwise say why with ``register.unavailable("reason")`` so `tether tools` and an
    unknown-tool error can tell the model. The registrar knows which plugin it asks: a tool registered
    without a family gets the plugin's entry-point name, and so does ``unavailable``.
    """


@hookspec(firstresult=True)
def tether_tool_tier(run: Run, tool: Tool) -> Tier | None:
    """Override a tool's declared tier for this run. Stops at the first non-None result."""


@hookspec
def tether_register_surfaces(run: Run) -> Sequence[Surface] | None:
    """Define more surfaces than `full`, `plan` and `readonly` (a surface = a name and the tiers it sees).

    ``tether --surface NAME`` and ``open_run(surface=NAME)`` accept them.
    """


@hookspec
def tether_add_surfaces(run: Run) -> Sequence[Surface] | None:
    """Deprecated name of `tether_register_surfaces`, still called for one release."""


# -- the host ------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def tether_elicitation(run: Run) -> Elicit | None:
    """The host's channel to the human at its client, or None: an async callable
    ``elicit(message, requested_schema) -> (action, content)`` that puts a form to that human.

    `tether serve` answers it (through a plugin it registers for the run) when the MCP client declared
    the ``elicitation`` capability; a harness with a client of its own answers it the same way. Read it as
    a resource, ``run.resource(tether.hookspecs.tether_elicitation)``: the askuser family makes it a
    question port. ``action`` is "accept" (``content`` holds the form's answers), "decline" or "cancel".
    Stops at the first non-None result.
    """


# -- calls --------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def tether_approve(
    run: Run, tool: Tool, arguments: dict[str, Any], paths: Sequence[str]
) -> bool | str | Awaitable[bool | str | None] | None:
    """Allow or refuse a call before it runs.

    ``paths``: for a file-writing tool, the files the call will write, relative to the root (its
    ``touches``); empty for other tools. A tool whose files are known only as it writes (a rename's
    edits) asks again, with every file it is about to write, before writing any; a refusal then
    writes nothing.

    Return None for no opinion, True to allow, False or a reason (str) to refuse. May be awaitable
    (approval by a human card). Stops at the first non-None result, which decides; nobody answering
    means allowed.
    """


# -- diagnostics on write ------------------------------------------------------------------------


@hookspec
def tether_diagnostics_before_write(
    run: Run, paths: Sequence[str], call_id: str
) -> Awaitable[dict[str, list[Diagnostic]] | None] | dict[str, list[Diagnostic]] | None:
    """Before a file-writing tool runs: the current diagnostics of files it will write (the baseline).

    ``paths`` are relative to the root; ``call_id`` pairs this with the after-write call of the same
    write (writes may overlap). A tool's ``touches`` runs before this, so it can refuse bad arguments
    before any checker is asked. Return ``{path: [Diagnostic, ...]}`` for the files you know about.
    Diagnostics present in the baseline are never reported as introduced by the write.
    """


@hookspec
def tether_diagnostics_after_write(
    run: Run, paths: Sequence[str], call_id: str
) -> Awaitable[dict[str, list[Diagnostic]] | None] | dict[str, list[Diagnostic]] | None:
    """After a file-writing tool ran: the latest full diagnostics of every file the write affected.

    Include other files whose diagnostics the write changed (a changed signature). A file's list is
    its whole current set: a diagnostic missing from it has gone away. Return a
    `tether.diagnostics.WriteDiagnostics` instead of a dict to add notes for the model (e.g.
    "diagnostics still pending for x.py after 5 s").
    """


@hookspec
def tether_diagnostics_preview(
    run: Run, contents: Mapping[str, str | None], call_id: str
) -> Awaitable[PreviewDiagnostics | None] | PreviewDiagnostics | None:
    """Without writing: the diagnostics of files as they are now and as they would be with ``contents``.

    ``contents`` maps paths relative to the root to their new text (None: the file would be deleted). Answer
    with a `tether.diagnostics.PreviewDiagnostics`: each affected file's whole set before and with the change
    (the same rounds a write waits for), the change's files you serve, and those you could not compare. Leave
    everything as it was: a language server gets the contents as unsaved documents, and is put back to the
    disk contents before you return. The core decides what would be introduced on a copy of the run's
    registry (`tether.staging`); None: you check none of these files.
    """


@hookspec(firstresult=True)
def tether_write_result(
    run: Run,
    tool: Tool,
    paths: Sequence[str],
    result: ToolResult,
    introduced: Sequence[Diagnostic],
    notes: Sequence[str],
) -> ToolResult | None:
    """Turn a file-writing tool's result into the result the model sees. Stops at the first non-None result.

    ``introduced`` holds the diagnostics this write introduced and that were not yet reported in this
    run, errors first (the run's `tether.diagnostics.DiagnosticRegistry` decided, from the answers to
    `tether_diagnostics_after_write`). ``notes`` are lines the diagnostics plugins want said (e.g.
    "diagnostics still pending"). The core's implementation (`tether.diagnostics`, ``trylast``)
    appends them to the result. A harness filters or replaces that with a ``wrapper=True``
    implementation (``result = yield``), or with a ``tryfirst`` implementation of its own.
    """


@hookspec(firstresult=True)
def tether_post_write(
    run: Run,
    tool: Tool,
    paths: Sequence[str],
    result: ToolResult,
    introduced: Sequence[Diagnostic],
    notes: Sequence[str],
) -> ToolResult | None:
    """Deprecated name of `tether_write_result`: while a plugin implements it, it is called instead (one release)."""


# -- run lifecycle --------------------------------------------------------------------------------


@hookspec
def tether_run_opened(run: Run) -> Awaitable[None] | None:
    """The run is open: its plugins are loaded and its tools registered. Not called for a listing only
    (`tether.list_tools`, `tether tools`), which opens the run for no work."""


@hookspec
def tether_run_closing(run: Run) -> Awaitable[None] | None:
    """The run is closing: stop what you started. Processes tracked by the run are killed after this anyway."""


@hookspec(firstresult=True)
def tether_envelope(run: Run, purpose: str, writable: Path | None) -> Envelope | None:
    """The envelope (a sandbox) exec tools start their processes in; stops at the first non-None result.

    ``purpose`` is "kernel" (eval), "debug" (adapters and programs) or "worker" (vibe). A harness
    answers with its own (its container, its VM); the core's answer, last, is the built-in bubblewrap
    envelope when the run option ``sandbox`` is on, else None: processes run on the host.

    ``writable``, when not None, is the folder the process is to write instead of the run's root (vibe's
    worker in its git worktree): the root is to be read-only to it. An envelope that confines writes so
    sets `Envelope.writable` to it; one that cannot (or an implementation without this argument) leaves
    it None, and the worker's answer says its writes are the envelope's to decide.
    """
