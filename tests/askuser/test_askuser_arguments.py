"""Bad arguments to ask_user: one clear paragraph each, and the human is never bothered."""

from __future__ import annotations

import pytest
import tether
from tether.testing import assert_model_error
from tether_askuser import Answer
from tether_askuser.options import AskuserOptions


@pytest.fixture
async def run(tmp_path):
    asked = []

    async def human(q):
        asked.append(q)
        return Answer.skip()

    async with tether.open_run(tmp_path, options={"ask_user_port": human}) as r:
        r.asked = asked
        yield r
    assert not [q for q in asked if q.question.startswith("BAD")], "a refused question reached the human"


@pytest.mark.parametrize(
    "args, expected",
    [
        ({"question": "BAD", "allow_free_text": False}, "there are no options and allow_free_text is false"),
        (
            {"question": "BAD", "options": [{"label": "Yes"}, {"label": "yes "}]},
            'options[1].label "yes " duplicates options[0].label',
        ),
        ({"question": "BAD", "multi_select": True}, "multi_select needs options"),
        ({"question": "   "}, "question is empty"),
        ({"question": ""}, "question: must not be empty"),
        ({"question": "BAD", "options": [{"label": " "}]}, "options[0].label is empty"),
        ({"question": "BAD", "options": [{"label": ""}]}, "options[0].label: must not be empty"),
        ({"question": "BAD", "options": ["Yes", "No"]}, "options[0]"),
        ({"question": "BAD", "options": [{"label": "a", "desc": "x"}]}, "unknown key 'desc'"),
        ({"question": "BAD", "multi_select": "yes"}, "multi_select: expected boolean"),
        ({"question": "BAD", "options": [{"label": str(i)} for i in range(21)]}, "takes at most 20 items"),
        ({"questions": "BAD"}, "did you mean 'question'"),
        (
            {"question": "BAD", "options": [{"label": "x" * 201}]},
            "options[0].label: must be at most 200 characters, got 201",
        ),
        ({"question": "BAD" * 700}, "question: must be at most 2000 characters"),
        ({}, "missing required argument 'question'"),
    ],
)
async def test_bad_arguments_are_refused_clearly(run, args, expected):
    result = await run.call("ask_user", args)
    assert_model_error(result, expected)
    assert "\n" not in result.plain.strip()  # one paragraph
    assert run.asked == []


async def test_schema_describes_the_arguments(run):
    (tool,) = [t for t in run.tools() if t.name == "ask_user"]
    schema = tool.input_schema
    assert schema["required"] == ["question"]
    assert set(schema["properties"]) == {"question", "context", "options", "allow_free_text", "multi_select"}
    item = schema["properties"]["options"]["items"]
    assert item["required"] == ["label"] and set(item["properties"]) == {"label", "description"}
    assert tool.tier is tether.Tier.READ
    assert "never write a question as a chat message" in tool.description


async def test_only_free_text_and_only_options_are_both_fine(run):
    assert (await run.call("ask_user", {"question": "Name it?"})).data["status"] == "skipped"
    only_options = {"question": "Pick", "options": [{"label": "a"}], "allow_free_text": False}
    assert (await run.call("ask_user", only_options)).data["status"] == "skipped"


async def test_a_bad_or_misspelled_option_is_refused_when_the_run_opens(tmp_path):
    from tether.options import OptionsError

    with pytest.raises(OptionsError) as info:
        async with tether.open_run(tmp_path, options={"askuser_timeout": "soon"}):
            pass
    assert info.value.problems == ["run option askuser_timeout: expected number, got string 'soon'"]
    with pytest.raises(OptionsError) as info:
        async with tether.open_run(tmp_path, options={"askuser_timout": 5}):
            pass
    assert "did you mean 'askuser_timeout'?" in info.value.problems[0]


async def test_the_old_option_names_still_work_with_a_deprecation_warning(tmp_path):
    with pytest.warns(DeprecationWarning, match="'ask_user_timeout' is deprecated; use 'askuser_timeout'"):
        async with tether.open_run(tmp_path, options={"ask_user_timeout": 3}) as run:
            assert run.options.of(AskuserOptions).askuser_timeout == 3
