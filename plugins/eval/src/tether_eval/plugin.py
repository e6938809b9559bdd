"""Hooks of the eval family: its resource hooks, their defaults, and the registration of `eval`.

Nothing heavy is imported here (jupyter_client, zmq, ipykernel load when the first kernel starts):
`tether tools` must stay fast with every family installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether import hookimpl

from tether_eval import hookspecs
from tether_eval.options import DEPRECATED, EvalOptions

if TYPE_CHECKING:
    from tether.plugins import Registrar
    from tether.run import Run


@hookimpl
def tether_addoptions(register: Any) -> None:
    register(EvalOptions, deprecated=DEPRECATED)


@hookimpl
def tether_addhooks(pluginmanager: Any) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def tether_eval_kernels(run: Run) -> Any:
    if not run.options.of(EvalOptions).eval_enabled:
        return None  # the harness turned kernels off for this run
    from tether_eval.kernels import KernelFactory

    return KernelFactory(run)


@hookimpl
def tether_eval_envelope(run: Run) -> Any:
    from tether.sandbox import envelope

    return envelope(run, "kernel")  # the run's (a harness's, or the built-in when asked for); None: the host


@hookimpl
def tether_register_tools(run: Run, register: Registrar) -> None:
    factory = run.resource(hookspecs.tether_eval_kernels)
    if factory is None:
        register.unavailable(
            "kernels are turned off for this run (run option eval_enabled=false or no kernel factory from the harness)"
        )
        return
    from tether_eval.tools import eval_tool

    register(eval_tool(run))
