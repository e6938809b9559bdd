"""Run options: declared by plugins, structured once at open, strict, from pyproject.toml and the harness."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import tether
from tether import arg, hookimpl
from tether.options import CoreOptions, OptionsError

REPO = Path(__file__).resolve().parents[2]
TETHER = [sys.executable, "-m", "tether.cli"]


@attrs.frozen
class GreeterOptions:
    greeter_times: int = arg("how often to greet", default=1, minimum=1, maximum=5)
    greeter_words: list[str] = arg("words to say", factory=list)


class Greeter:
    @hookimpl
    def tether_addoptions(self, register):
        register(GreeterOptions, deprecated={"greet_times": "greeter_times"})


def open_greeter(root, **options):
    return tether.open_run(root, plugins=[Greeter()], load_entry_points=False, options=options)


async def test_declared_options_are_structured_once_and_read_typed(tmp_path):
    async with open_greeter(tmp_path, greeter_times=3.0) as run:
        assert run.options.of(GreeterOptions) == GreeterOptions(greeter_times=3)
        assert run.options.of(CoreOptions).max_output_chars == 30_000  # the core's own, defaults filled in


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        (
            {"greeter_time": 2},
            "unknown run option 'greeter_time' (did you mean 'greeter_times'?); "
            "`tether tools --json` lists every option",
        ),
        ({"greeter_times": "2"}, "run option greeter_times: expected integer, got string '2'"),
        ({"greeter_times": 9}, "run option greeter_times: must be at most 5, got 9"),
        ({"greeter_words": "hi"}, "run option greeter_words: expected array, got string 'hi'"),
        (
            {"diagnostics_timeout": False},
            "run option diagnostics_timeout: expected number, got boolean false",
        ),
    ],
)
async def test_an_unknown_key_or_a_bad_value_is_one_line_at_open(tmp_path, options, problem):
    with pytest.raises(OptionsError) as info:
        async with open_greeter(tmp_path, **options):
            pytest.fail("the run must not open")
    assert info.value.problems == [problem]


async def test_every_problem_is_said_at_once(tmp_path):
    with pytest.raises(OptionsError) as info:
        async with open_greeter(tmp_path, greeter_times=0, max_output_chars="x", nope=1):
            pass
    assert len(info.value.problems) == 3


async def test_an_old_name_still_works_with_a_deprecation_warning(tmp_path):
    with pytest.warns(DeprecationWarning, match="'greet_times' is deprecated; use 'greeter_times'"):
        async with open_greeter(tmp_path, greet_times=2) as run:
            assert run.options.of(GreeterOptions).greeter_times == 2


async def test_pyproject_is_a_source_and_the_harness_wins_key_by_key(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[project]\nname = 'x'\n\n[tool.tether]\nmax_output_chars = 5000\n\n"
        "[tool.tether.greeter]\ntimes = 4\nwords = ['a']\n"
    )
    async with open_greeter(tmp_path) as run:
        assert run.options.of(GreeterOptions) == GreeterOptions(greeter_times=4, greeter_words=["a"])
        assert run.options.of(CoreOptions).max_output_chars == 5000
    async with open_greeter(tmp_path, greeter={"times": 2}) as run:  # a table in the run's options too
        assert run.options.of(GreeterOptions) == GreeterOptions(greeter_times=2, greeter_words=["a"])


async def test_a_bad_project_option_names_its_source(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.tether.greeter]\ntimes = 'many'\n")
    with pytest.raises(OptionsError) as info:
        async with open_greeter(tmp_path):
            pass
    assert info.value.problems == [
        "run option greeter_times (from [tool.tether] in pyproject.toml): expected integer, got string 'many'"
    ]


async def test_the_project_cannot_trust_itself(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.tether]\ntrust = true\n")
    with pytest.raises(
        OptionsError, match=r"trust \(from \[tool.tether\] in pyproject.toml\): the project cannot"
    ):
        async with open_greeter(tmp_path):
            pass


@pytest.mark.parametrize(
    ("surface", "trust", "trusted"),
    [
        ("plan", None, False),
        ("readonly", None, False),
        ("full", None, True),
        ("plan", True, True),
        ("full", False, False),
    ],
)
async def test_trust_defaults_to_the_surface_and_the_harness_decides(tmp_path, surface, trust, trusted):
    options = {} if trust is None else {"trust": trust}
    async with tether.open_run(tmp_path, load_entry_points=False, surface=surface, options=options) as run:
        assert run.trusted is trusted


async def test_options_of_a_family_not_loaded_in_this_run_are_ignored(tmp_path):
    async with tether.open_run(tmp_path, block=["astgrep"], options={"astgrep_timeout": 1}) as run:
        assert "astgrep_timeout" not in run.option_registry.declared
    with pytest.raises(OptionsError, match="did you mean 'astgrep_timeout'"):
        async with tether.open_run(tmp_path, options={"astgrep_timeuot": 1}):
            pass


def tether_cmd(*args, root):
    return subprocess.run([*TETHER, *args, "--root", str(root)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", [["tools"], ["call", "read", '{"path": "x"}'], ["serve"]])
def test_the_commands_refuse_a_bad_option_before_starting(tmp_path, command):
    out = tether_cmd(*command, "--option", "astgrep_enabld=false", root=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "tether: unknown run option 'astgrep_enabld' (did you mean 'astgrep_enabled'?); "
        "`tether tools --json` lists every option"
    )
    assert out.stdout == ""


def test_tools_json_lists_every_option_with_type_default_and_help(tmp_path):
    out = tether_cmd("tools", "--json", root=tmp_path)
    assert out.returncode == 0, out.stderr
    options = {o["name"]: o for o in json.loads(out.stdout)["options"]}
    assert options["max_output_chars"] == {
        "name": "max_output_chars",
        "family": "core",
        "type": "integer",
        "default": 30_000,
        "help": options["max_output_chars"]["help"],
        "limits": {"minimum": 200},
    }
    assert options["lsp_servers"]["type"] == "array of string or null"
    assert options["astgrep_timeout"]["family"] == "astgrep"
    for name, option in options.items():  # the naming rule: <family>_<name>, the core's without a prefix
        assert option["help"], name
        if option["family"] != "core":
            assert name.startswith(option["family"] + "_"), name


def _readme_rows(path: Path) -> dict[str, list[str]]:
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\| `([a-z_]+)` \|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in m.group(2).split("|")]
    return rows


def test_every_readme_option_table_matches_the_declared_options(tmp_path):
    out = tether_cmd("tools", "--json", root=tmp_path)
    listing = json.loads(out.stdout)["options"]
    for family in sorted({o["family"] for o in listing}):
        readme = REPO / "README.md" if family == "core" else REPO / "plugins" / family / "README.md"
        rows = _readme_rows(readme)
        declared = [o for o in listing if o["family"] == family]
        table = "\n".join(
            f"| `{o['name']}` | `{o['type']}` | `{json.dumps(o['default'])}` | {o['help']} |"
            for o in declared
        )
        for o in declared:  # type and default as declared; the meaning may say more than the help
            assert rows.get(o["name"], [])[:2] == [f"`{o['type']}`", f"`{json.dumps(o['default'])}`"], (
                f"{readme.relative_to(REPO)}: the row of {o['name']} is out of date; its option table, "
                f"from `tether tools --json`:\n| option | type | default | meaning |\n|---|---|---|---|\n{table}"
            )


@attrs.frozen
class LoudOptions:
    loud_level: int | None = arg("how loud", default=None, minimum=1, env="TETHER_TEST_LOUD_LEVEL")
    loud_words: list[str] = arg(
        "what to shout", factory=list, env="TETHER_TEST_LOUD_WORDS", env_parse=lambda t: t.split(",")
    )


class Loud:
    @hookimpl
    def tether_addoptions(self, register):
        register(LoudOptions)


def open_loud(root, **options):
    return tether.open_run(root, plugins=[Loud()], load_entry_points=False, options=options)


async def test_a_declared_environment_variable_fills_what_no_source_sets(tmp_path, monkeypatch):
    monkeypatch.setenv("TETHER_TEST_LOUD_LEVEL", " 3 ")
    monkeypatch.setenv("TETHER_TEST_LOUD_WORDS", "hey,you")
    async with open_loud(tmp_path) as run:
        assert run.options.of(LoudOptions) == LoudOptions(loud_level=3, loud_words=["hey", "you"])
    # the run's options win, and so does the project's table; null from either leaves it to the environment
    (tmp_path / "pyproject.toml").write_text("[tool.tether.loud]\nwords = ['psst']\n")
    async with open_loud(tmp_path, loud_level=2) as run:
        assert run.options.of(LoudOptions) == LoudOptions(loud_level=2, loud_words=["psst"])
    async with open_loud(tmp_path, loud_level=None) as run:
        assert run.options.of(LoudOptions).loud_level == 3
    monkeypatch.setenv("TETHER_TEST_LOUD_LEVEL", "")  # empty: unset
    async with open_loud(tmp_path) as run:
        assert run.options.of(LoudOptions).loud_level is None


async def test_a_bad_environment_value_is_one_line_naming_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("TETHER_TEST_LOUD_LEVEL", "very")
    with pytest.raises(OptionsError) as info:
        async with open_loud(tmp_path):
            pytest.fail("the run must not open")
    assert info.value.problems == [
        "run option loud_level (from $TETHER_TEST_LOUD_LEVEL): expected integer, got string 'very'"
    ]
