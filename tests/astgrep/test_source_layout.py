"""The family's source keeps the team's layout where the formatter cannot: no comment wrapped onto a closing bracket."""

from __future__ import annotations

import re
from pathlib import Path

import tether_astgrep

# what the formatter leaves when a trailing comment made a line too long: `x = (\n    ...\n)  # comment`
_WRAPPED_COMMENT = re.compile(r"^\s*[)\]}][)\]},]*\s*#")


def test_no_trailing_comment_is_left_on_a_wrapped_closing_bracket():
    src = Path(tether_astgrep.__file__).parent
    found = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(src.glob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if _WRAPPED_COMMENT.match(line)
    ]
    assert not found, "move each comment onto its own line above the statement:\n" + "\n".join(found)
