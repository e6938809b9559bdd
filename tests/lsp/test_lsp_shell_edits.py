"""A file changed on disk by something other than tether (a shell's `echo >> b.py`, a generator, git) is told
to the server by the query's refresh, and the answer waits for the server's round after it: the FIRST
`diagnostics` call after a shell edit reflects the file as it is on disk now, or says that it may not.

Real servers on small projects of two files, a.* importing b.*, each under CPU load: basedpyright, gopls,
typescript-language-server.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import tether
import tether.files
from support import require_binary
from tether_lsp.hookspecs import tether_lsp_supervisor

# per language: the files (a imports b), a change of b that breaks a's use of it, a line that is an error in a
PROJECTS = {
    "py": (
        {
            "pyproject.toml": '[project]\nname = "s"\nversion = "0"\n',
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.b import make\n\nx: int = make()\n",
            "pkg/b.py": "def make() -> int:\n    return 1\n",
        },
        "def make() -> str:\n    return 'a'\n",
        "y: int = 'a'\n",
    ),
    "go": (
        {
            "go.mod": "module example.com/app\n\ngo 1.19\n",
            "pkg/a.go": "package pkg\n\nvar X int = Make()\n",
            "pkg/b.go": "package pkg\n\nfunc Make() int { return 1 }\n",
        },
        'package pkg\n\nfunc Make() string { return "a" }\n',
        'var Y int = "a"\n',
    ),
    "ts": (
        {
            "tsconfig.json": '{"compilerOptions": {"strict": true}}\n',
            "pkg/a.ts": 'import { make } from "./b";\n\nexport const x: number = make();\n',
            "pkg/b.ts": "export function make(): number {\n  return 1;\n}\n",
        },
        "export function make(): string {\n  return 'a';\n}\n",
        'export const y: number = "a";\n',
    ),
}


@pytest.fixture
def project(request, tmp_path, samples, monkeypatch) -> tuple[str, Path]:
    lang = request.param
    if lang == "go":
        gopls = require_binary("gopls", os.path.expanduser("~/go/bin/gopls"))
        require_binary("go")
        monkeypatch.setenv("PATH", f"{os.path.dirname(gopls)}{os.pathsep}{os.environ['PATH']}")
    if lang == "ts":
        require_binary("typescript-language-server", str(samples.node_bin() / "typescript-language-server"))
        monkeypatch.setenv("PATH", f"{samples.node_bin()}{os.pathsep}{os.environ['PATH']}")
    return lang, samples.write_tree(tmp_path / "proj", PROJECTS[lang][0])


@pytest.fixture
def project_py(tmp_path, samples) -> Path:
    return samples.write_tree(tmp_path / "proj", PROJECTS["py"][0])


def errors_at(plain: str, rel: str) -> list[int]:
    """The lines of the errors an answer lists for ``rel``."""
    return [
        int(line.split(":")[1])
        for line in plain.splitlines()
        if line.startswith(f"{rel}:") and " error" in line
    ]


@pytest.mark.usefixtures("cpu_stress")
@pytest.mark.parametrize("project", ["py", "go", "ts"], indirect=True)
async def test_the_first_diagnostics_after_a_shell_edit_are_of_the_file_on_disk_now(project):
    lang, root = project
    files, breaking, bad_line = PROJECTS[lang]
    a, b = f"pkg/a.{lang}", f"pkg/b.{lang}"
    diagnose = {"action": "diagnostics", "file": a}
    async with tether.open_run(root, plugins=[tether.files]) as run:

        async def once() -> list[int]:
            answer = await run.call("lsp", diagnose)
            assert not answer.is_error, answer.plain
            return errors_at(answer.plain, a)

        assert await once() == []
        # a shell changes the imported file: a's use of it breaks, and ONE call says so
        (root / b).write_text(breaking)
        assert await once() == [3], "the answer was the server's result from before the shell's edit of " + b
        # and the shell's revert: ONE call no longer shows the old error
        (root / b).write_text(files[b])
        assert await once() == [], "the answer still showed the error the shell's revert fixed"
        # the asked file itself, changed by a shell (`echo >> a`)
        with (root / a).open("a") as f:
            f.write(bad_line)
        assert await once() == [4]
        (root / a).write_text(files[a])
        assert await once() == []


async def test_a_shell_edit_the_server_has_not_analysed_in_time_is_said_next_to_the_answer(py_root):
    """A server that cannot analyse the change in time (here: stopped) is not answered for as if it had:
    the call says the change made outside tether is not analysed yet, and the next call is right."""
    async with tether.open_run(py_root, plugins=[tether.files], options={"diagnostics_timeout": 5}) as run:
        diagnose = {"action": "diagnostics", "file": "pkg/other.py"}
        deadline = time.monotonic() + 90  # the cold first round under 5 s of diagnostics_timeout
        while (first := await run.call("lsp", diagnose)).is_error and time.monotonic() < deadline:
            pass
        assert "no errors or warnings" in first.plain, first.plain
        pid = next(iter(run.resource(tether_lsp_supervisor).connections.values())).pid
        util = py_root / "pkg" / "util.py"
        util.write_text(
            util.read_text().replace("def hello(self) -> str:", "def hello(self, n: int) -> str:")
        )
        (py_root / "zz_unrelated.py").write_text("z = 1\n")  # imported by nothing: not waited for, not named
        os.killpg(pid, signal.SIGSTOP)  # its whole session: the wheel's launcher runs node
        try:
            stopped = await run.call("lsp", diagnose)
        finally:
            os.killpg(pid, signal.SIGCONT)
        assert stopped.is_error, stopped.plain
        assert "showed no analysis of the change to pkg/util.py made outside tether yet" in stopped.plain, (
            stopped.plain
        )
        assert "ask again" in stopped.plain and "zz_unrelated" not in stopped.plain, stopped.plain
        again = await run.call("lsp", diagnose)
        assert not again.is_error, again.plain
        assert "reportCallIssue" in again.plain, again.plain


async def test_a_shell_edit_of_a_file_the_asked_one_cannot_import_is_not_waited_for(project_py, monkeypatch):
    """basedpyright starts no round for a change of a file nothing open imports: a wait for one would end
    only on the fallback's quiet (made to outlast diagnostics_timeout here, once the first answer is in),
    and then blame the change. The file read shows a cannot import it, so the answer is given at once."""
    from tether_lsp import rounds

    root = project_py
    (root / "pkg" / "unrelated.py").write_text("u = 1\n")
    async with tether.open_run(root, plugins=[tether.files], options={"diagnostics_timeout": 60}) as run:
        diagnose = {"action": "diagnostics", "file": "pkg/a.py"}
        first = await run.call("lsp", diagnose)
        assert first.plain == "no errors or warnings in pkg/a.py", first.plain
        monkeypatch.setattr(rounds, "PROGRESS_FALLBACK_SEEN", 600.0)
        (root / "pkg" / "unrelated.py").write_text("u = 2\n")  # a shell's edit (`sed -i`)
        started = time.monotonic()
        answer = await run.call("lsp", diagnose)
        spent = time.monotonic() - started
        assert answer.plain == "no errors or warnings in pkg/a.py", answer.plain
        assert spent < 30, f"the answer waited {spent:.1f} s for a round after a change a cannot see"
        # a change it can see is still waited for, and shown
        (root / "pkg" / "b.py").write_text(PROJECTS["py"][1])
        monkeypatch.undo()
        assert errors_at((await run.call("lsp", diagnose)).plain, "pkg/a.py") == [3]


# per language: a harmless line appended to a (a comment)
HARMLESS = {"py": "# a note\n", "go": "// a note\n"}


@pytest.mark.usefixtures("cpu_stress")
@pytest.mark.parametrize("project", ["py", "go"], indirect=True)
async def test_a_write_after_a_shell_edit_does_not_claim_the_shells_error(project):
    """The write's baseline is the disk as it is before the write: an error a shell's edit of an imported
    file caused in the written file is not "introduced" by a harmless write of it."""
    lang, root = project
    files, breaking, bad_line = PROJECTS[lang]
    a, b = f"pkg/a.{lang}", f"pkg/b.{lang}"
    async with tether.open_run(root, plugins=[tether.files]) as run:
        # a is open at the server, its round long done
        first = await run.call("lsp", {"action": "diagnostics", "file": a})
        assert not first.is_error and errors_at(first.plain, a) == [], first.plain
        (root / b).write_text(breaking)  # the shell breaks a's use of b
        harmless = await run.call("write", {"path": a, "content": files[a] + HARMLESS[lang]})
        assert not harmless.is_error, harmless.plain
        claimed = [(d["file"], d["line"]) for d in (harmless.data or {}).get("diagnostics", [])]
        assert (a, 3) not in claimed and "introduced" not in harmless.plain, (
            "the write claimed the error the shell's edit of " + b + " caused:\n" + harmless.plain
        )
        # the error is there all the same, and a real new one is the next write's alone
        now = await run.call("lsp", {"action": "diagnostics", "file": a})
        assert errors_at(now.plain, a) == [3], now.plain
        broken = await run.call("write", {"path": a, "content": files[a] + HARMLESS[lang] + bad_line})
        assert [(d["file"], d["line"]) for d in (broken.data or {}).get("diagnostics", [])] == [(a, 5)], (
            broken.plain
        )


async def test_a_write_whose_baseline_misses_a_shell_edit_says_so_instead_of_claiming(py_root):
    """A server that has not analysed a shell's change before a write (here: stopped) gives the write no
    baseline of the written file: nothing is claimed about it, and the answer says why."""
    async with tether.open_run(py_root, plugins=[tether.files], options={"diagnostics_timeout": 5}) as run:
        diagnose = {"action": "diagnostics", "file": "pkg/main.py"}
        deadline = time.monotonic() + 90  # the cold first round under 5 s of diagnostics_timeout
        while (first := await run.call("lsp", diagnose)).is_error and time.monotonic() < deadline:
            pass
        assert "reportCallIssue" not in first.plain, first.plain
        pid = next(iter(run.resource(tether_lsp_supervisor).connections.values())).pid
        util = py_root / "pkg" / "util.py"
        util.write_text(util.read_text().replace("def greet(name: str)", "def greet(name: str, n: int)"))
        os.killpg(pid, signal.SIGSTOP)  # its whole session: the wheel's launcher runs node
        try:
            text = (py_root / "pkg" / "main.py").read_text() + "# a note\n"
            written = await run.call("write", {"path": "pkg/main.py", "content": text})
        finally:
            os.killpg(pid, signal.SIGCONT)
        assert not written.is_error, written.plain
        assert "introduced" not in written.plain, written.plain
        assert (
            "basedpyright had not yet analysed the change to pkg/util.py made outside tether" in written.plain
        ), written.plain
        again = await run.call("lsp", diagnose)
        assert "reportCallIssue" in again.plain, again.plain


async def test_a_symbol_search_right_after_a_shell_adds_a_file_finds_it_or_says_it_may_be_incomplete(py_root):
    """basedpyright adds a new file to its program a moment after it is told of it: a search asked at once
    missed its symbols while saying ready. Each answer finds the new function, or says it may not have
    (either is right whatever the machine's load, so this runs without cpu_stress, which costs it 25 s)."""
    from tether_lsp import readiness

    async with tether.open_run(py_root, options={"lsp_servers": ["basedpyright"]}) as run:
        r = await run.call("lsp", {"action": "symbols", "query": "hello"})
        assert not r.is_error, r.plain
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        for n in range(3):  # the miss came in about half the tries
            assert await readiness.wait_ready(conn, 120) is None
            name = f"newly_added_{n}"
            (py_root / f"pkg/added_{n}.py").write_text(f"def {name}() -> int:\n    return {n}\n")  # a shell's
            ask = {"action": "symbols", "query": name}
            r = await run.call("lsp", ask)
            found = [(s["file"], s["line"]) for s in (r.data or {}).get("symbols", [])]
            if (r.data or {}).get("ready") is False:
                assert "this answer may be incomplete" in r.plain, r.plain
            else:
                assert not r.is_error and found == [(f"pkg/added_{n}.py", 1)], r.plain
                assert "incomplete" not in r.plain, r.plain
        # once it is ready, the last question is answered in full, with no note
        assert await readiness.wait_ready(conn, 120) is None
        r = await run.call("lsp", ask)
        assert not r.is_error and r.data["ready"] is True and "incomplete" not in r.plain, r.plain
        assert [(s["file"], s["line"]) for s in r.data["symbols"]] == [("pkg/added_2.py", 1)], r.plain
