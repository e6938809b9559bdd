"""What a typed line means on the terminal card, and that the card's checks agree with its parser."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tether_askuser.card import Answer, check_answer, make_question, parse_typed

OPTS = [("Postgres", None), ("SQLite", None), ("Redis", "cache")]


@pytest.mark.parametrize(
    "line, multi, free, expected",
    [
        ("2", False, True, Answer.choose("SQLite")),
        (" 3 ", False, False, Answer.choose("Redis")),
        ("1,3", True, False, Answer.choose("Postgres", "Redis")),
        ("3 1", True, False, Answer.choose("Redis", "Postgres")),  # check_answer puts them in card order
        ("1,1", True, False, Answer.choose("Postgres")),
        ("s", False, False, Answer.skip()),
        ("SKIP", False, True, Answer.skip()),
        ("use MySQL", False, True, Answer.typed("use MySQL")),
        ("2 databases", False, True, Answer.typed("2 databases")),  # not only numbers: it is text
        ("", False, True, "Type a number 1-3, or your own answer as text, or s to skip, then Enter."),
        ("0", False, True, "No option 0: choose between 1 and 3."),
        ("1,2", False, True, "Choose one option only."),
        ("yes", False, False, "Not a choice. Type a number 1-3, or s to skip, then Enter."),
    ],
)
def test_typed_lines(line, multi, free, expected):
    q = make_question("Which?", None, OPTS, free, multi)
    assert parse_typed(q, line) == expected


def test_free_text_question_without_options_takes_digits_as_text():
    q = make_question("How many workers?", None, [], True, False)
    assert parse_typed(q, "4") == Answer.typed("4")


labels = st.lists(
    st.text(min_size=1, max_size=12).filter(str.strip),
    min_size=1,
    max_size=6,
    unique_by=lambda s: " ".join(s.split()).casefold(),
)


@given(labels=labels, multi=st.booleans(), free=st.booleans(), line=st.text(max_size=20))
def test_whatever_is_typed_the_parser_never_yields_an_answer_the_card_refuses(labels, multi, free, line):
    q = make_question("Which?", None, [(label, None) for label in labels], free, multi)
    got = parse_typed(q, line)
    if isinstance(got, Answer):
        checked = check_answer(q, got)  # raises if the parser produced something not on offer
        assert set(checked.selected) <= set(q.labels)
    else:
        assert isinstance(got, str) and got  # a hint, and the card asks again
