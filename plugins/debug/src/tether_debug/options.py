"""Run options of the debug family: every wait on an adapter has a bound, configurable per run.

`debug_stop_timeout` (30 s): how long launch/continue/step/pause wait for the next stop;
`debug_launch_timeout` (60 s): starting the adapter and configuring the launch (delve builds first);
`debug_request_timeout` (10 s): one request to the adapter; `debug_ttl` (30 min): a session's lifetime;
`debug_attach_wait` (2 s): how long attach waits for a breakpoint before saying the program runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tether.run import Run

DEFAULT_TTL = 30 * 60.0


def opt(run: Run, name: str, default: float) -> float:
    try:
        return float(run.options.get(name, default))
    except (TypeError, ValueError):
        return default


def stop_timeout(run: Run) -> float:
    return opt(run, "debug_stop_timeout", 30.0)


def launch_timeout(run: Run) -> float:
    return opt(run, "debug_launch_timeout", 60.0)


def request_timeout(run: Run) -> float:
    return opt(run, "debug_request_timeout", 10.0)


def ttl(run: Run) -> float:
    return opt(run, "debug_ttl", DEFAULT_TTL)


def attach_wait(run: Run) -> float:
    return opt(run, "debug_attach_wait", 2.0)
