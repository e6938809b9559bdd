"""A harness that lists only `eval` and `read` to its model: `tether serve -p tether_test_few_listed
--surface few`. Cells reach every other tool of the surface through their `tools` object."""

from __future__ import annotations

from tether import Surface, hookimpl


@hookimpl
def tether_register_surfaces(run):
    return [Surface("few", {"read", "write", "exec"}, listed={"eval", "read"})]
