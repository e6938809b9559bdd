"""The command roster's configuration: pyproject.toml, run options, and every way it can be wrong."""

from __future__ import annotations

import json
import shlex
import sys

import pytest
from tether.options import OptionsError
from tether_vibe import hookspecs

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


def write_pyproject(root, body: str) -> None:
    (root / "pyproject.toml").write_text(body)


async def spawn_and_wait(run, **args):
    spawned = await run.call("vibe_spawn", {"brief": "@env", "label": "cfg", **args})
    assert not spawned.is_error, spawned.plain
    return await run.call("vibe_wait", {"worker_id": spawned.data["worker_id"], "timeout_seconds": 30})


async def test_pyproject_command_line_is_split_like_a_shell(open_vibe, project):
    # the worker's path has a space: shlex quoting keeps it one word, and no shell runs it
    line = f"{shlex.quote(sys.executable)} {shlex.quote(str(project / 'worker.py'))}"
    write_pyproject(project, f"[tool.tether.vibe]\nfast = {json.dumps(line)}\ngood = {json.dumps(line)}\n")
    async with open_vibe(project) as run:
        done = await spawn_and_wait(run, tier="good")
    assert done.data["status"] == "done", done.plain
    assert f"cwd={project}" in done.data["result"]
    assert "env=w1,good,cfg,full" in done.data["result"]


async def test_a_worker_is_told_the_surface_that_started_it(open_vibe, project, worker_cmd):
    async with open_vibe(project, {"fast": worker_cmd}, surface="plan") as run:
        done = await spawn_and_wait(run)
    assert done.data["status"] == "done", done.plain
    assert "env=w1,fast,cfg,plan" in done.data["result"]


async def test_pyproject_list_and_run_option_override(open_vibe, project, worker_cmd):
    write_pyproject(project, '[tool.tether.vibe]\nfast = ["no-such-program-tether-vibe"]\nmax_workers = 1\n')
    async with open_vibe(project) as run:  # the project's command alone does not exist
        failed = await run.call("vibe_spawn", {"brief": "x", "label": "y"})
        assert failed.is_error and "no-such-program-tether-vibe" in failed.plain
    async with open_vibe(project, {"fast": worker_cmd}) as run:  # the run's option wins, key by key
        done = await spawn_and_wait(run)
        assert done.data["status"] == "done"
        assert run.resource(hookspecs.tether_vibe_roster).options.vibe_max_workers == 1  # still the project's


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('[tool.tether.vibe]\nfast = ""\n', "vibe_fast is empty"),
        ('[tool.tether.vibe]\nfast = "python \'unclosed"\n', "cannot be split into words"),
    ],
)
async def test_an_unusable_command_disables_the_family_with_the_reason(open_vibe, project, body, expected):
    write_pyproject(project, body)
    async with open_vibe(project) as run:  # the run itself opens fine
        assert not [t for t in run.tools() if t.name.startswith("vibe_")]
        (reason,) = [u.reason for u in run.unavailable if u.family == "vibe"]
    assert reason.startswith("the worker roster could not be set up: ")
    assert expected in reason


PROJECT = " (from [tool.tether] in pyproject.toml)"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "[tool.tether.vibe]\nfast = 3\n",
            f"run option vibe_fast{PROJECT}: expected string or array or null, got integer 3",
        ),
        (
            '[tool.tether.vibe]\nfastt = "x"\n',
            f"unknown run option 'vibe_fastt'{PROJECT} (did you mean 'vibe_fast'?)",
        ),
        (
            '[tool.tether.vibe]\nfast = "x"\nmax_workers = 0\n',
            f"run option vibe_max_workers{PROJECT}: must be at least 1, got 0",
        ),
        (
            '[tool.tether.vibe]\nfast = "x"\nmax_workers = "4"\n',
            "vibe_max_workers" + PROJECT + ": expected integer, got string '4'",
        ),
        ("[tool.tether.vibe\nfast = 1\n", "pyproject.toml is not valid TOML"),
    ],
)
async def test_a_bad_project_configuration_stops_the_run_at_open(open_vibe, project, body, expected):
    write_pyproject(project, body)
    with pytest.raises(OptionsError) as info:
        async with open_vibe(project):
            pass
    (problem,) = info.value.problems
    assert expected in problem


@pytest.mark.parametrize(
    ("vibe", "expected"),
    [
        ({"fast": ["x"], "wait_timeout": -1}, "run option vibe_wait_timeout: must be at least 0, got -1"),
        ({"fast": ["x"], "colour": "red"}, "unknown run option 'vibe_colour'"),
        ({"fast": [1, 2]}, "run option vibe_fast[0]: expected string, got integer 1"),
    ],
)
async def test_a_bad_run_option_stops_the_run_at_open(open_vibe, project, vibe, expected):
    with pytest.raises(OptionsError) as info:
        async with open_vibe(project, vibe):
            pass
    assert expected in info.value.problems[0]


async def test_flat_run_options_are_the_same_options(open_vibe, project, worker_cmd):
    async with open_vibe(project, options={"vibe_fast": worker_cmd, "vibe_max_workers": 2}) as run:
        assert run.resource(hookspecs.tether_vibe_roster).options.vibe_max_workers == 2
        done = await spawn_and_wait(run)
    assert done.data["status"] == "done"
