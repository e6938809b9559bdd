"""An envelope: the sandbox the conversation's processes run in (`tether.sandbox.Envelope`, shared by every exec family).

eval needs two things from it: whether it is up right now (it never boots one) and how to turn a
command line into one that runs inside it. The kernel talks to tether over ipc sockets in the run's
private directory (Deno over tcp: on 127.0.0.1 when the envelope shares the host's loopback, else
relayed); the envelope must share that directory and the paths of the root and the interpreter.

The family asks for it through the core's ``tether_envelope`` hook (purpose "kernel"), once per run
(`KernelFactory.envelope`). The family's own hook, ``tether_eval_envelope``, is deprecated: a plugin
that still implements it is answered through the core hook (`deprecated_envelope`), with a
DeprecationWarning, for one more minor version.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from tether.sandbox import Envelope

if TYPE_CHECKING:
    from tether.run import Run

__all__ = ["Envelope", "deprecated_envelope"]


def deprecated_envelope(run: Run) -> Envelope | None:
    """The answer of plugins that still implement ``tether_eval_envelope``, with a DeprecationWarning; None
    when none does (then the core hook's other implementations answer)."""
    caller = run.hook.tether_eval_envelope
    plugins = sorted({impl.plugin_name for impl in caller.get_hookimpls()})
    if not plugins:
        return None
    warnings.warn(
        f"plugin {', '.join(plugins)} implements tether_eval_envelope, which is deprecated: implement "
        "tether_envelope and answer for purpose 'kernel' (the old name works for one more minor version)",
        DeprecationWarning,
        stacklevel=2,
    )
    return caller(run=run)
