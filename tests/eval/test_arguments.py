"""Bad input to `eval`: one clear paragraph each, no traceback, and no kernel started for nothing."""

from __future__ import annotations

import pytest
import tether
import tether_eval.plugin as eval_plugin
from tether.testing import assert_light_entry_point, assert_model_error
from tether_eval.hookspecs import tether_eval_kernels


@pytest.fixture
async def run(tmp_path, tether_run, no_leftover_processes):
    async with tether_run(tmp_path, only=["eval"]) as r:
        yield r


def test_registering_eval_imports_no_kernel_machinery(tmp_path):
    """What `tether tools` does (open a run, list its tools) loads neither jupyter_client nor zmq nor ipykernel."""
    assert_light_entry_point(
        "tether_eval.plugin",
        forbidden=("jupyter_client", "jupyter_core", "zmq", "ipykernel"),
        then=(
            "import tether, tether_eval.plugin as p\n"
            f"with tether.open_run_sync({str(tmp_path)!r}, plugins=[p], load_entry_points=False) as run:\n"
            "    assert [t.name for t in run.tools()] == ['eval']"
        ),
    )


async def test_missing_description(run):
    r = await run.call("eval", {"code": "1"})
    assert_model_error(r)
    assert "missing required argument 'description'" in r.plain


@pytest.mark.parametrize("description", ["too short", "one two three four", " ".join(["word"] * 11), "   "])
async def test_description_must_be_five_to_ten_words(run, description):
    r = await run.call("eval", {"code": "1", "description": description})
    assert_model_error(r)
    assert "description must be 5 to 10 words" in r.plain and "e.g." in r.plain
    assert r.data["error"] == "invalid_description"
    assert run.resource(tether_eval_kernels).live("python") is None


async def test_unknown_language(run):
    r = await run.call("eval", {"code": "1", "description": "run it in a language", "language": "ruby"})
    assert_model_error(r)
    assert "language" in r.plain and '"python"' in r.plain and '"javascript"' in r.plain and "ruby" in r.plain


@pytest.mark.parametrize("code", ["", "   \n\t"])
async def test_empty_code(run, code):
    r = await run.call("eval", {"code": code, "description": "run nothing at all for once"})
    assert_model_error(r)
    assert "code is empty" in r.plain and r.data["error"] == "empty_code"
    assert run.resource(tether_eval_kernels).live("python") is None


async def test_wrong_types(run):
    r = await run.call("eval", {"code": 12, "description": "run a number as the code", "reset": "yes"})
    assert_model_error(r)
    assert "code: expected string" in r.plain and "reset: expected boolean" in r.plain


async def test_schema_names_languages_and_requires_description(run):
    (tool,) = [t for t in run.tools() if t.name == "eval"]
    schema = tool.input_schema
    assert schema["required"] == ["code", "description"]
    assert schema["properties"]["language"]["enum"] == ["python", "javascript"]
    assert tool.tier.value == "exec" and tool.parallel_safe is False


async def test_read_only_surface_has_no_eval(tmp_path):
    async with tether.open_run(
        tmp_path, surface="readonly", plugins=[eval_plugin], load_entry_points=False
    ) as run:
        assert "eval" not in [t.name for t in run.tools()]
        r = await run.call("eval", {"code": "1", "description": "try to run a cell here"})
        assert r.is_error and "unknown tool 'eval'" in r.plain


async def test_run_option_turns_eval_off(tmp_path):
    async with tether.open_run(
        tmp_path, plugins=[eval_plugin], load_entry_points=False, options={"eval": False}
    ) as run:
        assert "eval" not in [t.name for t in run.tools()]
        assert any(u.family == "eval" and "turned off" in u.reason for u in run.unavailable)


class NoKernels:
    """A harness that switches eval off for its runs."""

    __name__ = "no_kernels"

    @tether.hookimpl(tryfirst=True)
    def tether_eval_kernels(self, run):
        return tether.NO_RESOURCE


async def test_harness_turns_eval_off(tmp_path):
    async with tether.open_run(tmp_path, plugins=[eval_plugin, NoKernels()], load_entry_points=False) as run:
        assert "eval" not in [t.name for t in run.tools()]
        assert any(u.family == "eval" and "turned off" in u.reason for u in run.unavailable)


class OwnFactory:
    """A harness overriding the factory (e.g. to configure it): its handle is the one used."""

    __name__ = "own_factory"

    def __init__(self):
        self.made = []

    @tether.hookimpl(tryfirst=True)
    def tether_eval_kernels(self, run):
        from tether_eval.kernels import KernelFactory

        factory = KernelFactory(run)
        self.made.append(factory)
        return factory


async def test_harness_overrides_the_factory(tmp_path, no_leftover_processes):
    own = OwnFactory()
    async with tether.open_run(tmp_path, plugins=[eval_plugin, own], load_entry_points=False) as run:
        r = await run.call("eval", {"code": "6 * 7", "description": "multiply two numbers in python"})
        assert "42" in r.plain
        assert len(own.made) == 1 and own.made[0].live("python") is not None


def test_works_from_a_synchronous_run(tmp_path, no_leftover_processes):
    with tether.open_run_sync(tmp_path, plugins=[eval_plugin], load_entry_points=False) as run:
        r = run.call("eval", {"code": "sum(range(10))", "description": "add up numbers from a sync caller"})
        assert not r.is_error and r.plain.strip().endswith("45")
