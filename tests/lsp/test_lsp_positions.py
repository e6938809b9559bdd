"""Line + symbol -> position, and the server's position encodings (pure functions)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tether.tools import ToolError
from tether_lsp.positions import find_symbol, from_units, to_units

LINE = 'label = "é😀"; n = greet(label)'


@pytest.mark.parametrize("encoding,expected", [("utf-16", 19), ("utf-8", 22), ("utf-32", 18)])
def test_units_after_non_ascii(encoding, expected):
    char = LINE.index("greet")
    assert char == 18
    assert to_units(LINE, char, encoding) == expected
    assert from_units(LINE, expected, encoding) == char


@given(st.text(max_size=30), st.sampled_from(["utf-8", "utf-16", "utf-32"]))
def test_units_round_trip(text, encoding):
    line = text.replace("\n", "").replace("\r", "")
    for char in range(len(line) + 1):
        assert from_units(line, to_units(line, char, encoding), encoding) == char


@given(
    st.text(st.characters(max_codepoint=127, exclude_characters="\n\r"), max_size=30),
    st.integers(0, 40),
    st.sampled_from(["utf-8", "utf-16", "utf-32"]),
)
def test_an_ascii_line_is_counted_as_pygls_counts_it(line, n, encoding):
    # ASCII lines skip pygls' per-character walk: the answer must be the codec's (an offset past the end: the end)
    from pygls.workspace.position_codec import PositionCodec

    assert to_units(line, min(n, len(line)), encoding) == PositionCodec(encoding).client_num_units(line[:n])
    assert from_units(line, n, encoding) == min(n, len(line))


def test_whole_identifier_is_preferred_and_a_single_partial_match_is_taken():
    text = "greeting = greet(x)\nprintgreeting = 1\n"
    assert find_symbol(text, 1, "greet", None, "a.py").char == 11
    assert find_symbol(text, 2, "greet", None, "a.py").char == 5


def test_ambiguity_lists_occurrences_and_occurrence_picks_one():
    text = "x = f(f(1))\n"
    with pytest.raises(ToolError) as err:
        find_symbol(text, 1, "f", None, "a.py")
    assert "occurs 2 times on line 1 of 'a.py'" in err.value.message and "column 5" in err.value.message
    assert err.value.data["columns"] == [5, 7]
    assert find_symbol(text, 1, "f", 2, "a.py").char == 6
    # a symbol that is not an identifier needs no boundaries: '(f' occurs twice, plainly ambiguous
    with pytest.raises(ToolError):
        find_symbol(text, 1, "(", None, "a.py")
