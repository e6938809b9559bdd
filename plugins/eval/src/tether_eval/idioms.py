"""IPython idioms in JavaScript cells, rewritten to plain calls of the Deno kernel's helper.

Python cells need none of this: they go to IPython as they are, and IPython's own input
transformers turn `!cmd`, `x = !cmd`, `%magic` and `%%cell` into code. Deno has no IPython, so
`%cd`, `!cmd`, `%timeit` (line) and `%%bash`/`%%sh`/`%%timeit` (cell) become calls of `__tether`
(see kernel_side/js_helper.js). The rewrite is by line, at statement starts only (keeping
indentation); a line inside a template string that starts with `!` or `%` would be rewritten too,
which is the price of not parsing the cell. Other magics, and `%pip`, are refused with a clear error
(npm packages are imported with `npm:` specifiers instead).
"""

from __future__ import annotations

import json
import re

from tether import ToolError

_MAGIC = re.compile(r"^%([A-Za-z_]\w*)\s*(.*)$")
_CELL_SHELLS = {"bash": "bash", "sh": "/bin/sh"}


def rewrite(code: str) -> str:
    """The JavaScript cell with its idioms replaced by plain calls of the kernel's helper."""
    lines = code.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        return _cell_magic(lines[first].strip()[2:], "\n".join(lines[first + 1 :]))
    if "%" not in code and "!" not in code:
        return code  # the common case: nothing to do
    return "\n".join(_line(line) for line in lines)


def _repeat(options: str) -> int:
    repeat = re.search(r"-r\s*(\d+)", options)
    return int(repeat.group(1)) if repeat else 5


def _cell_magic(header: str, body: str) -> str:
    name, _, rest = header.partition(" ")
    if name in _CELL_SHELLS:
        return f"__tether.sh({json.dumps(body)}, {{shell: {json.dumps(_CELL_SHELLS[name])}}});"
    if name == "timeit":
        return f"await __tether.timeit(async () => {{\n{body}\n}}, {_repeat(rest)});"
    raise ToolError(
        f"%%{name} is an IPython cell magic; a JavaScript cell supports %%bash, %%sh and %%timeit. "
        "Write the cell in plain JavaScript, or run it with language 'python'."
    )


def _line(line: str) -> str:
    stripped = line.lstrip()
    if not stripped or stripped[0] not in "%!":
        return line
    indent = line[: len(line) - len(stripped)]
    if stripped.startswith("!") and not stripped.startswith("!="):
        return f"{indent}__tether.sh({json.dumps(stripped[1:].strip())});"
    magic = _MAGIC.match(stripped) if stripped.startswith("%") else None
    if magic is None:
        return line
    name, rest = magic.group(1), magic.group(2).strip()
    if name == "pip":
        raise ToolError(
            "%pip installs Python packages and has no meaning in a JavaScript cell: import npm packages "
            "directly (e.g. import _ from 'npm:lodash'), or run the cell with language 'python'."
        )
    if name == "cd":
        return f"{indent}__tether.cd({json.dumps(rest)});"
    if name == "timeit":
        options = re.match(r"^((?:-[nr]\s*\d+\s+)*)(.*)$", rest, re.DOTALL)
        assert options is not None
        return f"{indent}await __tether.timeit(async () => {{ {options.group(2)} }}, {_repeat(options.group(1))});"
    raise ToolError(
        f"%{name} is an IPython magic; a JavaScript cell supports %cd, %timeit, !cmd, %%bash and %%timeit. "
        "Write it in plain JavaScript, or run the cell with language 'python'."
    )
