"""The JavaScript idiom rewrite itself (pure): what becomes a helper call, and what is left alone.

Python cells are not rewritten at all (IPython's own transformers run them: see test_python.py).
"""

from __future__ import annotations

import pytest
from tether import ToolError
from tether_eval.idioms import rewrite


def test_plain_code_is_untouched():
    code = "let ok = !done;\nconst s = `50%`;\nif (a != b) x = !y;"
    assert rewrite(code) == code


def test_javascript_idioms_keep_indentation():
    assert rewrite('!echo "hi"') == '__tether.sh("echo \\"hi\\"");'
    assert rewrite("if (x) {\n  %cd sub\n}") == 'if (x) {\n  __tether.cd("sub");\n}'
    assert rewrite("%timeit -r 2 f()") == "await __tether.timeit(async () => { f() }, 2);"


def test_javascript_cell_magics():
    assert rewrite("%%sh\nls") == '__tether.sh("ls", {shell: "/bin/sh"});'
    assert rewrite("\n%%bash\necho 'a'") == '__tether.sh("echo \'a\'", {shell: "bash"});'
    assert rewrite("%%timeit -r 3\nf()") == "await __tether.timeit(async () => {\nf()\n}, 3);"


@pytest.mark.parametrize(
    "code, needle",
    [
        ("%pip install lodash", "npm:"),
        ("%who", "%who is an IPython magic"),
        ("%%writefile x\n1", "%%writefile is an IPython cell magic"),
    ],
)
def test_javascript_refuses_what_has_no_meaning_there(code, needle):
    with pytest.raises(ToolError) as info:
        rewrite(code)
    assert needle in info.value.message
