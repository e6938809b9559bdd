"""Run options of the debug family: every wait on an adapter has a bound, configurable per run."""

from __future__ import annotations

import attrs
from tether import arg

DEFAULT_TTL = 30 * 60.0


@attrs.frozen
class DebugOptions:
    debug_stop_timeout: float = arg(
        "seconds launch, continue, step and pause wait for the next stop", default=30.0, minimum=0
    )
    debug_launch_timeout: float = arg(
        "seconds for a launch or attach as a whole: the Go build, the adapter's start and its configuration together",
        default=60.0,
        minimum=0,
    )
    debug_request_timeout: float = arg("seconds one request to the adapter may take", default=10.0, minimum=0)
    debug_ttl: float = arg("seconds a debug session may live", default=DEFAULT_TTL, minimum=0)
    debug_attach_wait: float = arg(
        "seconds attach waits for a breakpoint before saying the program runs", default=2.0, minimum=0
    )
