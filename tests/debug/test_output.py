"""The program's output as the debug tool keeps it: streams merged a whole line at a time, and the
launcher frames of a Python traceback trimmed even when another stream's line came between them."""

from __future__ import annotations

import pytest
from tether_debug.output import LINE_KEEP, OutputBuffer
from tether_debug.render import trim_launcher_frames


def test_two_streams_merge_whole_lines():
    out = OutputBuffer()
    # debugpy's launcher reads stdout and stderr on two threads: a print can arrive in pieces with
    # the other stream's text between them
    out.add("done", "stdout")
    out.add("Traceback (most recent call last):\n  File ", "stderr")
    out.add(" 90\n", "stdout")
    out.add('"loop.py", line 22\n', "stderr")
    text, dropped = out.take()
    assert text.splitlines() == [
        "Traceback (most recent call last):",
        "done 90",
        '  File "loop.py", line 22',
    ]
    assert dropped == 0


def test_an_unfinished_line_is_given_at_the_next_read_as_a_line_of_its_own():
    out = OutputBuffer()
    out.add("name? ", "stdout")  # a prompt waiting for input has no newline
    out.add("line one\r\nline", "stderr")
    # each stream's piece ends its own line: the stdout prompt is not glued to stderr's fragment
    assert out.take() == ("line one\nname? \nline\n", 0)
    out.add(" two\n", "stderr")
    assert out.take() == (" two\n", 0)


def test_an_endless_line_is_bounded_and_says_what_it_cut():
    out = OutputBuffer()
    chunk = "x" * 65_536
    for _ in range(400):  # 26 MB without a newline (a progress bar, a binary dump)
        out.add(chunk, "stdout")
    out.add("tail\nnext line\n", "stdout")
    assert out._lines.total < 2 * LINE_KEEP  # what was kept is bounded, not 26 MB
    text, dropped = out.take()
    first, second = text.splitlines()
    cut = 400 * 65_536 - LINE_KEEP
    assert first == f"[{cut:,} earlier characters of this line cut] " + "x" * LINE_KEEP + "tail"
    assert second == "next line" and dropped == 0


def test_an_unfinished_line_is_kept_in_bounded_pieces_until_the_read():
    out = OutputBuffer()
    for _ in range(400):
        out.add("y" * 65_536, "stderr")
    waiting = out._unfinished["stderr"]
    assert waiting.size == LINE_KEEP == sum(len(p) for p in waiting.pieces)
    text, _ = out.take()
    assert text.startswith(f"[{400 * 65_536 - LINE_KEEP:,} earlier characters of this line cut")
    assert text.endswith("y" * LINE_KEEP + "\n")


def test_launcher_frames_are_counted_across_another_streams_line():
    runpy = [f'  File "/usr/lib/python3/runpy.py", line {n}, in _run_code\n    exec(code)' for n in (1, 2, 3)]
    debugpy = [
        f'  File "/venv/debugpy/server/cli.py", line {n}, in run_file\n    runpy.run_path()' for n in (4, 5)
    ]
    text = "\n".join(
        [
            "Traceback (most recent call last):",
            *runpy,
            "done 90",  # stdout, read on its own thread
            *debugpy,
            '  File "/project/loop.py", line 22, in <module>',
            "    main()",
            "KeyError: 'uncaught one'",
        ]
    )
    assert trim_launcher_frames(text).splitlines() == [
        "Traceback (most recent call last):",
        "  [5 launcher frames (runpy, debugpy) not shown]",
        "done 90",
        '  File "/project/loop.py", line 22, in <module>',
        "    main()",
        "KeyError: 'uncaught one'",
    ]


TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/runpy.py", line 198, in _run_module_as_main',
    "    return _run_code(code, main_globals, None,",
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '  File "/usr/lib/python3/runpy.py", line 88, in _run_code',
    "    exec(code, run_globals)",
    '  File "/venv/debugpy/__main__.py", line 71, in <module>',
    "    cli.main()",
    '  File "/venv/debugpy/server/cli.py", line 508, in main',
    "    run()",
    '  File "/project/loop.py", line 22, in <module>',
    "    main()",
    '  File "/project/loop.py", line 18, in main',
    '    raise KeyError("uncaught one")',
    "KeyError: 'uncaught one'",
]


@pytest.mark.parametrize("at", range(len(TRACEBACK) + 1))
def test_another_streams_line_anywhere_in_the_traceback_leaves_it_trimmed_and_whole(at):
    """debugpy reads stdout and stderr on two threads: a stdout line may come between any two of
    the traceback's lines, also between a launcher frame and its source line."""
    text = "\n".join([*TRACEBACK[:at], "done 90", *TRACEBACK[at:]])
    lines = trim_launcher_frames(text).splitlines()
    assert lines.count("done 90") == 1
    assert [line for line in lines if line != "done 90"] == [
        "Traceback (most recent call last):",
        "  [4 launcher frames (runpy, debugpy) not shown]",
        *TRACEBACK[10:],
    ]
