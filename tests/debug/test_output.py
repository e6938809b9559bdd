"""The program's output as the debug tool keeps it: streams merged a whole line at a time, and the
launcher frames of a Python traceback trimmed even when another stream's line came between them."""

from __future__ import annotations

from tether_debug.render import trim_launcher_frames
from tether_debug.session import OutputBuffer


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


def test_an_unfinished_line_is_given_at_the_next_read():
    out = OutputBuffer()
    out.add("name? ", "stdout")  # a prompt waiting for input has no newline
    out.add("line one\r\nline", "stderr")
    assert out.take() == ("line one\nname? line", 0)
    out.add(" two\n", "stderr")
    assert out.take() == (" two\n", 0)


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
