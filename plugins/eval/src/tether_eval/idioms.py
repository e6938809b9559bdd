"""IPython idioms rewritten to plain code before a cell runs, so they work in any kernel.

`%pip`, `%cd`, `!cmd`, `x = !cmd`, `%timeit` (line) and `%%bash`/`%%sh`/`%%timeit` (cell) become calls
of the helper installed in the kernel (`__tether__` in Python, `__tether` in JavaScript). The rewrite
is by line, at statement starts only (keeping indentation); a line inside a triple-quoted string that
starts with `!` or `%` would be rewritten too, which is the price of not parsing invalid syntax.
Other `%magics` pass through to IPython in Python cells; in JavaScript they are refused with a clear
error, as is `%pip` (npm packages are imported with `npm:` specifiers instead).
"""

from __future__ import annotations

import json
import re

from tether import ToolError

_ASSIGN_SHELL = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*!(.*)$")
_MAGIC = re.compile(r"^%([A-Za-z_]\w*)\s*(.*)$")
_PY = "__import__('__tether__')"
_CELL_SHELLS = {"bash": "bash", "sh": "/bin/sh"}


def rewrite(code: str, language: str) -> str:
    """The cell with its idioms replaced by plain code for ``language`` ('python' or 'javascript')."""
    lines = code.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        return _cell_magic(lines[first].strip()[2:], "\n".join(lines[first + 1 :]), language)
    if "%" not in code and "!" not in code:
        return code  # the common case: nothing to do
    return "\n".join(_line(line, language) for line in lines)


def _cell_magic(header: str, body: str, language: str) -> str:
    name, _, rest = header.partition(" ")
    if name in _CELL_SHELLS:
        if language == "python":
            return f"{_PY}.sh({body!r}, shell={_CELL_SHELLS[name]!r})"
        return f"__tether.sh({json.dumps(body)}, {{shell: {json.dumps(_CELL_SHELLS[name])}}});"
    if name == "timeit":
        if language == "python":
            return f"{_PY}.timeit({body!r}, globals(), {rest!r})"
        repeat = re.search(r"-r\s*(\d+)", rest)
        return f"await __tether.timeit(async () => {{\n{body}\n}}, {int(repeat.group(1)) if repeat else 5});"
    if language == "python":
        return f"%%{header}\n{body}"  # another IPython cell magic: IPython knows it
    raise ToolError(
        f"%%{name} is an IPython cell magic; a JavaScript cell supports %%bash, %%sh and %%timeit. "
        "Write the cell in plain JavaScript, or run it with language 'python'."
    )


def _timeit_options(rest: str) -> tuple[str, str]:
    """Split `%timeit -n 10 -r 3 stmt` into its options and the statement."""
    options = re.match(r"^((?:-[nr]\s*\d+\s+)*)(.*)$", rest, re.DOTALL)
    assert options is not None
    return options.group(1).strip(), options.group(2)


def _line(line: str, language: str) -> str:
    stripped = line.lstrip()
    if not stripped or (stripped[0] not in "%!" and "!" not in stripped):
        return line
    indent = line[: len(line) - len(stripped)]
    py = language == "python"
    # `x = !cmd` only in Python: in JavaScript `x = !flag` is a plain negation
    assign = _ASSIGN_SHELL.match(stripped) if py else None
    if assign:
        var, cmd = assign.group(1), assign.group(2).strip()
        return f"{indent}{var} = {_PY}.sh({cmd!r}, capture=True)"
    if stripped.startswith("!") and not stripped.startswith("!="):
        cmd = stripped[1:].strip()
        return f"{indent}{_PY}.sh({cmd!r})" if py else f"{indent}__tether.sh({json.dumps(cmd)});"
    magic = _MAGIC.match(stripped) if stripped.startswith("%") else None
    if magic is None:
        return line
    name, rest = magic.group(1), magic.group(2).strip()
    if name == "pip":
        if py:
            return f"{indent}{_PY}.pip({rest!r})"
        raise ToolError(
            "%pip installs Python packages and has no meaning in a JavaScript cell: import npm packages "
            "directly (e.g. import _ from 'npm:lodash'), or run the cell with language 'python'."
        )
    if name == "cd":
        return f"{indent}{_PY}.cd({rest!r})" if py else f"{indent}__tether.cd({json.dumps(rest)});"
    if name == "timeit":
        options, stmt = _timeit_options(rest)
        if py:
            return f"{indent}{_PY}.timeit({stmt!r}, {{**globals(), **locals()}}, {options!r})"
        repeat = re.search(r"-r\s*(\d+)", options)
        return f"{indent}await __tether.timeit(async () => {{ {stmt} }}, {int(repeat.group(1)) if repeat else 5});"
    if py:
        return line  # another IPython line magic (%who, %env...): IPython runs it
    raise ToolError(
        f"%{name} is an IPython magic; a JavaScript cell supports %cd, %timeit, !cmd, %%bash and %%timeit. "
        "Write it in plain JavaScript, or run the cell with language 'python'."
    )
