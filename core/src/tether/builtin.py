"""The core's own hook implementations, registered like any plugin (and blockable the same way)."""

from __future__ import annotations

from tether.diagnostics import tether_post_write, tether_write_result  # noqa: F401 - what a write reports
from tether.hookspecs import hookimpl
from tether.options import CoreOptions


@hookimpl
def tether_addoptions(register) -> None:
    register(CoreOptions)
