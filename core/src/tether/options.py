"""Run options: declared by each plugin, structured once when the run opens, strict like tool arguments.

A plugin declares its options as an attrs class built with `tether.arg` (type, default, help,
limits) and registers it through the historic hook ``tether_addoptions(register)``::

    @attrs.frozen
    class GreeterOptions:
        greeter_times: int = arg("how often to greet", default=1, minimum=1)

    @hookimpl
    def tether_addoptions(register):
        register(GreeterOptions)

and reads them typed: ``run.options.of(GreeterOptions).greeter_times`` (``run.options`` is also a
read-only mapping of every declared option's value, defaults filled in).

Naming: a family's option is ``<family>_<name>``; the core's own have no prefix.

Sources, later over earlier: ``[tool.tether]`` in the root's ``pyproject.toml``, then the run's
``options`` (the harness's, or the command line's ``--option KEY=VALUE``). In either, a table named
after a family sets that family's options without the prefix (``[tool.tether.vibe]`` with ``fast =
"..."`` is ``vibe_fast``), key by key over the earlier source. Options a project must not decide for
itself (``trust``) are refused from ``pyproject.toml``.

An option may also declare an environment variable (``arg(..., env="TETHER_ASK_USER_TIMEOUT")``), for
runs whose command line is not yours to change (a `tether serve` an MCP client starts). It is read
here, once, when the run opens, and only where neither source gives the option a value (or one gives
null): the run's options, then ``pyproject.toml``, then the environment, then the default. Its value
is checked like any other, a bad one named by the variable.

An unknown key is an error with "did you mean", a bad value one line naming the option, raised as
`OptionsError` by `open_run` (and exit 2 from `tether tools|call|serve`), never at the first call.
One exception: a key of a family that is installed but not loaded in this run (blocked, or left out by
``TETHER_PLUGINS``) is ignored, so one configuration serves runs with fewer families.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs

from tether.args import (
    ENV_META,
    NOTHING,
    ArgumentsError,
    _describe,
    _is_optional,
    arg,
    schema_for,
    structure_arguments,
)
from tether.output import DEFAULT_MAX_CHARS

log = logging.getLogger("tether")

T = TypeVar("T")

PROJECT_FILE = "pyproject.toml"
FROM_PROJECT = f" (from [tool.tether] in {PROJECT_FILE})"
NOT_FROM_PROJECT = frozenset(
    {  # a checkout must not decide these for itself (nor loosen its own sandbox)
        "trust",
        "sandbox",
        "sandbox_network",
        "sandbox_worker_network",
        "sandbox_deny",
        "sandbox_sockets",
        "sandbox_hide_env",
        "sandbox_pass_env",
    }
)


class OptionsError(ValueError):
    """The run's options cannot be used; ``problems`` holds one line each, naming the option."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@attrs.frozen
class Declared:
    """One option as a plugin declared it."""

    name: str
    family: str
    cls: type
    field: Any  # attrs.Attribute
    deprecated_for: str | None = None  # an old name kept working: the option it now sets

    def listing(self) -> dict[str, Any]:
        prop = schema_for(self.cls)["properties"][self.name]
        default = self.field.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory()
        entry = {
            "name": self.name,
            "family": self.family,
            "type": _type_name(prop) + (" or null" if _is_optional(self.field.type)[0] else ""),
            "default": default if default is not NOTHING else None,
            "help": prop.get("description", ""),
        }
        limits = {
            k: prop[k]
            for k in ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "enum")
            if k in prop
        }
        if limits:
            entry["limits"] = limits
        return entry


def _type_name(prop: dict[str, Any]) -> str:
    if "anyOf" in prop:
        return " or ".join(_type_name(p) for p in prop["anyOf"])
    kind = prop.get("type")
    if kind == "array":
        return f"array of {_type_name(prop.get('items', {}))}"
    return kind or "any"


@attrs.frozen
class CoreOptions:
    """The core's own run options."""

    max_output_chars: int = arg(
        "the most characters of text one result may carry; longer text is cut, saying how to see more",
        default=DEFAULT_MAX_CHARS,
        minimum=200,
    )
    diagnostics_timeout: float = arg(
        "seconds a write waits at most for the diagnostics it introduced before answering without them "
        "(a language server's wait ends when its round of analysis does)",
        default=30.0,
        minimum=0,
    )
    trust: bool | None = arg(
        "whether the run trusts its root to run its code: the project's own binaries (node_modules/.bin, "
        ".venv) and checkers that execute it (cargo check). Default (null): trusted on a surface that "
        "offers exec tools, untrusted on read-only surfaces such as plan and readonly",
        default=None,
    )


class OptionRegistry:
    """The ``register`` handed to ``tether_addoptions``: ``register(OptionsClass, deprecated={old: new})``.

    The family of what is registered is the plugin being registered (the core sets it around each
    plugin's registration, which is when a historic hook runs for that plugin).
    """

    def __init__(self) -> None:
        self.family = "core"
        self.declared: dict[str, Declared] = {}
        self.classes: dict[type, str] = {}
        self.aliases: dict[str, str] = {}

    def __call__(self, cls: type, *, deprecated: Mapping[str, str] | None = None) -> None:
        if not attrs.has(cls):
            raise TypeError(f"tether_addoptions registers attrs classes, not {cls!r}")
        attrs.resolve_types(cls)
        for f in attrs.fields(cls):
            if f.name in self.declared and self.declared[f.name].cls is not cls:
                raise ValueError(
                    f"run option '{f.name}' is declared twice ({self.declared[f.name].family} and {self.family})"
                )
            if f.default is NOTHING:
                raise ValueError(f"run option '{f.name}' of {self.family} needs a default")
            self.declared[f.name] = Declared(f.name, self.family, cls, f)
        self.classes[cls] = self.family
        for old, new in (deprecated or {}).items():
            self.aliases[old] = new

    def listing(self) -> list[dict[str, Any]]:
        return [self.declared[n].listing() for n in sorted(self.declared)]

    # -- structuring ---------------------------------------------------------------------------

    def structure(self, given: Mapping[str, Any] | None, root: Path, not_loaded: set[str]) -> Options:
        """The run's options from the project file and ``given``, or OptionsError."""
        problems: list[str] = []
        merged: dict[str, Any] = {}
        sources: dict[str, str] = {}
        project = _project_table(root, problems)
        self._layer(merged, sources, project, FROM_PROJECT, not_loaded, problems)
        self._layer(merged, sources, dict(given or {}), "", not_loaded, problems)
        self._environment(merged, sources, problems)
        values: dict[str, Any] = {}
        instances: dict[type, Any] = {}
        for cls in self.classes:
            names = {f.name for f in attrs.fields(cls)}
            raw = {k: v for k, v in merged.items() if k in names}
            if not raw:
                instance = cls()  # the defaults: no structuring (cattrs stays out of a plain start-up)
            else:
                try:
                    instance = structure_arguments(cls, raw)
                except ArgumentsError as exc:
                    for problem in exc.problems:
                        name, _, rest = problem.partition(": ")
                        where = sources.get(name.split("[")[0].split(".")[0], "")
                        problems.append(f"run option {name}{where}: {rest}")
                    continue
            instances[cls] = instance
            values.update(attrs.asdict(instance, recurse=False))
        if problems:
            raise OptionsError(problems)
        return Options(values, instances)

    def _layer(
        self,
        merged: dict[str, Any],
        sources: dict[str, str],
        source: Mapping[str, Any],
        where: str,
        not_loaded: set[str],
        problems: list[str],
    ) -> None:
        for key, value in source.items():
            key = str(key)
            if (
                isinstance(value, Mapping)
                and key not in self.declared
                and any(n.startswith(key + "_") for n in self.declared)
            ):
                # a family's table: its options without the prefix
                self._layer(
                    merged, sources, {f"{key}_{k}": v for k, v in value.items()}, where, not_loaded, problems
                )
                continue
            if key in self.aliases and key not in self.declared:
                new = self.aliases[key]
                warnings.warn(
                    f"run option '{key}' is deprecated; use '{new}'", DeprecationWarning, stacklevel=4
                )
                key = new
            if key not in self.declared:
                family = next((f for f in not_loaded if key == f or key.startswith(f + "_")), None)
                if family is not None and not any(n.startswith(family + "_") for n in self.declared):
                    log.info("run option %s ignored: plugin %s is not loaded in this run", key, family)
                    continue
                problems.append(self._unknown(key, where))
                continue
            if where == FROM_PROJECT and key in NOT_FROM_PROJECT:
                problems.append(
                    f"run option {key}{where}: the project cannot decide it for itself; "
                    "set it from the harness or the command line"
                )
                continue
            merged[key] = value
            sources[key] = where

    def _environment(self, merged: dict[str, Any], sources: dict[str, str], problems: list[str]) -> None:
        """The declared environment variables, for the options no other source set (or set to null)."""
        for name, declared in self.declared.items():
            env = declared.field.metadata.get(ENV_META)
            if env is None or merged.get(name) is not None:
                continue
            variable, parse = env
            text = os.environ.get(variable, "").strip()
            if not text:  # unset or empty: the option's default
                continue
            where = f" (from ${variable})"
            try:
                merged[name] = parse(text)
            except ValueError as exc:
                problems.append(f"run option {name}{where}: {exc}")
                continue
            sources[name] = where

    def _unknown(self, key: str, where: str) -> str:
        import difflib  # only on a mistake

        names = sorted(self.declared)
        close = difflib.get_close_matches(key, names, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return f"unknown run option '{key}'{where}{hint}; `tether tools --json` lists every option"


def _project_table(root: Path, problems: list[str]) -> Mapping[str, Any]:
    path = root / PROJECT_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    if "tool.tether" not in text and "[tool]" not in text:  # the common case, without parsing TOML
        return {}
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        problems.append(f"{PROJECT_FILE} is not valid TOML ({exc}); fix it or remove its [tool.tether] table")
        return {}
    table = data.get("tool", {}).get("tether", {})
    if not isinstance(table, dict):
        problems.append(f"tool.tether in {PROJECT_FILE} must be a table, got {_describe(table)}")
        return {}
    return table


class Options:
    """The run's options, read typed and only so: ``run.options.of(LspOptions).lsp_servers``.

    Each plugin's options are an instance of the attrs class it registered (defaults filled in,
    read-only); there is no reading by name, so a renamed or removed option fails the type check and the
    lint gate instead of a run.
    """

    def __init__(self, values: dict[str, Any], instances: dict[type, Any]) -> None:
        self._values = values
        self._instances = instances

    def of(self, cls: type[T]) -> T:
        """The instance of a registered options class, typed: ``run.options.of(LspOptions).lsp_servers``."""
        try:
            return self._instances[cls]
        except KeyError:
            raise LookupError(f"{cls.__qualname__} is not registered through tether_addoptions") from None

    def __repr__(self) -> str:
        return f"Options({self._values!r})"
