"""The eval family's resource hooks: the run's kernel factory, and the envelope kernels may run in.

A harness overrides either with ``@hookimpl(tryfirst=True)``. Answering `tether_eval_kernels` with
`tether.NO_RESOURCE` leaves the run without the `eval` tool (an answer of None falls through to the
family's default factory); `tether_eval_envelope` defaults to the run's envelope (the core's `tether_envelope`: a harness's, or the
built-in bubblewrap one when the run option `sandbox` is on); None runs kernels on the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.hookspecs import hookspec

if TYPE_CHECKING:
    from tether.run import Run

    from tether_eval.envelope import Envelope
    from tether_eval.kernels import KernelFactory


@hookspec(firstresult=True)
def tether_eval_kernels(run: Run) -> KernelFactory | None:
    """The run's kernel factory (cheap: no kernel starts until the first cell); `NO_RESOURCE` for no `eval` tool. Stops at the first non-None result."""


@hookspec(firstresult=True)
def tether_eval_envelope(run: Run) -> Envelope | None:
    """The conversation's envelope (a sandbox): how to start a process inside it and whether it is up.

    Kernels start inside it when it is up at the time a kernel starts; eval never boots it.

    Stops at the first non-None result.
    """
