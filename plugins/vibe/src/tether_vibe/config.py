"""The command roster's configuration: `[tool.tether.vibe]` in the root's pyproject.toml, then run options.

The project says which command runs each tier (``fast``, ``good``: a command line split as a shell
splits words, never run through a shell, or a list of arguments) and how many workers may run at once
(``max_workers``). The run's options (``options["vibe"]``, a dict with the same keys) override the
project key by key, and may also set how the roster behaves for this harness: ``kill_grace``,
``result_chars``, ``log_chars`` and ``wait_timeout`` (the default of vibe_wait).
"""

from __future__ import annotations

import shlex
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from tether_vibe.roster import TIERS

PROJECT_KEYS = (*TIERS, "max_workers")
OPTION_KEYS = (*PROJECT_KEYS, "kill_grace", "result_chars", "log_chars", "wait_timeout")
DEFAULT_WAIT = 300.0


class ConfigError(ValueError):
    """The configuration cannot be used; the message names where and how to fix it."""


@attrs.frozen
class VibeConfig:
    commands: dict[str, tuple[str, ...]] = attrs.field(factory=dict)  # tier -> argv
    max_workers: int = 4
    kill_grace: float = 2.0  # SIGTERM -> SIGKILL for a worker's process tree
    result_chars: int = 4_000  # the tail of stdout kept as the result
    log_chars: int = 20_000  # the tail of stderr kept as the log
    wait_timeout: float = DEFAULT_WAIT


def _command(value: Any, where: str, tier: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise ConfigError(
                f"{where} {tier} = {value!r} cannot be split into words ({exc}); fix its quoting"
            ) from None
    elif isinstance(value, list) and all(isinstance(a, str) for a in value):
        argv = list(value)
    else:
        raise ConfigError(f"{where} {tier} must be a command line string or a list of strings, got {value!r}")
    if not argv or not argv[0]:
        raise ConfigError(f"{where} {tier} is empty; give the command that runs a {tier} worker")
    return tuple(argv)


def _number(value: Any, where: str, key: str, kind: type, minimum: float) -> Any:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (kind is int and not float(value).is_integer())
    ):
        raise ConfigError(
            f"{where} {key} must be a{'n integer' if kind is int else ' number'}, got {value!r}"
        )
    if value < minimum:
        raise ConfigError(f"{where} {key} must be at least {minimum}, got {value!r}")
    return kind(value)


def _merge(settings: dict[str, Any], table: Mapping[str, Any], where: str, allowed: tuple[str, ...]) -> None:
    for key, value in table.items():
        if key not in allowed:
            raise ConfigError(f"unknown key '{key}' in {where}; allowed: {', '.join(allowed)}")
        if key in TIERS:
            settings.setdefault("commands", {})[key] = _command(value, where, key)
        elif key in ("max_workers", "result_chars", "log_chars"):
            settings[key] = _number(value, where, key, int, 1)
        else:
            settings[key] = _number(value, where, key, float, 0)


def load_config(root: Path, options: Any) -> VibeConfig:
    """The merged configuration (raises ConfigError naming the bad key and where it is)."""
    settings: dict[str, Any] = {}
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"pyproject.toml is not valid TOML ({exc}); fix it to configure vibe workers"
            ) from None
        table = data.get("tool", {}).get("tether", {}).get("vibe")
        if table is not None:
            if not isinstance(table, dict):
                raise ConfigError("tool.tether.vibe in pyproject.toml must be a table")
            _merge(settings, table, "[tool.tether.vibe] in pyproject.toml:", PROJECT_KEYS)
    if options is not None:
        if not isinstance(options, Mapping):
            raise ConfigError(f"the run option 'vibe' must be a dict, got {type(options).__name__}")
        _merge(settings, options, "the run option 'vibe':", OPTION_KEYS)  # key by key over the project's
    return VibeConfig(**settings)
