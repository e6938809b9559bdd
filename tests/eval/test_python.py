"""The Python kernel through `eval`: persistence, display, tables, figures, output bounds, errors, idioms.

One run (one real ipykernel) is shared by the module: each test leaves state only under its own names.
"""

from __future__ import annotations

import pytest
import pytest_asyncio
import tether
import tether_eval.plugin as eval_plugin

pytestmark = pytest.mark.asyncio(loop_scope="module")
D = "run a cell for the eval tests"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def run(tmp_path_factory, module_children, fake_tools):
    root = tmp_path_factory.mktemp("pyroot")
    (root / "sub").mkdir()
    (root / "data.csv").write_text("a,b\n1,2\n3,4\n")
    async with tether.open_run(root, plugins=[eval_plugin, fake_tools], load_entry_points=False) as r:
        yield r


async def cell(run, code, **kw):
    return await run.call("eval", {"code": code, "description": D, **kw})


def images(result):
    return [b for b in result.content if isinstance(b, tether.Image)]


async def test_first_cell_says_which_python_and_where(run):
    r = await cell(run, "1 + 1")
    assert not r.is_error, r.plain
    assert "Out[" in r.plain and "2" in r.plain
    assert "__tether__" not in r.plain and "tether-helper" not in r.plain  # the helper installs silently
    kernel = r.data["kernel"]
    # the first cell of this module started the kernel (whichever test ran first): the data always says where
    assert kernel["where"] == "host" and kernel["environment"] == "tether's own environment"
    assert kernel["language"] == "python" and kernel["pid"]


async def test_state_persists_between_calls(run):
    await cell(run, "import json\npersisted = {'n': 41}")
    r = await cell(run, "persisted['n'] + 1")
    assert r.plain.strip().endswith("42"), r.plain
    assert r.data["status"] == "ok" and r.data["kernel"]["started"] is False


@pytest.mark.usefixtures("cpu_stress")
async def test_last_expression_and_display_and_print_in_order(run):
    r = await cell(run, "print('before')\ndisplay({'shown': 1})\n'last value'")
    text = r.plain
    assert text.index("before") < text.index("{'shown': 1}") < text.index("'last value'")
    assert "Out[" in text


async def test_statement_cell_has_no_out(run):
    r = await cell(run, "quiet = 3")
    assert "Out[" not in r.plain and not r.is_error


async def test_dataframe_comes_back_as_bounded_text_table(run):
    r = await cell(run, "import pandas as pd\ndf = pd.DataFrame({'x': range(1000), 'y': ['v'] * 1000})\ndf")
    text = r.plain
    assert "<table" not in text and "<td" not in text
    assert "[1000 rows x 2 columns]" in text
    assert len(text) < 4000  # bounded: 1000 rows are not all shown
    assert "999" in text and "..." in text


async def test_small_dataframe_is_shown_whole(run):
    r = await cell(run, "import pandas as pd\npd.read_csv('data.csv')")
    lines = [line.split() for line in r.plain.splitlines()]
    assert ["a", "b"] in lines and ["0", "1", "2"] in lines and ["1", "3", "4"] in lines


async def test_figure_as_last_expression_comes_back_once_as_png(run):
    code = (
        "import matplotlib\nimport matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\nax.plot([1, 2, 3], [3, 1, 2])\nfig"
    )
    r = await cell(run, code)
    imgs = images(r)
    assert len(imgs) == 1, r.content
    assert imgs[0].data[:8] == b"\x89PNG\r\n\x1a\n" and imgs[0].mime_type == "image/png"
    assert r.data["images"] == 1


async def test_two_figures_are_two_images(run):
    r = await cell(
        run,
        "import matplotlib.pyplot as plt\nfor k in (1, 2):\n    plt.figure()\n    plt.plot([0, k])\n    plt.show()",
    )
    assert len(images(r)) == 2


async def test_many_displays_are_bounded(run):
    r = await cell(run, "for i in range(120):\n    display(i)")
    assert "70 more display(s) not kept" in r.plain and "49" in r.plain
    assert "119" not in r.plain


async def test_stdout_and_stderr_are_bounded_and_the_cut_is_said(run):
    r = await cell(
        run,
        "import sys\nprint('x' * 100 + '\\n') \nfor i in range(3000):\n    print('line', i, 'y' * 40)\nprint('THE END')\nsys.stderr.write('warned\\n')",
    )
    text = r.plain
    assert "characters of output dropped" in text and "THE END" in text and "line 0 " in text
    assert "[stderr]\nwarned" in text
    assert len(text) < 25_000
    assert r.data["output_cut"] is True


async def test_huge_output_keeps_head_and_tail_only(run):
    r = await cell(run, "for i in range(200_000):\n    print('row', i, 'z' * 30)\nprint('FINAL LINE')")
    text = r.plain
    assert "row 0 " in text and "FINAL LINE" in text and "characters of output dropped" in text
    assert len(text) < 25_000 and not r.is_error


async def test_exception_gives_type_message_and_cell_frames(run):
    r = await cell(
        run, "def inner(v):\n    return {}[v]\n\ndef outer():\n    return inner('missing')\n\nouter()"
    )
    assert r.is_error and r.data["status"] == "error"
    assert r.data["error"] == {"ename": "KeyError", "evalue": "'missing'"}
    text = r.plain
    assert "KeyError: 'missing'" in text
    assert "in inner" in text and "in outer" in text and "Cell In[" in text
    assert "\x1b[" not in text  # no terminal colour codes


async def test_exception_in_library_shows_cell_frame_and_counts_the_rest(run):
    r = await cell(run, "import json\njson.loads('{not json')")
    assert r.is_error and r.data["error"]["ename"] == "JSONDecodeError"
    assert "Cell In[" in r.plain and "frame(s) inside libraries" in r.plain
    assert "json/decoder.py" not in r.plain


async def test_syntax_error(run):
    r = await cell(run, "def broken(:\n    pass")
    assert r.is_error and r.data["error"]["ename"] == "SyntaxError"
    assert "SyntaxError" in r.plain


async def test_plain_input_gets_an_empty_answer_not_a_hang(run):
    r = await cell(run, "answer = input('your name? ')\nrepr(answer)")
    assert not r.is_error
    assert "''" in r.plain and "input() was called ('your name? ')" in r.plain


# -- IPython idioms: the cell goes to IPython as it is --------------------------------------------


async def test_shell_bang_streams_and_reports_exit_code(run):
    r = await cell(run, "!echo hello from sh\n!exit 3")
    assert "hello from sh" in r.plain and "[exit code 3]" in r.plain and not r.is_error


async def test_shell_bang_capture_and_indentation(run):
    r = await cell(run, "lines = !printf 'a\\nb\\n'\nfor _ in range(1):\n    !echo indented\nlines")
    assert "['a', 'b']" in r.plain and "indented" in r.plain


async def test_bang_and_percent_inside_a_triple_quoted_string_are_text(run):
    r = await cell(run, 'kept = """\n!important: keep\n%cd nowhere\n"""\nkept')
    assert not r.is_error, r.plain
    assert r.plain.strip().endswith(
        "Out[{}]: '\\n!important: keep\\n%cd nowhere\\n'".format(r.data["execution_count"])
    )


async def test_shell_expands_variables_and_expressions(run):
    r = await cell(run, "who = 'world'\n!echo hello $who {6 * 7}")
    assert "hello world 42" in r.plain, r.plain


async def test_shell_capture_is_ipythons_slist(run):
    r = await cell(run, "got = !printf 'alpha\\nbeta\\n'\n(type(got).__name__, got.n, got.s, got.grep('al'))")
    assert "('SList', 'alpha\\nbeta', 'alpha beta', ['alpha'])" in r.plain, r.plain


async def test_percent_cd_changes_directory_and_back(run):
    r = await cell(run, "%cd sub\nimport os\nos.getcwd()")
    assert r.plain.count("sub") >= 2, r.plain
    r = await cell(run, "%cd -\nos.path.basename(os.getcwd())")
    assert not r.is_error and "pyroot" in r.plain.splitlines()[-1], r.plain
    assert "FileNotFoundError" not in r.plain and "__tether__" not in r.plain


async def test_cell_magic_bash(run):
    r = await cell(run, '%%bash\nset -e\nname=world\necho "hello ${name}"\necho $BASH_VERSION | cut -c1')
    assert "hello world" in r.plain and not r.is_error
    assert any(line.strip().isdigit() for line in r.plain.splitlines())


async def test_timeit_is_ipythons_own(run):
    r = await cell(run, "%%timeit -n 20 -r 3 base = 10\ntotal = sum(range(base))")
    assert "per loop (mean ± std. dev. of 3 runs, 20 loops each)" in r.plain, r.plain
    r = await cell(run, "%timeit -n 5 -r 2 sum(range(10))")
    assert "2 runs, 5 loops each" in r.plain, r.plain
    # IPython's note when one run is much slower than the others: here the first call sleeps
    r = await cell(
        run,
        "import time\ncalls = []\ndef once_slow():\n    calls.append(1)\n    if len(calls) == 1:\n        time.sleep(0.05)\n"
        "%timeit -n 1 -r 5 once_slow()",
    )
    assert "The slowest run took" in r.plain and "cached" in r.plain, r.plain


async def test_other_ipython_magics_still_work(run):
    r = await cell(run, "%env TETHER_EVAL_MAGIC=on\nimport os\nos.environ['TETHER_EVAL_MAGIC']")
    assert "'on'" in r.plain


# -- what IPython sends as pager payloads, and HTML --------------------------------------------------


@pytest.mark.parametrize(
    "code, needle",
    [
        ("len?", "Return the number of items in a container."),
        ("str.split?", "Return a list of the substrings in the string"),
        ("def documented(a, b=2):\n    'Add them.'\n    return a + b\ndocumented??", "return a + b"),
        ("%pdoc len", "Return the number of items in a container."),
        ("import json\n%psource json.dumps", "def dumps(obj, *, skipkeys=False"),
        ("%prun sum(range(100))", "function calls in"),
    ],
)
async def test_pager_text_is_shown(run, code, needle):
    r = await cell(run, code)
    assert not r.is_error, r.plain
    assert needle in r.plain, r.plain
    assert "\x1b[" not in r.plain and "[no output]" not in r.plain


async def test_load_shows_the_text_ipython_would_put_in_the_next_cell(run):
    r = await cell(run, "%load data.csv")
    assert not r.is_error, r.plain
    assert (
        "[IPython's text for the next cell; send it as a cell to run it]\n# %load data.csv\na,b\n1,2\n3,4"
        in r.plain
    ), r.plain


async def test_signature_is_in_the_help(run):
    r = await cell(run, "def documented_too(a, b=2):\n    'Add them.'\n    return a + b\ndocumented_too?")
    assert "documented_too(a, b=2)" in r.plain and "Add them." in r.plain, r.plain


async def test_long_pager_text_is_bounded_and_the_cut_said(tmp_path):
    async with tether.open_run(
        tmp_path, plugins=[eval_plugin], load_entry_points=False, options={"eval_max_output_chars": 2000}
    ) as small:
        r = await cell(small, "import json.encoder\n%psource json.encoder")
    assert "characters of the pager's text cut" in r.plain, r.plain
    assert len(r.plain) < 3000 and r.data["output_cut"] is True


async def test_html_is_rendered_as_text_with_tables_and_links(run):
    r = await cell(
        run,
        "%%html\n<h3>Report</h3><p>See <a href='https://example.org/doc'>the docs</a>.</p>"
        "<table><tr><th>name</th><th>n</th></tr><tr><td>a|b</td><td>1</td></tr></table>",
    )
    assert not r.is_error, r.plain
    text = r.plain
    assert "IPython.core.display.HTML object" not in text and "<table" not in text
    assert "### Report" in text and "[the docs](https://example.org/doc)" in text
    assert "| name | n |" in text and "| a\\|b | 1 |" in text


async def test_display_with_only_html_is_rendered(run):
    r = await cell(
        run,
        "display({'text/html': '<ul><li>first</li><li><b>second</b></li></ul><script>x()</script>'}, raw=True)",
    )
    assert "- first" in r.plain and "- **second**" in r.plain and "x()" not in r.plain, r.plain


async def test_huge_html_is_bounded(run):
    r = await cell(
        run,
        "from IPython.display import HTML\n"
        "HTML('<table>' + ''.join(f'<tr><td>{i}</td><td>v{i}</td></tr>' for i in range(30000)) + '</table>')",
    )
    assert "characters of this output cut" in r.plain and "| 0 | v0 |" in r.plain, r.plain[:500]
    assert len(r.plain) < 25_000
