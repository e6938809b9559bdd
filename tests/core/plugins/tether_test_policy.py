"""A harness policy as a plain module, loaded with `tether ... -p tether_test_policy`."""

from __future__ import annotations

from tether import Surface, hookimpl


@hookimpl
def tether_approve(run, tool, arguments, paths):
    if "pyproject.toml" in paths:
        return "pyproject.toml is protected by the harness's policy"
    return None


@hookimpl
def tether_register_surfaces(run):
    return [Surface("review", {"read", "write"})]
