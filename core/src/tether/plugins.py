"""Plugin discovery: entry points of group ``tether``, chosen or blocked before anything is imported.

Families are found exactly like third-party plugins. Two environment variables steer what loads:

- ``TETHER_PLUGINS``: a comma-separated list of entry-point names; only these load (empty: none).
- ``TETHER_BLOCK_PLUGINS``: a comma-separated list of entry-point names that are never imported.

A plugin that fails to import, or implements a hook that does not exist (a misspelling caught by
``check_pending``), is reported and left out; the others still load.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from importlib import metadata
from typing import Any

import attrs
import pluggy

from tether import hookspecs
from tether.tools import Tool

ENTRY_POINT_GROUP = "tether"
ENV_LOAD = "TETHER_PLUGINS"
ENV_BLOCK = "TETHER_BLOCK_PLUGINS"


@attrs.frozen
class Unavailable:
    """A family that is installed but offers nothing for this run, and why."""

    family: str
    reason: str


class Registrar:
    """The ``register`` callback handed to ``tether_register_tools``."""

    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}
        self.missing: list[Unavailable] = []

    def __call__(self, tool: Tool) -> None:
        if tool.name in self.tools:
            other = self.tools[tool.name].family or "another plugin"
            self.missing.append(Unavailable(tool.family, f"tool '{tool.name}' is already registered by {other}"))
            return
        self.tools[tool.name] = tool

    def unavailable(self, family: str, reason: str) -> None:
        self.missing.append(Unavailable(family, reason))


def _names(var: str) -> set[str] | None:
    value = os.environ.get(var)
    if value is None:
        return None
    return {n.strip() for n in value.split(",") if n.strip()}


@functools.cache
def discovered_entry_points() -> tuple[metadata.EntryPoint, ...]:
    """Entry points of the ``tether`` group, read once per process (reading metadata is not free)."""
    return tuple(sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name))


def plugin_manager(
    extra_plugins: Iterable[Any] = (),
    block: Iterable[str] = (),
    load_entry_points: bool = True,
) -> tuple[pluggy.PluginManager, list[Unavailable]]:
    """A plugin manager with the core's hooks, the entry-point plugins and ``extra_plugins`` registered."""
    from tether import builtin

    pm = pluggy.PluginManager("tether")
    pm.add_hookspecs(hookspecs)
    # historic: each plugin's tether_addhooks runs as it registers, so its resource hook spec exists
    pm.hook.tether_addhooks.call_historic(kwargs={"pluginmanager": pm})
    errors: list[Unavailable] = []
    blocked = set(block) | (_names(ENV_BLOCK) or set())
    only = _names(ENV_LOAD)
    for name in blocked:
        pm.set_blocked(name)
    pm.register(builtin, name="tether.builtin")
    if load_entry_points:
        for ep in discovered_entry_points():
            if ep.name in blocked or (only is not None and ep.name not in only):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not take the others down
                errors.append(Unavailable(ep.name, f"plugin failed to import: {type(exc).__name__}: {exc}"))
                continue
            try:
                pm.register(plugin, name=ep.name)
            except Exception as exc:  # noqa: BLE001
                errors.append(Unavailable(ep.name, f"plugin failed to register: {type(exc).__name__}: {exc}"))
    for plugin in extra_plugins:
        name = getattr(plugin, "__name__", None) or f"{type(plugin).__name__}-{id(plugin)}"
        if pm.is_blocked(name):
            continue
        pm.register(plugin, name=name)
    _drop_pending(pm, errors)
    return pm, errors


def _drop_pending(pm: pluggy.PluginManager, errors: list[Unavailable]) -> None:
    """Unregister plugins that implement unknown hooks (misspellings), naming the hook."""
    for _ in range(100):
        try:
            pm.check_pending()
            return
        except pluggy.PluginValidationError as exc:
            plugin = exc.plugin
            name = pm.get_name(plugin) or repr(plugin)
            unknown = [
                hook for hook in dir(pm.hook)
                if not hook.startswith("_")
                and not getattr(pm.hook, hook).has_spec()
                and any(impl.plugin is plugin for impl in getattr(pm.hook, hook).get_hookimpls())
            ]
            what = ", ".join(unknown) or str(exc)
            errors.append(Unavailable(name, f"plugin implements unknown hook(s) {what}; it was not loaded"))
            pm.unregister(plugin)
