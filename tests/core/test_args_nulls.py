"""null for an optional argument is "not given" (strict-mode clients such as the OpenAI Agents SDK send
it for every optional property they leave out); null for a required one is still refused."""

from __future__ import annotations

import attrs
import pytest
from tether import arg, open_run
from tether.args import ArgumentsError, structure_arguments


@attrs.frozen
class Choice:
    label: str = arg("label", min_length=1)
    note: str | None = arg("note", default=None)


@attrs.frozen
class Args:
    path: str = arg("path")
    offset: int = arg("first line", default=1, minimum=1)
    pattern: str | None = arg("pattern", default=None)
    tags: list[str] = arg("tags", factory=list)
    choices: list[Choice] = arg("choices", factory=list)
    first: Choice | None = arg("one choice", default=None)


def test_null_for_an_optional_argument_is_its_default_at_every_depth():
    got = structure_arguments(
        Args,
        {
            "path": "a",
            "offset": None,
            "pattern": None,
            "tags": None,
            "choices": [{"label": "x", "note": None}],
            "first": {"label": "y", "note": None},
        },
    )
    assert got == Args(
        path="a", offset=1, pattern=None, tags=[], choices=[Choice(label="x")], first=Choice(label="y")
    )
    assert structure_arguments(Args, {"path": "a", "first": None}).first is None


@pytest.mark.parametrize(
    "raw, problem",
    [
        ({"path": None}, "path: expected string, got null"),
        ({"path": "a", "choices": [{"label": None}]}, "choices[0].label: expected string, got null"),
        ({"path": "a", "first": {"label": None, "note": None}}, "first.label: expected string, got null"),
        ({"path": "a", "tags": [None]}, "tags[0]: expected string, got null"),
    ],
)
def test_null_for_a_required_argument_is_still_refused(raw, problem):
    with pytest.raises(ArgumentsError) as refused:
        structure_arguments(Args, raw)
    assert refused.value.problems == [problem]


async def test_a_strict_mode_call_of_a_real_tool(tmp_path):
    import tether.files

    (tmp_path / "a.txt").write_text("one\ntwo\n")
    async with open_run(tmp_path, plugins=[tether.files]) as run:
        result = await run.call("read", {"path": "a.txt", "offset": None, "limit": None})
        assert result.is_error is False and "     2\ttwo" in result.plain
        refused = await run.call("read", {"path": None, "offset": None})
        assert refused.is_error is True and "path: expected string, got null" in refused.plain
