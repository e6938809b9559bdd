"""When the vibe tools are on offer: vibe mode on AND a roster; on every surface, since they are tier read."""

from __future__ import annotations

import pytest
import tether
from tether.testing import assert_light_entry_point
from tether_vibe import hookspecs

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

VIBE_TOOLS = ["vibe_kill", "vibe_list", "vibe_send", "vibe_spawn", "vibe_wait"]  # tier read: on every surface
WITH_MERGE = sorted([*VIBE_TOOLS, "vibe_merge"])  # vibe_merge lands work: tier write


def vibe_names(run) -> list[str]:
    return [t.name for t in run.tools() if t.name.startswith("vibe_")]


def reasons(run) -> list[str]:
    return [u.reason for u in run.unavailable if u.family == "vibe"]


async def test_tools_registered_when_vibe_mode_and_roster(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        assert vibe_names(run) == WITH_MERGE
        assert reasons(run) == []
        tools = {t.name: t for t in run.tools()}
        assert {t.family for n, t in tools.items() if n.startswith("vibe_")} == {"vibe"}  # stamped
        assert {t.name for t in tools.values() if t.tier is not tether.Tier.READ} == {"vibe_merge"}
        assert tools["vibe_merge"].tier is tether.Tier.WRITE
        spawn = tools["vibe_spawn"].input_schema
        assert spawn["required"] == ["brief", "label"]
        assert spawn["properties"]["tier"]["enum"] == ["fast", "good"]
        assert spawn["properties"]["tier"]["default"] == "fast"
        assert tools["vibe_list"].input_schema["properties"] == {}


async def test_vibe_mode_off_means_no_tools(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd}, modes=()) as run:
        assert vibe_names(run) == []
        assert reasons(run) == [
            "vibe mode is off for this run (the harness turns it on with the mode 'vibe')"
        ]
        result = await run.call("vibe_spawn", {"brief": "x", "label": "y"})
        assert result.is_error and "vibe mode is off" in result.plain


async def test_no_roster_means_no_tools(open_vibe, project):
    async with open_vibe(project) as run:  # no command anywhere: the built-in roster does not exist
        assert vibe_names(run) == []
        (reason,) = reasons(run)
        assert reason.startswith("no worker roster") and "[tool.tether.vibe]" in reason


@pytest.mark.parametrize("surface", ["plan", "readonly", "full"])
async def test_tools_visible_on_every_surface(open_vibe, project, worker_cmd, surface):
    async with open_vibe(project, {"fast": worker_cmd}, surface=surface) as run:
        assert vibe_names(run) == (WITH_MERGE if surface == "full" else VIBE_TOOLS)
        spawned = await run.call("vibe_spawn", {"brief": "hello", "label": "on " + surface})
        assert not spawned.is_error
        done = await run.call("vibe_wait", {"worker_id": spawned.data["worker_id"], "timeout_seconds": 30})
        assert done.data["status"] == "done"


async def test_found_through_its_entry_point(project, worker_cmd, monkeypatch):
    monkeypatch.setenv("TETHER_PLUGINS", "vibe")
    async with tether.open_run(project, modes={"vibe"}, options={"vibe": {"fast": worker_cmd}}) as run:
        assert vibe_names(run) == WITH_MERGE


def test_entry_point_imports_nothing_heavy(tmp_path):
    assert_light_entry_point(
        "tether_vibe.plugin",
        forbidden=("tether_vibe.command_roster", "tether_vibe.tools", "psutil", "asyncio.subprocess"),
    )
    # what `tether tools` does without vibe mode: the options are declared, nothing else of the family loads
    assert_light_entry_point(
        "tether_vibe.plugin",
        forbidden=("tether_vibe.config", "tether_vibe.roster", "tether_vibe.command_roster", "shlex"),
        then=(
            "import tether, tether_vibe.plugin as p\n"
            "from tether_vibe.options import VibeOptions\n"
            f"with tether.open_run_sync({str(tmp_path)!r}, plugins=[p], load_entry_points=False) as run:\n"
            "    assert run.options.of(VibeOptions).vibe_fast is None\n"
            "    assert not any(t.family == 'vibe' for t in run.tools())"
        ),
    )


async def test_opening_a_run_starts_no_worker(open_vibe, project, worker_cmd):
    from support import children

    before = children()
    async with open_vibe(project, {"fast": worker_cmd}) as run:
        assert run.resource(hookspecs.tether_vibe_roster) is not None  # the roster exists...
        assert children() == before  # ...and started nothing: workers start on vibe_spawn


async def test_mcp_clients_are_not_told_vibe_spawn_is_read_only(open_vibe, project, worker_cmd):
    # tier read by design (the gate is on the worker's own tools), but it starts an agent that may write
    from tether.serve import _annotations

    async with open_vibe(project, {"fast": worker_cmd}) as run:
        tools = {t.name: _annotations(t) for t in run.tools()}
    spawn = tools["vibe_spawn"]
    assert (spawn.read_only_hint, spawn.destructive_hint, spawn.open_world_hint) == (False, True, True)
    assert all(tools[n].read_only_hint for n in VIBE_TOOLS if n != "vibe_spawn")
    assert tools["vibe_merge"].destructive_hint and not tools["vibe_merge"].read_only_hint
