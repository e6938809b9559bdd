"""Plugin discovery: entry points of group ``tether``, chosen or blocked before anything is imported.

Families are found exactly like third-party plugins. Two environment variables steer what loads:

- ``TETHER_PLUGINS``: a comma-separated list of entry-point names; only these load (empty: none).
- ``TETHER_BLOCK_PLUGINS``: a comma-separated list of entry-point names that are never imported.

A plugin that fails to import, or implements a hook that does not exist (a misspelling caught by
``check_pending``), is reported and left out; the others still load.

Reading the entry points means importing `importlib.metadata` (email, zipfile, csv, ...) and reading
every installed distribution's metadata: about a tenth of a cold `tether tools`. The answer depends
only on the distributions on ``sys.path``, so it is remembered in the user's cache directory
(``$XDG_CACHE_HOME/tether``, else ``~/.cache/tether``) together with what it was read from: each
``sys.path`` entry (a folder by the names of the distributions in it, a zip file or a missing entry by
its own stat), each distribution folder in it and its ``entry_points.txt`` (modification and change
time, size, inode): a file added to a project that `python -m` puts first on ``sys.path`` changes
none of these. A process that finds all of these unchanged uses the remembered answer; any
change (a package installed, removed or upgraded, an ``entry_points.txt`` edited, even one dated back)
reads the metadata again. As git does for its index, nothing is remembered while one of them changed
in the last two seconds (a change within the same clock tick would not show). A cache that cannot be
read or written is no cache: the metadata is read. There is no cache when ``TETHER_NO_PLUGIN_CACHE``
is set, when the home folder is not an absolute path, or when the cache directory (a relative
``XDG_CACHE_HOME`` is ignored, as the XDG spec says) does not exist or belongs to another user (as
under ``sudo`` with ``HOME`` kept: nothing root-owned is made in a user's cache).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import logging
import os
import stat
import sys
import time
from collections.abc import Iterable
from importlib.machinery import PathFinder
from pathlib import Path
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
ENV_NO_CACHE = "TETHER_NO_PLUGIN_CACHE"  # set (to anything but empty): the entry points are always read
QUIET_NS = 2_000_000_000  # what changed more recently than this is not remembered by its modification time
CACHE_FILES = 16  # the most recently written answers kept (one per interpreter and sys.path)
STALE_TMP_S = 60  # a half-written answer this old is a killed writer's: removed by the next writer
DIST_FOLDERS = (".dist-info", ".egg-info")  # and an egg's EGG-INFO: where importlib.metadata finds them

log = logging.getLogger("tether")


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

    def unavailable(self, reason: str) -> None:
        """This family offers nothing in this run, and why (the reason a model or a user reads)."""
        self.missing.append(Unavailable(self.family, reason))


def _names(var: str) -> set[str] | None:
    value = os.environ.get(var)
    if value is None:
        return None
    return {n.strip() for n in value.split(",") if n.strip()}


@attrs.frozen
class EntryPoint:
    """An installed plugin: its entry-point name, and the module (and attribute) it names."""

    name: str
    module: str
    attr: str | None = None

    def load(self) -> Any:
        plugin = importlib.import_module(self.module)
        return functools.reduce(getattr, self.attr.split(".") if self.attr else [], plugin)


@functools.cache
def discovered_entry_points() -> tuple[EntryPoint, ...]:
    """Entry points of the ``tether`` group, read once per process, remembered across processes."""
    cache = _cache_file()
    fingerprint = _fingerprint() if cache is not None else []
    remembered = _remembered(cache, fingerprint)
    if remembered is not None:
        return remembered
    from importlib import metadata

    found = tuple(
        sorted(
            (
                EntryPoint(ep.name, ep.module, ep.attr)
                for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)
            ),
            key=lambda ep: ep.name,
        )
    )
    _remember(cache, fingerprint, found)
    return found


def _cache_file() -> Path | None:
    if os.environ.get(ENV_NO_CACHE):
        return None
    if any(f is not PathFinder and hasattr(f, "find_distributions") for f in sys.meta_path):
        return None  # a finder of its own may offer distributions that no folder on sys.path shows
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, empty or relative: the XDG spec says to ignore it
        home = os.path.expanduser("~")  # "~" itself when there is no HOME and no passwd entry
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    try:
        st = os.stat(base)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return None  # not made here: under sudo with HOME kept it would belong to root
    import zlib  # loaded at start already; hashlib would load OpenSSL (the fingerprint, not the key, is checked)

    named = json.dumps([sys.executable, sys.path]).encode()
    key = f"{zlib.crc32(named):08x}{zlib.adler32(named):08x}"
    return Path(base) / "tether" / f"entry-points-{key}.json"


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    # the change time too: a rewrite of the same size dated back keeps the modification time
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino]


def _fingerprint() -> list[Any]:
    """What the entry points are read from: every sys.path entry, and each distribution folder in it."""
    out: list[Any] = []
    for entry in sys.path:
        folder = entry or "."  # as importlib.metadata reads it: a deleted working folder holds nothing
        try:
            with os.scandir(folder) as it:
                dists = sorted(
                    e.name for e in it if e.name.lower().endswith(DIST_FOLDERS) or e.name == "EGG-INFO"
                )
        except OSError:  # missing, or a zip file: its own stat says when it changed
            out.append([entry, _stat(folder)])
            continue
        # a folder is known by the distributions listed in it, not by its own stat: `python -m` puts the
        # working folder (a project whose files change all the time) first on sys.path
        out.append([entry])
        for name in dists:
            dist = os.path.join(folder, name)
            out.append([name, _stat(dist), _stat(os.path.join(dist, "entry_points.txt"))])
    return out


def _newest_change(fingerprint: list[Any]) -> int:
    """The latest modification or change time (ns) in ``fingerprint``; 0 when it holds none."""
    return max((max(st[0], st[1]) for item in fingerprint for st in item[1:] if st is not None), default=0)


def _remembered(cache: Path | None, fingerprint: list[Any]) -> tuple[EntryPoint, ...] | None:
    if cache is None:
        return None
    try:
        saved = json.loads(cache.read_text(encoding="utf-8"))
        if saved["fingerprint"] != fingerprint:
            return None
        return tuple(EntryPoint(name, module, attr) for name, module, attr in saved["entry_points"])
    except (OSError, ValueError, KeyError, TypeError):  # none yet, or unreadable: read the metadata
        return None


def _remember(cache: Path | None, fingerprint: list[Any], found: tuple[EntryPoint, ...]) -> None:
    if cache is None or _newest_change(fingerprint) > time.time_ns() - QUIET_NS:
        return
    saved = {"fingerprint": fingerprint, "entry_points": [[ep.name, ep.module, ep.attr] for ep in found]}
    partial = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
    try:
        cache.parent.mkdir(exist_ok=True, mode=0o700)
        partial.write_text(json.dumps(saved), encoding="utf-8")
        os.replace(partial, cache)
        for old in sorted(cache.parent.glob("entry-points-*.json"), key=_mtime, reverse=True)[CACHE_FILES:]:
            old.unlink(missing_ok=True)
        for old in cache.parent.glob("entry-points-*.json.*.tmp"):
            if _mtime(old) < time.time() - STALE_TMP_S:  # a writer killed before its os.replace
                old.unlink(missing_ok=True)
    except OSError:
        log.debug("could not remember the entry points in %s", cache, exc_info=True)
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)  # a full disk must not leave half a file behind


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


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
