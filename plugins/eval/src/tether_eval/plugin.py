"""Hooks of the eval family: its resource hooks, their defaults, and the registration of `eval`.

Nothing heavy is imported here (jupyter_client, zmq, ipykernel load when the first kernel starts):
`tether tools` must stay fast with every family installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether import hookimpl

from tether_eval import hookspecs
from tether_eval.options import DEPRECATED, EvalOptions

if TYPE_CHECKING:
    import pluggy
    from tether.options import OptionRegistry
    from tether.plugins import Registrar
    from tether.run import Run
    from tether.sandbox import Envelope

    from tether_eval.kernels import KernelFactory


@hookimpl
def tether_addoptions(register: OptionRegistry) -> None:
    register(EvalOptions, deprecated=DEPRECATED)


@hookimpl
def tether_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def tether_eval_kernels(run: Run) -> KernelFactory | None:
    if not run.options.of(EvalOptions).eval_enabled:
        return None  # the harness turned kernels off for this run
    from tether_eval.kernels import KernelFactory

    return KernelFactory(run)


@hookimpl(tryfirst=True)
def tether_envelope(run: Run, purpose: str) -> Envelope | None:
    """Kernels' envelope from a plugin that still implements the deprecated `tether_eval_envelope` (it
    answered before every other envelope for kernels, so it comes first); None: the core hook goes on."""
    if purpose != "kernel":
        return None
    from tether_eval.envelope import deprecated_envelope

    return deprecated_envelope(run)


@hookimpl
def tether_register_tools(run: Run, register: Registrar) -> None:
    factory = run.resource(hookspecs.tether_eval_kernels)
    if factory is None:
        register.unavailable(
            "kernels are turned off for this run (run option eval_enabled=false or no kernel factory from the harness)"
        )
        return
    from tether_eval.tools import make_tools

    for tool in make_tools(factory):
        register(tool)
