"""The eval family's resource hooks: the run's kernel factory, and (deprecated) the envelope kernels may run in.

A harness overrides the factory with ``@hookimpl(tryfirst=True)``. Answering `tether_eval_kernels` with
`tether.NO_RESOURCE` leaves the run without the `eval` tool (an answer of None falls through to the
family's default factory). Kernels run in the run's envelope, the core's `tether_envelope` with purpose
"kernel" (a harness's, or the built-in bubblewrap one when the run option `sandbox` is on); None runs
them on the host. `tether_eval_envelope` is the older name of that answer, still heard for one minor
version, with a DeprecationWarning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.hookspecs import hookspec

if TYPE_CHECKING:
    from tether.run import Run
    from tether.sandbox import Envelope

    from tether_eval.kernels import KernelFactory


@hookspec(firstresult=True)
def tether_eval_kernels(run: Run) -> KernelFactory | None:
    """The run's kernel factory (cheap: no kernel starts until the first cell); `NO_RESOURCE` for no `eval` tool. Stops at the first non-None result."""


@hookspec(firstresult=True)
def tether_eval_envelope(run: Run) -> Envelope | None:
    """Deprecated: implement the core's `tether_envelope` and answer for purpose "kernel".

    Still heard for one minor version, with a DeprecationWarning: the first non-None answer is the
    envelope kernels start in (when it is up at the time a kernel starts; eval never boots it).
    """
