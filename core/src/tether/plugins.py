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
from tether.hookspecs import CORE_PLUGIN
from tether.options import OptionRegistry
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
    """The ``register`` callback handed to ``tether_register_tools``, one plugin at a time.

    ``family`` is the plugin being asked (its entry-point name): a tool registered without a family
    gets it, and ``register.unavailable(reason)`` says why that family offers nothing in this run.
    """

    def __init__(self) -> None:
        self.tools: dict[str, Tool] = {}
        self.missing: list[Unavailable] = []
        self.family = ""

    def __call__(self, tool: Tool) -> None:
        if not tool.family and self.family:
            tool = attrs.evolve(tool, family=self.family)
        if tool.name in self.tools:
            other = self.tools[tool.name].family or "another plugin"
            self.missing.append(
                Unavailable(tool.family, f"tool '{tool.name}' is already registered by {other}")
            )
            return
        self.tools[tool.name] = tool

    def unavailable(self, *family_and_reason: str) -> None:
        """``unavailable(reason)``: this family offers nothing in this run, and why.

        The older ``unavailable(family, reason)`` still works.
        """
        if len(family_and_reason) == 1:
            (reason,) = family_and_reason
            family = self.family
        else:
            family, reason = family_and_reason
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


@attrs.define
class Loaded:
    """What `plugin_manager` set up for one run."""

    pm: pluggy.PluginManager
    errors: list[Unavailable]
    options: OptionRegistry
    not_loaded: set[str]  # entry-point names installed but not loaded (blocked, left out, broken)


def plugin_manager(
    extra_plugins: Iterable[Any] = (),
    block: Iterable[str] = (),
    load_entry_points: bool = True,
) -> Loaded:
    """A plugin manager with the core's hooks, the entry-point plugins and ``extra_plugins`` registered."""
    from tether import builtin

    pm = pluggy.PluginManager("tether")
    pm.add_hookspecs(hookspecs)
    options = OptionRegistry()
    # historic: each plugin's tether_addhooks and tether_addoptions run as it registers, so its
    # resource hook spec exists and its options are declared under its name
    pm.hook.tether_addhooks.call_historic(kwargs={"pluginmanager": pm})
    pm.hook.tether_addoptions.call_historic(kwargs={"register": options})
    errors: list[Unavailable] = []
    not_loaded: set[str] = set()
    blocked = set(block) | (_names(ENV_BLOCK) or set())
    only = _names(ENV_LOAD)
    for name in blocked:
        pm.set_blocked(name)

    def register(plugin: Any, name: str, family: str | None = None) -> None:
        options.family = family or name
        try:
            pm.register(plugin, name=name)
        finally:
            options.family = "core"

    register(builtin, CORE_PLUGIN, "core")
    for ep in discovered_entry_points():
        if not load_entry_points or ep.name in blocked or (only is not None and ep.name not in only):
            not_loaded.add(ep.name)
            continue
        try:
            plugin = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not take the others down
            errors.append(Unavailable(ep.name, f"plugin failed to import: {type(exc).__name__}: {exc}"))
            not_loaded.add(ep.name)
            continue
        try:
            register(plugin, ep.name)
        except Exception as exc:  # noqa: BLE001
            errors.append(Unavailable(ep.name, f"plugin failed to register: {type(exc).__name__}: {exc}"))
            not_loaded.add(ep.name)
    by_module = {ep.module: ep.name for ep in discovered_entry_points()}
    for plugin in extra_plugins:
        module = getattr(plugin, "__name__", None)
        # a family's entry-point module passed by hand keeps its family name
        name = by_module.get(module or "") or module or f"{type(plugin).__name__}-{id(plugin)}"
        if pm.is_blocked(name):
            continue
        register(plugin, name)
    _drop_pending(pm, errors)
    _warn_deprecated(pm)
    return Loaded(pm, errors, options, not_loaded)


def _warn_deprecated(pm: pluggy.PluginManager) -> None:
    import warnings

    for old, new in hookspecs.DEPRECATED_HOOKS.items():
        for impl in getattr(pm.hook, old).get_hookimpls():
            if impl.plugin_name != CORE_PLUGIN:
                warnings.warn(
                    f"plugin {impl.plugin_name} implements {old}, which is deprecated: implement {new} "
                    "(the old name works for one more release)",
                    DeprecationWarning,
                    stacklevel=4,
                )


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
                hook
                for hook in dir(pm.hook)
                if not hook.startswith("_")
                and not getattr(pm.hook, hook).has_spec()
                and any(impl.plugin is plugin for impl in getattr(pm.hook, hook).get_hookimpls())
            ]
            what = ", ".join(unknown) or str(exc)
            errors.append(Unavailable(name, f"plugin implements unknown hook(s) {what}; it was not loaded"))
            pm.unregister(plugin)
