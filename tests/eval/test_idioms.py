"""The idiom rewrite itself (pure): what becomes a helper call, and what is left alone."""

from __future__ import annotations

import pytest
from tether import ToolError
from tether_eval.idioms import rewrite

H = "__import__('__tether__')"


def test_plain_code_is_untouched():
    code = "x = 1\nif x != 2:\n    print('100%!')\ny = not x"
    assert rewrite(code, "python") == code
    assert rewrite("let ok = !done;\nconst s = `50%`;", "javascript") == "let ok = !done;\nconst s = `50%`;"


def test_python_line_idioms_keep_indentation():
    out = rewrite("for i in range(2):\n    !echo $i\n%pip install x==1\n%cd ~/src\nfiles = !ls -1", "python")
    lines = out.splitlines()
    assert lines[1] == f"    {H}.sh('echo $i')"
    assert lines[2] == f"{H}.pip('install x==1')"
    assert lines[3] == f"{H}.cd('~/src')"
    assert lines[4] == f"files = {H}.sh('ls -1', capture=True)"


def test_python_cell_magics():
    assert rewrite("%%bash\necho 'a'\n", "python") == f"{H}.sh(\"echo 'a'\\n\", shell='bash')"
    assert (
        rewrite("\n%%timeit -n 3 import math\nmath.sqrt(2)", "python")
        == f"{H}.timeit('math.sqrt(2)', globals(), '-n 3 import math')"
    )
    assert (
        rewrite("%timeit -n 5 -r 2 f(x)", "python")
        == f"{H}.timeit('f(x)', {{**globals(), **locals()}}, '-n 5 -r 2')"
    )


def test_python_other_magics_pass_through_to_ipython():
    assert rewrite("%who\n%%writefile a.txt\nhi", "python") == "%who\n%%writefile a.txt\nhi"
    assert rewrite("%%capture\nprint(1)", "python") == "%%capture\nprint(1)"


def test_javascript_idioms():
    assert rewrite('!echo "hi"', "javascript") == '__tether.sh("echo \\"hi\\"");'
    assert rewrite("%cd sub", "javascript") == '__tether.cd("sub");'
    assert rewrite("%%sh\nls", "javascript") == '__tether.sh("ls", {shell: "/bin/sh"});'


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
        rewrite(code, "javascript")
    assert needle in info.value.message
