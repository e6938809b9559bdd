"""Which Python runs the kernel, `%pip` into it, and the envelope the kernel may run in."""

from __future__ import annotations

import site
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import tether
import tether.sandbox
import tether_eval.plugin as eval_plugin
from support import build_wheel
from tether.testing import assert_model_error
from tether_eval.envelope import Envelope
from tether_eval.hookspecs import tether_eval_kernels

D = "check where and how the kernel runs"


@pytest.fixture
def project_venv(tmp_path) -> Path:
    """A project with its own .venv: ipykernel reaches it through a .pth onto tether's site-packages."""
    root = tmp_path / "proj"
    root.mkdir()
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True, timeout=60
    )
    (site_dir,) = (root / ".venv").glob("lib/python3*/site-packages")
    (site_dir / "tether_parent.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return root


async def test_project_venv_is_used_and_pip_installs_into_it(project_venv, tmp_path, no_leftover_processes):
    old, new = build_wheel(tmp_path / "w1", "0.1.0"), build_wheel(tmp_path / "w2", "0.2.0")
    async with tether.open_run(project_venv, plugins=[eval_plugin], load_entry_points=False) as run:
        r = await run.call("eval", {"code": "import sys\nsys.prefix", "description": D})
        assert not r.is_error, r.plain
        assert (
            "the project's environment (.venv)" in r.plain
            and r.data["kernel"]["environment"] == "the project's environment (.venv)"
        )
        assert str(project_venv / ".venv") in r.plain
        r = await run.call("eval", {"code": f"%pip install {old}", "description": D})
        assert not r.is_error, r.plain
        r = await run.call(
            "eval", {"code": "import tinypkg\n(tinypkg.VERSION, tinypkg.__file__)", "description": D}
        )
        assert "'0.1.0'" in r.plain and ".venv" in r.plain, r.plain
        # a new version: %pip clears the old module from sys.modules, so the next import sees it
        r = await run.call("eval", {"code": f"%pip install {new}", "description": D})
        assert "cleared" in r.plain and "tinypkg" in r.plain, r.plain
        r = await run.call("eval", {"code": "import tinypkg\ntinypkg.VERSION", "description": D})
        assert "'0.2.0'" in r.plain, r.plain
    assert list((project_venv / ".venv").glob("lib/python3*/site-packages/tinypkg/__init__.py"))


async def test_venv_without_ipykernel_falls_back_and_says_so(tmp_path, no_leftover_processes):
    root = tmp_path / "bare"
    root.mkdir()
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True, timeout=60
    )
    async with tether.open_run(root, plugins=[eval_plugin], load_entry_points=False) as run:
        r = await run.call("eval", {"code": "import sys\nsys.executable", "description": D})
        assert not r.is_error
        assert "tether's own environment" in r.plain and "has no ipykernel" in r.plain
        # the banner names the interpreter the cell sees (a venv's python, not the base one it links to)
        (banner, *_), seen = r.plain.splitlines(), r.plain.strip().splitlines()[-1]
        assert f"started: {sys.executable} (sys.executable)" in banner, r.plain
        assert seen.endswith(repr(sys.executable)) and r.data["kernel"]["interpreter"] == sys.executable


async def test_projects_own_package_shadows_the_installed_namesake(tmp_path, no_leftover_processes):
    """click's own repository: its src/click, not the click installed in tether's environment."""
    import click

    root = tmp_path / "click-repo"
    (root / "src" / "click").mkdir(parents=True)
    (root / "src" / "click" / "__init__.py").write_text("WHO = 'the project'\n")
    (root / "tools").mkdir()
    (root / "tools" / "__init__.py").write_text("WHO = 'root package'\n")
    (root / "pyproject.toml").write_text("[project]\nname = 'click'\nversion = '0'\n")
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True, timeout=60
    )
    assert click.__file__.startswith(sys.prefix)  # tether's environment has its own click
    async with tether.open_run(root, plugins=[eval_plugin], load_entry_points=False) as run:
        code = "%cd /\nimport click, tools\nprint(click.WHO, click.__file__, tools.WHO, sep=' | ')"
        r = await run.call("eval", {"code": code, "description": D})
        assert not r.is_error, r.plain
        assert f"the project | {root / 'src' / 'click' / '__init__.py'} | root package" in r.plain, r.plain
        assert (
            "the project's own code comes first on sys.path (src and .): click, tools are imported" in r.plain
        )
        assert "tether's own environment" in r.plain


def marking_envelope(tmp_path: Path, up: bool, calls: list[list[str]]) -> Envelope:
    """An envelope whose wrapper command marks the environment, then runs the kernel."""
    wrapper = tmp_path / "enter-envelope"
    wrapper.write_text('#!/bin/sh\nexport TETHER_TEST_ENVELOPE=inside\nexec "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)

    def wrap(argv):
        calls.append(list(argv))
        return [str(wrapper), *argv]

    return Envelope("test-box", wrap=wrap, is_up=lambda: up)


def envelope_plugin(tmp_path: Path, up: bool):
    """A harness that answers the core's `tether_envelope` for kernels (and records what it is asked for)."""
    calls: list[list[str]] = []
    asked: list[str] = []
    envelope = marking_envelope(tmp_path, up, calls)

    class TestEnvelope:
        __name__ = f"test_envelope_{up}"

        @tether.hookimpl(tryfirst=True)
        def tether_envelope(self, run, purpose):
            asked.append(purpose)
            return envelope if purpose == "kernel" else None

    plugin = TestEnvelope()
    plugin.asked = asked
    return plugin, calls


@pytest.mark.parametrize(
    "language, probe",
    [
        ("python", "import os\nos.environ.get('TETHER_TEST_ENVELOPE')"),
        ("javascript", "Deno.env.get('TETHER_TEST_ENVELOPE')"),
    ],
)
async def test_kernel_starts_inside_an_envelope_that_is_up(tmp_path, language, probe, no_leftover_processes):
    plugin, calls = envelope_plugin(tmp_path, up=True)
    root = tmp_path / "root"
    root.mkdir()
    async with tether.open_run(root, plugins=[eval_plugin, plugin], load_entry_points=False) as run:
        r = await run.call("eval", {"code": probe, "description": D, "language": language})
        assert not r.is_error, r.plain
        assert "inside" in r.plain and "on the envelope 'test-box'" in r.plain
        assert r.data["kernel"]["where"] == "envelope 'test-box'"
        assert len(calls) == 1


async def test_the_family_takes_its_envelope_from_the_core_hook_once_per_run(tmp_path, no_leftover_processes):
    """One door: the kernels' envelope is the core's `tether_envelope` answer for "kernel", asked once per
    run by the family, however many kernels start; and no deprecation is said for it."""
    plugin, calls = envelope_plugin(tmp_path, up=True)
    root = tmp_path / "root"
    root.mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        async with tether.open_run(root, plugins=[eval_plugin, plugin], load_entry_points=False) as run:
            factory = run.resource(tether_eval_kernels)
            plugin.asked.clear()  # what opening the run asked (the listing's sandbox line) is not the family's
            r = await run.call("eval", {"code": "1 + 1", "description": D})
            assert not r.is_error and r.data["kernel"]["where"] == "envelope 'test-box'", r.plain
            r = await run.call("eval", {"code": "2 + 2", "description": D, "reset": True})
            assert not r.is_error and r.data["kernel"]["where"] == "envelope 'test-box'", r.plain
            assert factory.envelope().name == "test-box"
    assert plugin.asked == ["kernel"], plugin.asked  # the first kernel's start asked; the restart reused it
    assert len(calls) == 2


async def test_the_deprecated_envelope_hook_still_works_and_warns(tmp_path, no_leftover_processes):
    """A plugin that still implements `tether_eval_envelope` keeps its kernels in its envelope, through the
    core hook, and is told to move to `tether_envelope`."""
    calls: list[list[str]] = []
    envelope = marking_envelope(tmp_path, True, calls)

    class OldEnvelope:
        __name__ = "old_envelope"

        @tether.hookimpl
        def tether_eval_envelope(self, run):
            return envelope

    root = tmp_path / "root"
    root.mkdir()
    with pytest.warns(
        DeprecationWarning, match=r"old_envelope implements tether_eval_envelope.*tether_envelope"
    ):
        async with tether.open_run(
            root, plugins=[eval_plugin, OldEnvelope()], load_entry_points=False
        ) as run:
            assert tether.sandbox.envelope(run, "kernel") is envelope  # served by the core hook
            assert tether.sandbox.envelope(run, "debug") is None  # only for kernels
            r = await run.call(
                "eval", {"code": "import os\nos.environ.get('TETHER_TEST_ENVELOPE')", "description": D}
            )
    assert not r.is_error and "inside" in r.plain, r.plain
    assert r.data["kernel"]["where"] == "envelope 'test-box'" and len(calls) == 1


async def test_envelope_that_is_down_is_not_booted(tmp_path, no_leftover_processes):
    plugin, calls = envelope_plugin(tmp_path, up=False)
    async with tether.open_run(tmp_path, plugins=[eval_plugin, plugin], load_entry_points=False) as run:
        r = await run.call(
            "eval", {"code": "import os\nrepr(os.environ.get('TETHER_TEST_ENVELOPE'))", "description": D}
        )
        assert not r.is_error and "'None'" in r.plain
        assert r.data["kernel"]["where"] == "host" and calls == []


async def test_broken_kernel_command_is_a_clear_error(tmp_path, no_leftover_processes):
    class BrokenEnvelope:
        __name__ = "broken_envelope"

        @tether.hookimpl(tryfirst=True)
        def tether_envelope(self, run, purpose):
            return Envelope("broken", wrap=lambda argv: ["/bin/sh", "-c", "echo no sandbox here >&2; exit 3"])

    async with tether.open_run(
        tmp_path,
        plugins=[eval_plugin, BrokenEnvelope()],
        load_entry_points=False,
        options={"eval_start_timeout": 10},
    ) as run:
        r = await run.call("eval", {"code": "1", "description": D})
        assert r.is_error and r.data["error"] == "kernel_start_failed"
        assert_model_error(r, "did not start on the envelope 'broken'", "no sandbox here")
