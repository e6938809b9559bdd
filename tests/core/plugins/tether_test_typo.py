"""A plugin with a misspelled hook implementation."""

from tether import hookimpl


@hookimpl
def tether_register_tool(run, register):  # misspelled: tether_register_tools
    raise AssertionError("never called")
