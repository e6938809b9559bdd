"""Supervising real servers: lazy start, restart after death, resync, timeouts, availability, shutdown."""

from __future__ import annotations

import os
import re
import shutil
import signal
import time

import attrs
import psutil
import tether
from tether.hookspecs import hookimpl
from tether.options import CoreOptions
from tether_lsp.hookspecs import tether_lsp_supervisor
from tether_lsp.options import LspOptions
from tether_lsp.servers import BUILTIN_SERVERS, PY_MARKERS


async def test_nothing_starts_before_the_first_query_and_nothing_is_left_after_close(
    py_root, no_leftover_processes
):
    async with tether.open_run(py_root) as run:
        sup = run.resource(tether_lsp_supervisor)
        assert sup.connections == {}
        r = await run.call("lsp", {"action": "status"})
        assert "running: none" in r.plain
        r = await run.call("lsp", {"action": "hover", "file": "pkg/util.py", "line": 1, "symbol": "greet"})
        assert not r.is_error, r.plain
        (conn,) = sup.connections.values()
        tree = [conn.pid] + [c.pid for c in psutil.Process(conn.pid).children(recursive=True)]
    for pid in tree:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_a_server_killed_mid_run_is_restarted_with_its_documents(
    py_root, samples, no_leftover_processes
):
    async with tether.open_run(py_root) as run:
        r = await run.call(
            "lsp", {"action": "definition", "file": "pkg/main.py", "line": 7, "symbol": "greet"}
        )
        assert not r.is_error, r.plain
        old = samples.pid_of(run)
        os.killpg(os.getpgid(old), signal.SIGKILL)
        psutil.Process(old).wait(5) if psutil.pid_exists(old) else None
        r = await run.call(
            "lsp", {"action": "references", "file": "pkg/util.py", "line": 1, "symbol": "greet"}
        )
        assert not r.is_error, r.plain
        assert r.data["total"] >= 8
        new = samples.pid_of(run)
        assert new != old
        r = await run.call("lsp", {"action": "status"})
        (running,) = r.data["running"]
        assert running["restarts"] == 1 and running["pid"] == new
        # the documents open before the crash were re-opened in the new server
        assert running["open_documents"] == 2


async def test_files_changed_on_disk_behind_the_servers_back_are_seen(py_root):
    async with tether.open_run(py_root) as run:
        r = await run.call(
            "lsp", {"action": "definition", "file": "pkg/main.py", "line": 7, "symbol": "greet"}
        )
        assert r.data["locations"][0]["line"] == 1
        # a shell edits the never-opened definition file: two lines above greet
        util = py_root / "pkg/util.py"
        util.write_text("import os\nimport sys\n" + util.read_text())
        r = await run.call(
            "lsp", {"action": "definition", "file": "pkg/main.py", "line": 7, "symbol": "greet"}
        )
        assert r.data["locations"] == [
            {"file": "pkg/util.py", "line": 3, "column": 5, "text": "def greet(name: str) -> str:"}
        ]
        # and the open file itself, rewritten by a shell: the new line 1 is asked about
        main = py_root / "pkg/main.py"
        main.write_text("from pkg.util import Greeter as G\n" + main.read_text())
        r = await run.call("lsp", {"action": "definition", "file": "pkg/main.py", "line": 1, "symbol": "G"})
        assert not r.is_error, r.plain
        assert (r.data["locations"][0]["file"], r.data["locations"][0]["line"]) == ("pkg/util.py", 8)
        r = await run.call("lsp", {"action": "diagnostics", "file": "pkg/main.py"})
        assert [d["line"] for d in r.data["diagnostics"]] == [8]  # the old error, one line down


def set_options(run, **changes):
    """Options are structured once at open; a test that changes one mid-run structures them again."""
    given = {**attrs.asdict(run.options.of(CoreOptions)), **attrs.asdict(run.options.of(LspOptions))}
    run.options = run.option_registry.structure({**given, **changes}, run.root, set())


async def test_a_request_that_times_out_says_so_and_the_server_stays_usable(py_root, samples):
    """The server is stopped (SIGSTOP) while it is asked, so no answer can come within the timeout whatever
    the machine's load: with a timeout of 0.1 ms instead, a loaded machine's loop woke after the answer was
    in, twenty times in a row, and the test saw no timeout."""
    async with tether.open_run(py_root) as run:
        r = await run.call("lsp", {"action": "hover", "file": "pkg/util.py", "line": 1, "symbol": "greet"})
        assert not r.is_error
        set_options(run, lsp_request_timeout=1.0)
        top = psutil.Process(samples.pid_of(run))
        server = [top, *top.children(recursive=True)]  # basedpyright's launcher and its Node
        for p in server:
            p.suspend()
        try:
            t0 = time.monotonic()
            r = await run.call(
                "lsp", {"action": "references", "file": "pkg/util.py", "line": 1, "symbol": "greet"}
            )
            assert time.monotonic() - t0 < 30  # the timeout's, not the default 30 s
        finally:
            for p in server:
                p.resume()
        assert r.is_error, r.plain
        assert "basedpyright timed out: textDocument/references got no answer within 1 s" in r.plain, r.plain
        assert "lsp_request_timeout" in r.plain and r.data["error"] == "timeout"
        set_options(run, lsp_request_timeout=30)
        r = await run.call(
            "lsp", {"action": "references", "file": "pkg/util.py", "line": 1, "symbol": "greet"}
        )
        assert not r.is_error and r.data["total"] >= 8


async def test_reload_restarts_the_servers_of_the_root(py_root, samples):
    async with tether.open_run(py_root) as run:
        await run.call("lsp", {"action": "hover", "file": "pkg/util.py", "line": 1, "symbol": "greet"})
        old = samples.pid_of(run)
        r = await run.call("lsp", {"action": "reload"})
        assert not r.is_error and r.data["restarted"] == ["basedpyright for ."]
        assert samples.pid_of(run) != old
        assert not psutil.pid_exists(old) or psutil.Process(old).status() == psutil.STATUS_ZOMBIE
        r = await run.call("lsp", {"action": "hover", "file": "pkg/util.py", "line": 1, "symbol": "greet"})
        assert not r.is_error


async def test_no_root_marker_is_reported_by_status_and_by_a_query(tmp_path, samples):
    root = samples.write_tree(tmp_path / "bare", {"a.py": "x = 1\n"})
    async with tether.open_run(root) as run:
        r = await run.call("lsp", {"action": "status"})
        bp = next(s for s in r.data["servers"] if s["id"] == "basedpyright")
        assert not bp["available"]
        assert bp["reason"] == "no root marker (looked for " + ", ".join(PY_MARKERS) + ")"
        assert (
            "basedpyright (python): unavailable: no root marker (looked for pyproject.toml, setup.py, requirements.txt"
            in r.plain
        )
        r = await run.call("lsp", {"action": "hover", "file": "a.py", "line": 1, "symbol": "x"})
        assert r.is_error and "basedpyright: no root marker" in r.plain
        assert run.resource(tether_lsp_supervisor).connections == {}


class MissingBinary:
    """A third party's definition replacing the built-in basedpyright by id, with a binary that is not there."""

    @hookimpl
    def tether_lsp_servers(self, run):
        base = next(d for d in BUILTIN_SERVERS if d.id == "basedpyright")
        return [attrs.evolve(base, command=("no-such-langserver-xyz", "--stdio"))]


async def test_binary_missing_is_reported_by_status(py_root):
    async with tether.open_run(py_root, plugins=[MissingBinary()]) as run:
        r = await run.call("lsp", {"action": "status"})
        bp = next(s for s in r.data["servers"] if s["id"] == "basedpyright")
        # tether-lsp alone does not bring basedpyright (and its Node): the reason names the extra that does
        assert (
            bp["reason"]
            == (
                'binary missing: no-such-langserver-xyz (pip install "tether-lsp[basedpyright]" '
                "(tether[lsp] and tether[all] include it))"
            )
            and bp["root"] == "."
        )
        r = await run.call(
            "lsp", {"action": "definition", "file": "pkg/main.py", "line": 7, "symbol": "greet"}
        )
        assert r.is_error and "binary missing: no-such-langserver-xyz" in r.plain


class TyAsBasedpyright:
    """A third party adds a definition: ty's server for Python files, preferred through lsp_servers."""

    @hookimpl
    def tether_lsp_servers(self, run):
        from tether_lsp.servers import ServerDef

        return [
            ServerDef(
                id="ty-custom",
                languages=("python",),
                extensions=(".py",),
                root_markers=("pyproject.toml",),
                command=("ty", "server"),
                ready="initialize",
            )
        ]


async def test_a_definition_registered_by_a_plugin_is_used_and_ty_initializes_without_hanging(
    py_root, no_leftover_processes
):
    # pygls with cattrs >= 25 cannot parse ty's initialize reply and never completes the request: this
    # start would then fail after lsp_start_timeout instead of answering
    async with tether.open_run(
        py_root, plugins=[TyAsBasedpyright()], options={"lsp_servers": ["ty-custom"], "lsp_start_timeout": 20}
    ) as run:
        t0 = time.monotonic()
        r = await run.call("lsp", {"action": "hover", "file": "pkg/util.py", "line": 8, "symbol": "greet"})
        assert not r.is_error, r.plain
        assert time.monotonic() - t0 < 15
        assert "str" in r.plain
        r = await run.call("lsp", {"action": "status"})
        assert [x["server"] for x in r.data["running"]] == ["ty-custom"]
        r = await run.call("lsp", {"action": "diagnostics", "file": "pkg/main.py"})  # ty pulls diagnostics
        assert not r.is_error, r.plain
        assert [d["line"] for d in r.data["diagnostics"] if d["severity"] == "error"] == [7]


def test_the_newest_cattrs_is_the_one_under_test():
    # the initialize test above is the one that hung with cattrs >= 25 before tether_lsp.converter:
    # it must run against a current cattrs, not one held back (tether-lsp pins no upper bound)
    from importlib.metadata import requires, version

    assert int(version("cattrs").split(".")[0]) >= 25
    assert not any(r.startswith("cattrs") and "<" in r for r in requires("tether-lsp") or ())


def _replacing_basedpyright(*command):
    class Plugin:
        @hookimpl
        def tether_lsp_servers(self, run):
            base = next(d for d in BUILTIN_SERVERS if d.id == "basedpyright")
            return [attrs.evolve(base, command=command)]

    return Plugin()


async def test_a_server_that_exits_at_start_is_reported_and_not_retried_on_every_write(
    py_root, no_leftover_processes
):
    plugin = _replacing_basedpyright("sh", "-c", "echo boom: no interpreter >&2; exit 3")
    async with tether.open_run(py_root, plugins=[plugin, tether.files]) as run:
        r = await run.call("lsp", {"action": "hover", "file": "pkg/util.py", "line": 1, "symbol": "greet"})
        assert (
            r.is_error and "basedpyright exited during startup (exit code 3): boom: no interpreter" in r.plain
        )
        t0 = time.monotonic()
        for i in range(3):
            r = await run.call("write", {"path": "pkg/new.py", "content": f"x = {i}\n"})
            assert not r.is_error and "introduced" not in r.plain
        assert time.monotonic() - t0 < 1.5


async def test_a_server_that_never_answers_initialize_times_out_and_is_killed(py_root, no_leftover_processes):
    plugin = _replacing_basedpyright("sleep", "30")
    async with tether.open_run(py_root, plugins=[plugin], options={"lsp_start_timeout": 1}) as run:
        t0 = time.monotonic()
        r = await run.call("lsp", {"action": "hover", "file": "pkg/util.py", "line": 1, "symbol": "greet"})
        assert r.is_error and "basedpyright did not answer initialize within 1 s" in r.plain, r.plain
        assert time.monotonic() - t0 < 5
        assert run.resource(tether_lsp_supervisor).connections == {}


async def test_an_empty_answer_while_the_server_reports_indexing_says_retry(py_root):
    async with tether.open_run(py_root) as run:
        args = {
            "action": "definition",
            "file": "pkg/util.py",
            "line": 2,
            "symbol": "Say",
        }  # in a docstring: no definition
        r = await run.call("lsp", args)
        assert not r.is_error and r.plain == "no definition found for 'Say' at pkg/util.py:2"
        assert r.data["ready"] is True
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        conn.progress_tokens.add("indexing")  # as a $/progress begin without its end would leave it
        r = await run.call("lsp", {**args, "line": 1, "symbol": "greet"} | {"action": "hover"})
        assert not r.is_error and r.data["ready"] is False, r.plain
        assert re.fullmatch(
            r"basedpyright still analysing the project \(\d+ s since it started\): this answer may be "
            r"incomplete; ask again in a few seconds",
            r.plain.splitlines()[-1],
        ), r.plain
        r = await run.call("lsp", args)
        assert r.is_error and r.data["error"] == "indexing" and r.data["ready"] is False, r.plain
        assert r.plain.splitlines()[0] == "basedpyright answered no definitions yet", r.plain
        assert r.plain.endswith("this answer may be incomplete; ask again in a few seconds"), r.plain


async def test_a_server_flooding_stderr_does_not_stall(py_root, no_leftover_processes):
    # 4 MB on stderr before the server even starts: a pipe nobody reads fills at 64 KB and the server
    # blocks writing to it, so initialize would never be answered
    import sys
    from pathlib import Path

    langserver = Path(sys.executable).parent / "basedpyright-langserver"
    flood = f"head -c 4000000 /dev/zero | tr '\\0' x >&2; exec {langserver} --stdio"
    async with tether.open_run(
        py_root, plugins=[_replacing_basedpyright("sh", "-c", flood)], options={"lsp_start_timeout": 20}
    ) as run:
        r = await run.call(
            "lsp", {"action": "definition", "file": "pkg/main.py", "line": 7, "symbol": "greet"}
        )
        assert not r.is_error, r.plain
        assert r.data["locations"][0]["file"] == "pkg/util.py"


async def test_in_a_tree_too_large_to_scan_per_query_a_poller_sees_shell_edits(py_root, monkeypatch):
    import asyncio

    import tether_lsp.watching

    monkeypatch.setattr(tether_lsp.watching, "SYNC_SCAN_BUDGET", 0.0)  # any tree counts as large
    async with tether.open_run(py_root) as run:
        r = await run.call(
            "lsp", {"action": "definition", "file": "pkg/main.py", "line": 7, "symbol": "greet"}
        )
        assert r.data["locations"][0]["line"] == 1
        r = await run.call("lsp", {"action": "status"})
        assert r.data["running"][0]["file_sync"] == "polled every 1 s (large tree)"
        util = py_root / "pkg/util.py"
        util.write_text("import os\n" + util.read_text())
        for _ in range(40):
            await asyncio.sleep(0.1)
            r = await run.call(
                "lsp", {"action": "definition", "file": "pkg/main.py", "line": 7, "symbol": "greet"}
            )
            if r.data["locations"][0]["line"] == 2:
                break
        assert r.data["locations"][0]["line"] == 2


class ProxyWithoutComponent:
    """Like ~/.cargo/bin/rust-analyzer from rustup without the component: present, but fails --version."""

    @hookimpl
    def tether_lsp_servers(self, run):
        from tether_lsp.servers import ServerDef

        return [
            ServerDef(
                id="fake-ra",
                languages=("rust",),
                extensions=(".rs",),
                root_markers=("Cargo.toml",),
                command=("fake-ra",),
            )
        ]


async def test_a_binary_that_fails_its_version_query_is_not_usable(tmp_path, samples):
    root = samples.write_tree(
        tmp_path / "rs", {"Cargo.toml": "[package]\nname = 'x'\n", "src/main.rs": "fn main() {}\n"}
    )
    script = root / ".venv/bin/fake-ra"  # project-local bin directories are looked at first
    script.parent.mkdir(parents=True)
    script.write_text(
        "#!/bin/sh\necho \"error: Unknown binary 'rust-analyzer' in official toolchain 'stable'\" >&2\nexit 1\n"
    )
    script.chmod(0o755)
    async with tether.open_run(root, plugins=[ProxyWithoutComponent()]) as run:
        r = await run.call("lsp", {"action": "status"})
        fake = next(s for s in r.data["servers"] if s["id"] == "fake-ra")
        assert fake["binary"] == str(script)
        assert fake["reason"] == (
            "binary does not work: `fake-ra --version` failed (exit 1): "
            "error: Unknown binary 'rust-analyzer' in official toolchain 'stable'"
        )
        r = await run.call("lsp", {"action": "hover", "file": "src/main.rs", "line": 1, "symbol": "main"})
        assert r.is_error and "fake-ra: binary does not work" in r.plain


async def test_a_missing_typescript_server_says_how_to_install_it(tmp_path, monkeypatch):
    root = tmp_path / "ts"
    root.mkdir()
    (root / "tsconfig.json").write_text("{}\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    async with tether.open_run(root) as run:
        r = await run.call("lsp", {"action": "status"})
        (ts,) = [s for s in r.data["servers"] if s["id"] == "typescript-language-server"]
        assert (
            ts["reason"]
            == "binary missing: typescript-language-server (npm i -D typescript-language-server typescript)"
        )


async def test_an_optional_argument_is_given_only_to_a_binary_that_knows_it(tmp_path):
    """clangd's --use-dirty-headers (a preview's header read from its unsaved contents by the includers) is
    hidden and not in every clangd: one that does not list it would refuse to start with it."""
    from tether_lsp.servers import BUILTIN_SERVERS, supported_args

    clangd = next(d for d in BUILTIN_SERVERS if d.id == "clangd")
    older, newer = tmp_path / "older-clangd", tmp_path / "newer-clangd"
    older.write_text("#!/bin/sh\necho '  --log=<value>   - Verbosity of log messages written to stderr'\n")
    newer.write_text(
        "#!/bin/sh\necho '  --use-dirty-headers   - Use files open in the editor when parsing headers'\n"
    )
    for script in (older, newer):
        script.chmod(0o755)
    async with tether.open_run(tmp_path) as run:
        assert await supported_args(run, clangd, str(older)) == ()
        assert await supported_args(run, clangd, str(newer)) == ("--use-dirty-headers",)
        assert await supported_args(run, clangd, str(tmp_path / "missing")) == ()
        if (real := shutil.which("clangd")) is not None:  # Debian's clangd 14 knows it
            assert await supported_args(run, clangd, real) == ("--use-dirty-headers",)
