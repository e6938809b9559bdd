"""The core's own hook implementations, registered like any plugin (and blockable the same way)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.diagnostics import tether_post_write, tether_write_result  # noqa: F401 - what a write reports
from tether.hookspecs import hookimpl
from tether.options import CoreOptions
from tether.sandbox import Envelope, SandboxOptions, builtin_envelope
from tether.staging import tether_register_tools  # noqa: F401 - resolve, when a tool of the run can stage

if TYPE_CHECKING:
    from pathlib import Path

    from tether.run import Run


@hookimpl
def tether_addoptions(register) -> None:
    register(CoreOptions)
    register(SandboxOptions)


@hookimpl(trylast=True)
def tether_envelope(run: Run, purpose: str, writable: Path | None) -> Envelope | None:
    return builtin_envelope(run, purpose, writable)
