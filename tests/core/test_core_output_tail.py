"""The bounded tail of a stream (tether.output.Tail): what vibe keeps of a worker's stdout and stderr."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tether.output import Tail


@given(
    st.text(),
    st.lists(st.integers(min_value=1, max_value=7), max_size=50),
    st.integers(min_value=1, max_value=40),
)
def test_tail_is_the_end_of_the_decoded_stream_whatever_the_chunking(text, cuts, max_chars):
    data = text.encode()
    tail, pos = Tail(max_chars), 0
    for size in cuts:  # chunks split multi-byte characters anywhere
        tail.add(data[pos : pos + size])
        pos += size
    tail.add(data[pos:])
    tail.finish()
    assert tail.text() == text[-max_chars:]
    assert tail.total == len(text) and tail.cut == max(0, len(text) - max_chars)


def test_render_says_what_was_cut():
    tail = Tail(5)
    tail.add_text("0123456789")
    assert (
        tail.render("result")
        == "[result cut: showing the last 5 of 10 characters; the start is not kept]\n56789"
    )
    short = Tail(50)
    short.add_text("all of it")
    assert short.render("log") == "all of it"


def test_bad_bytes_are_replaced_not_fatal():
    tail = Tail(100)
    tail.add(b"ok \xff\xfe end")
    tail.finish()
    assert tail.text() == "ok \ufffd\ufffd end"
