"""The command roster's configuration: the family's run options, turned into worker commands.

The options are declared in `tether_vibe.options`. The project says which command runs each tier
(``vibe_fast``, ``vibe_good``: a command line split as a shell splits words, never run through a shell,
or a list of arguments) and how many workers may run at once (``vibe_max_workers``), usually as
``[tool.tether.vibe]`` in the root's pyproject.toml (``fast = "..."``); the harness's run options
override it key by key, as the core layers every family's options (`tether.options`).
``vibe_kill_grace``, ``vibe_result_chars``, ``vibe_log_chars`` and ``vibe_wait_timeout`` (the default
of vibe_wait) say how the roster behaves.
"""

from __future__ import annotations

import shlex

import attrs

from tether_vibe.options import DEFAULT_WAIT, VibeOptions
from tether_vibe.roster import TIERS


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
    isolation: str = "auto"  # auto, worktree or none
    stall_seconds: float = 300.0


def _command(value: str | list[str], tier: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise ConfigError(
                f"vibe_{tier} = {value!r} cannot be split into words ({exc}); fix its quoting"
            ) from None
    else:
        argv = list(value)
    if not argv or not argv[0]:
        raise ConfigError(f"vibe_{tier} is empty; give the command that runs a {tier} worker")
    return tuple(argv)


def load_config(options: VibeOptions) -> VibeConfig:
    """The roster's configuration (raises ConfigError naming the bad option)."""
    commands = {}
    for tier in TIERS:
        value = getattr(options, f"vibe_{tier}")
        if value is not None:
            commands[tier] = _command(value, tier)
    return VibeConfig(
        commands=commands,
        max_workers=options.vibe_max_workers,
        kill_grace=options.vibe_kill_grace,
        result_chars=options.vibe_result_chars,
        log_chars=options.vibe_log_chars,
        wait_timeout=options.vibe_wait_timeout,
        isolation=options.vibe_isolation,
        stall_seconds=options.vibe_stall_seconds,
    )
