"""Run options of the eval family."""

from __future__ import annotations

import attrs
from tether import arg


@attrs.frozen
class EvalOptions:
    eval_enabled: bool = arg("whether the run offers kernels at all", default=True)
    eval_timeout: float = arg(
        "inactivity budget of a cell in seconds (output that changes what it shows resets it)",
        default=300.0,
        minimum=0,
    )
    eval_total_timeout: float = arg(
        "total budget of a cell in seconds, output or not (open tool() calls not counted)",
        default=3600.0,
        minimum=0,
    )
    eval_start_timeout: float = arg("seconds a kernel may take from start to ready", default=60.0, minimum=0)
    eval_interrupt_grace: float = arg(
        "seconds a cell may take to stop after an interrupt", default=5.0, minimum=0
    )
    eval_drain: float = arg(
        "Deno: quiet seconds after a cell before it is complete (output of timers it set)",
        default=0.0,
        minimum=0,
    )
    eval_max_output_chars: int = arg("characters of stdout/stderr kept per cell", default=20_000, minimum=100)


DEPRECATED = {"eval": "eval_enabled"}
