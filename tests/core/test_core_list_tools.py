"""`tether.list_tools`: the listing `tether tools` prints, made without an event loop, and what it closes.

The tools are registered as `open_run` registers them; a resource that says it is `idle()` is not
closed, any other (and a plugin's `tether_run_closing`) is closed as `open_run` closes it.
"""

from __future__ import annotations

import subprocess
import sys

import attrs
import pluggy
import pytest
import tether
from tether import Tier, Tool, hookimpl, hookspec


@attrs.frozen
class NoArgs:
    pass


class Specs:
    @hookspec(firstresult=True)
    def tether_test_listing_shop(self, run):
        """The run's shop."""


class Shop:
    def __init__(self, idle: bool | None) -> None:
        self._idle = idle
        self.closed = 0
        if idle is not None:
            self.idle = lambda: self._idle

    async def aclose(self) -> None:
        import asyncio

        await asyncio.sleep(0)  # a close that needs the loop
        self.closed += 1


class Family:
    def __init__(self, idle: bool | None) -> None:
        self.shop = Shop(idle)
        self.events: list[str] = []

    @hookimpl
    def tether_addhooks(self, pluginmanager: pluggy.PluginManager) -> None:
        pluginmanager.add_hookspecs(Specs)

    @hookimpl
    def tether_test_listing_shop(self, run):
        return self.shop

    @hookimpl
    def tether_register_tools(self, run, register) -> None:
        run.resource(Specs.tether_test_listing_shop)
        register(Tool("shop", Tier.READ, "A shop.", NoArgs, lambda ctx, args: "s"))

    @hookimpl
    def tether_run_opened(self, run) -> None:
        self.events.append("opened")


class Closing:
    def __init__(self) -> None:
        self.closed = 0

    @hookimpl
    def tether_run_closing(self, run) -> None:
        self.closed += 1


def test_a_resource_with_something_to_close_is_closed_and_an_idle_one_is_not(tmp_path):
    for idle, closed in ((None, 1), (False, 1), (True, 0)):
        family = Family(idle)
        listing = tether.list_tools(tmp_path, plugins=[family], load_entry_points=False)
        assert [t["name"] for t in listing["tools"]] == ["shop"], listing
        assert family.shop.closed == closed, idle
        assert family.events == []  # the run is not opened for work


def test_a_plugins_run_closing_hook_is_called(tmp_path):
    closing = Closing()
    tether.list_tools(tmp_path, plugins=[closing], load_entry_points=False)
    assert closing.closed == 1


async def test_the_listing_is_the_open_runs(tmp_path):
    import tether.files

    async with tether.open_run(tmp_path, plugins=[tether.files]) as run:
        opened = run.tool_listing()
    assert tether.list_tools(tmp_path, plugins=[tether.files]) == opened
    assert tether.list_tools(tmp_path, plugins=[tether.files], surface="plan") != opened


def test_a_bad_option_is_the_open_runs_error(tmp_path):
    from tether.options import OptionsError

    with pytest.raises(OptionsError) as caught:
        tether.list_tools(tmp_path, options={"no_such_option": 1}, load_entry_points=False)
    assert any("no_such_option" in p for p in caught.value.problems), caught.value.problems


def test_tether_tools_starts_no_event_loop(tmp_path):
    # every family installed: the listing needs neither asyncio nor, through it, ssl and socket
    code = (
        "import contextlib, io, sys\n"
        "from tether.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['tools', '--root', {str(tmp_path)!r}]) == 0\n"
        "print(sorted(m for m in ('asyncio', 'ssl') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
