"""One registration pattern: the family stamped per plugin, resources by their spec, definitions by id."""

from __future__ import annotations

import attrs
import pluggy
import pytest
import tether
from tether import Tier, Tool, hookimpl, hookspec


async def test_the_family_is_stamped_from_the_entry_point_name(plugin_site):
    async with tether.open_run(".", options={"procfam": True}) as run:
        assert {t.family for t in run.tools() if t.name.startswith("proc_")} == {"procfam"}
    async with tether.open_run(".") as run:  # unavailable(reason) needs no family either
        assert [u.family for u in run.unavailable if "procfam is off" in u.reason] == ["procfam"]


@attrs.frozen
class NoArgs:
    pass


@attrs.frozen
class Widget:
    id: str
    source: str


class Specs:
    @hookspec(firstresult=True)
    def tether_widget_shop(self, run) -> Shop | None:
        """The run's shop."""

    @hookspec
    def tether_widgets(self, run) -> list[Widget] | None:
        """More widgets, by id."""


class Shop:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


class WidgetFamily:
    @hookimpl
    def tether_addhooks(self, pluginmanager: pluggy.PluginManager) -> None:
        pluginmanager.add_hookspecs(Specs)

    @hookimpl
    def tether_widget_shop(self, run) -> Shop:
        return Shop()

    @hookimpl(trylast=True)
    def tether_widgets(self, run):
        return [Widget("a", "builtin"), Widget("b", "builtin"), Widget("c", "builtin")]

    @hookimpl
    def tether_register_tools(self, run, register) -> None:
        register(Tool("widget", Tier.READ, "A widget.", NoArgs, lambda ctx, args: "w"))
        register.unavailable("only partly here")


class ThirdParty:
    @hookimpl
    def tether_widgets(self, run):
        return [Widget("b", "third"), Widget("z", "third"), "not a widget"]


class Harness:
    @hookimpl(tryfirst=True)
    def tether_widgets(self, run):
        return [Widget("b", "harness"), Widget("y", "harness")]


async def test_resource_takes_the_spec_itself_once_per_run_and_not_its_name():
    family = WidgetFamily()
    async with tether.open_run(".", plugins=[family], load_entry_points=False) as run:
        shop = run.resource(Specs.tether_widget_shop)
        assert isinstance(shop, Shop)
        assert run.resource(Specs.tether_widget_shop) is shop  # one handle per run
        with pytest.raises(TypeError, match="pass the hook specification itself"):
            run.resource("tether_widget_shop")  # pyright: ignore[reportArgumentType]
        tool = run.all_tools["widget"]
        assert tool.family == run.pm.get_name(family)  # a plugin object's family is its plugin name
    assert shop.closed


async def test_definitions_one_rule_a_later_called_plugin_never_beats_an_earlier_one(caplog):
    plugins = [WidgetFamily(), ThirdParty(), Harness()]
    async with tether.open_run(".", plugins=plugins, load_entry_points=False) as run:
        table = run.definitions(Specs.tether_widgets, Widget)
    # the built-ins keep their order and place; b is replaced by the tryfirst harness (over the third
    # party); new ids follow in registration order; what is not a Widget is left out and logged
    assert [(w.id, w.source) for w in table.values()] == [
        ("a", "builtin"),
        ("b", "harness"),
        ("c", "builtin"),
        ("z", "third"),
        ("y", "harness"),
    ]
    assert "not a widget" in caplog.text
    async with tether.open_run(".", plugins=plugins[:2], load_entry_points=False) as run:
        assert run.definitions(Specs.tether_widgets, Widget)["b"].source == "third"
