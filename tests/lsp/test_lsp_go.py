"""gopls on a real project: spf13/pflag from Debian's golang-github-spf13-pflag-dev (a module of its own).

gopls publishes only files that have diagnostics: a clean file it never published is clean, and a
change of `getFlagType`'s signature in flag.go breaks 36 calls in 35 other files at once. The write
tests run under CPU load.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest
import tether
import tether.files
from support import edit, introduced, require_binary
from tether_lsp.hookspecs import tether_lsp_supervisor

SIGNATURE = (
    "func (f *FlagSet) getFlagType(name string, ftype string, convFunc",
    "func (f *FlagSet) getFlagType(name string, ftype string, extra int, convFunc",
)


@pytest.fixture(autouse=True)
def go_tools(monkeypatch):
    gopls = require_binary("gopls", os.path.expanduser("~/go/bin/gopls"))
    require_binary("go")
    monkeypatch.setenv("PATH", f"{os.path.dirname(gopls)}{os.pathsep}{os.environ['PATH']}")


def callers(root) -> set[tuple[str, int]]:
    """(file, line) of every call of getFlagType, read from the source (the 36 the change breaks)."""
    out = set()
    for path in sorted(root.glob("*.go")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if "f.getFlagType(" in line:
                out.add((path.name, n))
    return out


@pytest.mark.usefixtures("cpu_stress")
async def test_a_signature_change_reports_all_36_broken_calls_and_the_revert_says_they_are_clean(pflag_root):
    expected = callers(pflag_root)
    assert len(expected) == 36 and len({f for f, _ in expected}) == 35
    async with tether.open_run(pflag_root, plugins=[tether.files]) as run:
        # previewed first (a dry run: gopls given the unsaved contents): the same 36, nothing written
        text = (pflag_root / "flag.go").read_text()
        r = await run.call("write", {"path": "flag.go", "content": text.replace(*SIGNATURE), "dry_run": True})
        preview = r.data["preview"]
        previewed = {(d["file"], d["line"]) for d in preview["introduced"] if d["severity"] == "error"}
        assert previewed == expected and preview["unchecked"] == [], r.plain
        assert (pflag_root / "flag.go").read_text() == text
        r = await edit(run, "flag.go", *SIGNATURE)
        errors = {(d["file"], d["line"]) for d in r.data["diagnostics"] if d["severity"] == "error"}
        assert errors == expected, r.plain
        assert "This write introduced 36 error(s)" in r.plain
        r = await edit(run, "flag.go", SIGNATURE[1], SIGNATURE[0])
        assert [d for d in r.data.get("diagnostics", []) if d["severity"] == "error"] == [], r.plain
        files = sorted({f for f, _ in expected})
        assert f"no errors any more in 35 other file(s): {', '.join(files[:5])} and 30 more" in r.plain
        # a clean change previews clean
        harmless = text + "\n// a note\n"
        r = await run.call("write", {"path": "flag.go", "content": harmless, "dry_run": True})
        assert r.data["preview"]["introduced"] == [] and r.data["preview"]["unchecked"] == [], r.plain
        # a previewed rename: staged with every file it edits, clean, nothing written
        line = next(
            n for n, t in enumerate(text.splitlines(), 1) if t.startswith("func (f *FlagSet) getFlagType(")
        )
        r = await run.call(
            "lsp_rename",
            {
                "file": "flag.go",
                "line": line,
                "symbol": "getFlagType",
                "new_name": "getFlagKind",
                "preview": True,
            },
        )
        assert not r.is_error and r.data["edit_id"], r.plain
        edits = {f["file"]: f["edits"] for f in r.data["files"]}
        assert edits.keys() == {"flag.go", *files} and sum(edits.values()) == 37, edits
        assert r.data["preview"]["introduced"] == [] and r.data["preview"]["unchecked"] == [], r.plain
        assert (pflag_root / "flag.go").read_text() == text and "getFlagKind" not in (
            pflag_root / "bool.go"
        ).read_text()
        done = await run.call("resolve", {"edit_id": r.data["edit_id"], "action": "discard"})
        assert not done.is_error, done.plain


async def test_the_project_checker_reports_every_broken_call_not_the_first_ten(pflag_root):
    (pflag_root / "flag.go").write_text((pflag_root / "flag.go").read_text().replace(*SIGNATURE))
    async with tether.open_run(pflag_root) as run:
        r = await run.call("lsp", {"action": "diagnostics", "file": "*"})
    assert not r.is_error and r.data is not None, r.plain
    errors = {(d["file"], d["line"]) for d in r.data["diagnostics"] if d["severity"] == "error"}
    assert errors == callers(pflag_root), r.plain
    assert "too many errors" not in r.plain and "NOT complete" not in r.plain
    assert r.plain.startswith("checked with `go vet -gcflags=-e ./...`\n36 error(s)")


class VetWithoutE:
    """A definition whose checker is plain `go vet`: the compiler stops after 10 errors of a package."""

    @tether.hookimpl
    def tether_lsp_servers(self, run):
        from tether_lsp.servers import BUILTIN_SERVERS

        gopls = next(d for d in BUILTIN_SERVERS if d.id == "gopls")
        return [attrs.evolve(gopls, checker=("go", "vet", "./..."))]


async def test_a_checker_that_stopped_says_so_and_its_stop_is_not_an_error(pflag_root):
    (pflag_root / "flag.go").write_text((pflag_root / "flag.go").read_text().replace(*SIGNATURE))
    async with tether.open_run(pflag_root, plugins=[VetWithoutE()]) as run:
        r = await run.call("lsp", {"action": "diagnostics", "file": "*"})
    assert not r.is_error and r.data is not None, r.plain
    assert r.data["total"] == 10 and "too many errors" not in {d["message"] for d in r.data["diagnostics"]}
    (stop,) = r.data["stopped"]
    assert stop.startswith("`go vet ./...` stopped reporting at ") and stop.endswith(" (too many errors)")
    assert "NOT complete: `go vet ./...` stopped reporting at" in r.plain
    assert "there are more errors" in r.plain


async def test_workspace_symbols_at_goplss_own_limit_say_they_may_be_cut(pflag_root):
    async with tether.open_run(pflag_root) as run:
        r = await run.call("lsp", {"action": "symbols", "query": "Flag"})
        assert not r.is_error and r.data is not None, r.plain
        assert r.data["total"] == 100 and r.data["may_be_cut"], r.plain
        assert (
            "[may be cut: gopls returns at most 100 symbols per query; use a more specific query]" in r.plain
        )
        r = await run.call("lsp", {"action": "symbols", "query": "getFlagType"})
        assert r.data is not None, r.plain
        assert not r.data["may_be_cut"] and "may be cut" not in r.plain, r.plain
        assert ("flag.go", 381) in {(s["file"], s["line"]) for s in r.data["symbols"]}


@pytest.fixture
def module_proxy():
    """A Go module proxy on the loopback that has nothing: (its url, the paths asked for)."""
    import http.server
    import threading

    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, format, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        thread.join(10)


@pytest.mark.parametrize("trust", [False, True])
async def test_an_untrusted_root_downloads_no_module_and_no_toolchain(
    tmp_path, samples, monkeypatch, module_proxy, trust
):
    # a checkout requiring a module that is not in the cache: go vet and gopls would fetch it
    root = samples.write_tree(
        tmp_path / "app",
        {
            "go.mod": "module example.com/app\n\ngo 1.19\n\nrequire example.com/dep v1.0.0\n",
            "go.sum": "".join(
                f"example.com/dep v1.0.0{suffix} h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
                for suffix in ("", "/go.mod")
            ),
            "main.go": 'package main\n\nimport "example.com/dep"\n\nfunc main() { dep.Hello() }\n',
        },
    )
    url, asked = module_proxy
    monkeypatch.setenv("GOPROXY", url)
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "modcache"))
    monkeypatch.setenv("GOFLAGS", "-mod=mod")  # a user's setting that lets go change go.mod and fetch
    monkeypatch.setenv("GOSUMDB", "off")
    async with tether.open_run(root, options={"trust": trust}) as run:
        assert run.trusted is trust
        r = await run.call("lsp", {"action": "diagnostics", "file": "*"})
        hover = await run.call("lsp", {"action": "hover", "file": "main.go", "line": 5, "symbol": "main"})
        assert not hover.is_error, hover.plain
        environ = Path(f"/proc/{samples.pid_of(run, 'gopls')}/environ").read_bytes().split(b"\0")
    if trust:  # the control: the same checkout, trusted, does fetch (so the proxy above is the one asked)
        assert any(p.startswith("/example.com/dep/@v/") for p in asked), asked
        return
    assert asked == [], asked
    assert {b"GOTOOLCHAIN=local", b"GOPROXY=off", b"GOVCS=*:off"} <= set(environ)
    assert not r.is_error, r.plain
    assert "main.go:3:8: error: module lookup disabled by GOPROXY=off" in r.plain


class GoplsWithoutItsOption:
    """The built-in gopls started without verboseWorkDoneProgress: it wraps no diagnosis in progress."""

    @tether.hookimpl
    def tether_lsp_servers(self, run):
        from tether_lsp.servers import BUILTIN_SERVERS

        gopls = next(d for d in BUILTIN_SERVERS if d.id == "gopls")
        return [attrs.evolve(gopls, initialization_options=None)]


@pytest.mark.usefixtures("cpu_stress")
@pytest.mark.parametrize("verbose", [True, False], ids=["with-verbose-progress", "without"])
async def test_a_gopls_that_reports_no_diagnosing_progress_has_its_rounds_read_from_its_publishes(
    tmp_path, samples, verbose
):
    """Without the option, every write would wait the progress rule's fallback quiet (8 s) for a round that
    is never shown: the first publish outside any "diagnosing" progress switches that server to the
    document rule, and `status` says so. A gopls that takes the option keeps the progress rule."""
    root = samples.write_tree(
        tmp_path / "app",
        {
            "go.mod": "module example.com/app\n\ngo 1.19\n",
            "a.go": "package app\n\nvar X int = Make()\n",
            "b.go": "package app\n\nfunc Make() int { return 1 }\n",
        },
    )
    plugins = [tether.files] if verbose else [tether.files, GoplsWithoutItsOption()]
    async with tether.open_run(root, plugins=plugins) as run:
        first = await run.call("lsp", {"action": "diagnostics", "file": "a.go"})
        assert first.plain == "no errors or warnings in a.go", first.plain
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        assert conn.rounds == ("progress" if verbose else "document")
        status = await run.call("lsp", {"action": "status"})
        note = "it reports no 'diagnosing' progress, so the end of its rounds is read from its publishes"
        assert (note in status.plain) != verbose, status.plain
        assert status.data is not None and status.data["running"][0]["rounds"] == conn.rounds
        # the writes are answered from complete rounds either way: the written file, then a dependent
        r = await edit(run, "a.go", "var X int = Make()", 'var X int = Make()\nvar Y int = "a"')
        assert introduced(r) == [("a.go", 4, "IncompatibleAssign")], r.plain
        r = await edit(run, "b.go", "func Make() int { return 1 }", 'func Make() string { return "a" }')
        assert introduced(r) == [("a.go", 3, "IncompatibleAssign")], r.plain
        r = await edit(run, "a.go", 'var X int = Make()\nvar Y int = "a"', "var X string = Make()")
        assert introduced(r) == [] and "no errors any more in" not in r.plain, r.plain
        clean = await run.call("lsp", {"action": "diagnostics", "file": "a.go"})
        assert clean.plain == "no errors or warnings in a.go", clean.plain


async def test_a_file_under_testdata_is_said_to_be_unanalysed_not_clean(tmp_path, samples):
    """gopls (as the go tool) ignores testdata/ folders, and those named _* or .*: it reports no errors for a
    file there whatever it holds. The diagnostics and a write's answer say so; a file outside them gets no
    such note."""
    root = samples.write_tree(
        tmp_path / "app",
        {
            "go.mod": "module example.com/app\n\ngo 1.19\n",
            "a.go": "package app\n\nvar X int = 1\n",
            "testdata/x.go": 'package x\n\nvar Y int = "a"\n',
            "_examples/x.go": 'package x\n\nvar Y int = "a"\n',
        },
    )
    note = "gopls does not analyse files under testdata/: their errors are not reported"
    async with tether.open_run(root, plugins=[tether.files]) as run:
        r = await run.call("lsp", {"action": "diagnostics", "file": "testdata/x.go"})
        assert not r.is_error and note in r.plain.splitlines(), r.plain
        r = await run.call("lsp", {"action": "diagnostics", "file": "_examples/x.go"})
        examples = "gopls does not analyse files under _examples/: their errors are not reported"
        assert not r.is_error and examples in r.plain.splitlines(), r.plain
        r = await edit(run, "testdata/x.go", 'var Y int = "a"', 'var Y int = "a"\nvar Z int = "b"')
        assert note in r.plain.splitlines(), r.plain
        r = await run.call("lsp", {"action": "diagnostics", "file": "a.go"})
        assert r.plain == "no errors or warnings in a.go", r.plain
        r = await edit(run, "a.go", "var X int = 1", "var X int = 2")
        assert "testdata" not in r.plain, r.plain
