"""The command roster's configuration: the family's run options, turned into worker commands.

The options are declared in `tether_vibe.options`, where each one's default is. The project says
which command runs each tier (``vibe_fast``, ``vibe_good``: a command line split as a shell splits
words, never run through a shell, or a list of arguments) and how many workers may run at once
(``vibe_max_workers``), usually as ``[tool.tether.vibe]`` in the root's pyproject.toml
(``fast = "..."``); the harness's run options override it key by key, as the core layers every
family's options (`tether.options`). ``vibe_kill_grace``, ``vibe_result_chars``, ``vibe_log_chars``
and ``vibe_wait_timeout`` (the default of vibe_wait) say how the roster behaves; the roster reads
them from the options themselves.
"""

from __future__ import annotations

import shlex

from tether_vibe.options import VibeOptions


class ConfigError(ValueError):
    """The configuration cannot be used; the message names where and how to fix it."""


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


def worker_commands(options: VibeOptions) -> dict[str, tuple[str, ...]]:
    """The argv of each configured tier, by tier (raises ConfigError naming the bad option)."""
    commands = {}
    for tier, value in (("fast", options.vibe_fast), ("good", options.vibe_good)):  # roster.TIERS
        if value is not None:
            commands[tier] = _command(value, tier)
    return commands
