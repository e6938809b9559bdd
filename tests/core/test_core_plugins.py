"""Discovery through entry points, resources deciding registration, overrides, blocking, broken plugins."""

from __future__ import annotations

import sys

import tether
from tether import hookimpl


async def test_entry_point_family_is_discovered_and_registers_when_its_resource_exists(plugin_site):
    async with tether.open_run(".", options={"procfam": True}) as run:
        names = {t.name for t in run.tools()}
        assert {"proc_spawn", "proc_slow", "proc_source", "proc_write"} <= names
        assert (await run.call("proc_source")).plain == "default"


async def test_resource_none_means_no_tools_and_a_reason(plugin_site):
    async with tether.open_run(".") as run:
        assert not any(t.family == "procfam" for t in run.tools())
        reasons = {u.family: u.reason for u in run.unavailable}
        assert "procfam is off" in reasons["procfam"]
        result = await run.call("proc_slow")
        assert result.is_error and "procfam is off" in result.plain


async def test_harness_override_of_a_resource_hook_wins(plugin_site):
    class Harness:
        @hookimpl(tryfirst=True)
        def tether_procfam_resource(self, run):
            from tether_test_procfam import Resource

            return Resource("harness")

    async with tether.open_run(".", plugins=[Harness()]) as run:
        assert (await run.call("proc_source")).plain == "harness"


async def test_blocking_variable_keeps_a_plugin_from_being_imported(plugin_site, monkeypatch):
    monkeypatch.setenv("TETHER_BLOCK_PLUGINS", "procfam")
    async with tether.open_run(".", options={"procfam": True}) as run:
        assert not any(t.family == "procfam" for t in run.tools())
    assert "tether_test_procfam" not in sys.modules


async def test_load_variable_selects_plugins_before_import(plugin_site, monkeypatch):
    monkeypatch.setenv("TETHER_PLUGINS", "procfam")
    async with tether.open_run(".", options={"procfam": True}) as run:
        assert "proc_slow" in {t.name for t in run.tools()}
        assert not any(u.family == "broken" for u in run.unavailable)
    assert "tether_test_typo" not in sys.modules


async def test_block_argument_blocks_like_the_variable(plugin_site):
    async with tether.open_run(".", options={"procfam": True}, block=["procfam"]) as run:
        assert not any(t.family == "procfam" for t in run.tools())


async def test_broken_plugin_is_reported_and_the_others_still_load(plugin_site):
    async with tether.open_run(".", options={"procfam": True}) as run:
        reasons = {u.family: u.reason for u in run.unavailable}
        assert "failed to import: ImportError: this plugin is broken on purpose" in reasons["broken"]
        assert "proc_slow" in {t.name for t in run.tools()}


async def test_misspelled_hook_is_caught_by_check_pending_and_reported(plugin_site):
    async with tether.open_run(".", options={"procfam": True}) as run:
        reasons = {u.family: u.reason for u in run.unavailable}
        assert "unknown hook(s) tether_register_tool" in reasons["typo"]
        assert "proc_slow" in {t.name for t in run.tools()}


async def test_programmatic_plugin_registers_a_tool_of_its_own():
    import attrs

    @attrs.frozen
    class Args:
        who: str = tether.arg("who to greet")

    class Mine:
        @hookimpl
        def tether_register_tools(self, run, register):
            register(
                tether.Tool("greet", "read", "Greet.", Args, lambda ctx, a: f"hello {a.who}", family="mine")
            )

    async with tether.open_run(".", plugins=[Mine()], load_entry_points=False) as run:
        assert (await run.call("greet", {"who": "ada"})).plain == "hello ada"


def test_import_tether_stays_light():
    from tether.testing import assert_light_entry_point

    assert_light_entry_point(
        "tether",
        forbidden=("tree_sitter", "pygls", "jupyter_client", "debugpy", "mcp", "tether.run", "cattrs"),
    )


async def test_a_harness_switches_a_family_off_with_no_resource(plugin_site):
    class Harness:
        @hookimpl(tryfirst=True)
        def tether_procfam_resource(self, run):
            return tether.NO_RESOURCE  # None would fall through to the family's own implementation

    async with tether.open_run(".", options={"procfam": True}, plugins=[Harness()]) as run:
        assert not any(t.family == "procfam" for t in run.tools())
        from tether_test_procfam import Specs  # on the path of plugin_site

        assert run.resource(Specs.tether_procfam_resource) is None
