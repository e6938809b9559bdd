"""Diagnostics on write on a big TypeScript project and a big Go tree, each checked against its own checker.

TypeScript: Cloudflare's SDK 7.3.0 from npm (src/, 1,908 .ts files; its tsconfig's program is the 1,201
files index.ts reaches). tsserver loads the whole project when the first file is opened (22 s under this
load) and checks only what it is asked about: a write asks it who imports the written file and checks at
most lsp_importers_checked of them, saying how many more import it. Go: golang.org/x/tools from Debian
(1,072 .go files, 185 packages, its requirements vendored from Debian's other -dev packages); gopls
re-checks the packages importing the written one by itself.

The checkers run once per session before the CPU load (tsc over the whole project takes 17 s on an idle
core); the writes run under it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import tether
import tether.files
from support import edit, require_binary
from tether_lsp.hookspecs import tether_lsp_supervisor
from tether_lsp.render import uri_to_path

HEADERS = "internal/headers.ts"  # imported by 88 files
BUILD_HEADERS = (
    "export const buildHeaders = (newHeaders: HeadersLike[]): NullableHeaders => {",
    "export const buildHeaders = (newHeaders: HeadersLike[], strict: boolean): NullableHeaders => {",
)
CHECKED = 20  # importers checked per write (tsserver's own number is 60: fewer keep the test short)
TSC_LINE = re.compile(r"^(.+?)\((\d+),\d+\): error TS(\d+): ", re.M)

UTIL = "go/analysis/passes/internal/analysisutil/util.go"
FORMAT = (
    "func Format(fset *token.FileSet, x ast.Expr) string {",
    "func Format(fset *token.FileSet, x ast.Expr, extra int) string {",
)
# an internal package: only packages under go/analysis/passes/ can import it, so vet over those sees every call
PASSES = "./go/analysis/passes/..."
VET_LINE = re.compile(
    r"^(?:vet: )?(\S+\.go):(\d+):\d+: not enough arguments in call to analysisutil\.Format", re.M
)


def broken(r, code: str) -> set[tuple[str, int]]:
    """(file, line) of the errors with ``code`` that the write's answer reports."""
    return {
        (d["file"], d["line"])
        for d in (r.data or {}).get("diagnostics", [])
        if d["severity"] == "error" and str(d.get("code")) == code
    }


@pytest.fixture(scope="session")
def tsc_broken(cloudflare_pristine, tmp_path_factory, samples) -> set[tuple[str, int]]:
    """tsc's TS2554 errors (file, line) over the whole project with buildHeaders broken."""
    import real_projects

    tsc = require_binary("tsc", str(samples.node_bin() / "tsc"))
    root = real_projects.cloudflare_copy(cloudflare_pristine, tmp_path_factory.mktemp("tsc") / "cloudflare")
    path = root / HEADERS
    path.write_text(path.read_text().replace(*BUILD_HEADERS))
    done = subprocess.run(
        [tsc, "--noEmit", "--pretty", "false", "-p", "."],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return {(f, int(line)) for f, line, code in TSC_LINE.findall(done.stdout) if code == "2554"}


def importing(root: Path, rel: str) -> set[str]:
    """The files that name ``rel``'s module in an import or export line, read from the source."""
    module = rel.removesuffix(".ts")
    out = set()
    for path in root.rglob("*.ts"):
        for line in path.read_text(encoding="utf-8").splitlines():
            m = re.match(r"""\s*(?:import|export)\b.*\bfrom\s+['"](\.[^'"]+)['"]""", line)
            if m and (path.parent / m[1]).resolve() == (root / module).resolve():
                out.add(str(path.relative_to(root)))
                break
    return out


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("cpu_stress", "with_node_bin")
async def test_a_breaking_write_on_a_big_typescript_project_reports_what_tsc_finds_in_the_files_it_checked(
    cloudflare_root, tsc_broken, samples
):
    require_binary("typescript-language-server", str(samples.node_bin() / "typescript-language-server"))
    assert len(tsc_broken) > 100 and len({f for f, _ in tsc_broken}) > 80  # the oracle saw the break
    # one request's bound, 5 s here (tsserver answered each in 0.4 s at most under this load), is shorter
    # than its project load (9-22 s): the write waits for the load within diagnostics_timeout, then asks
    options = {"lsp_importers_checked": CHECKED, "diagnostics_timeout": 150, "lsp_request_timeout": 5}
    async with tether.open_run(cloudflare_root, plugins=[tether.files], options=options) as run:
        r = await edit(run, HEADERS, *BUILD_HEADERS)
        assert "pending" not in r.plain and "incomplete" not in r.plain, r.plain
        assert "not compared" not in r.plain, r.plain
        (conn,) = run.resource(tether_lsp_supervisor).connections.values()
        checked = {run.relpath(p) for uri in conn.published if (p := uri_to_path(uri)) is not None}
        assert HEADERS in checked and len(checked) == CHECKED + 1, sorted(checked)
        reported = broken(r, "2554")
        others = {f for f, _ in reported} - {HEADERS}
        assert len(others) >= CHECKED - 2, (
            r.plain
        )  # callers in other files (an importer may use only its types)
        # the oracle: tsc over the whole project, on the files the write checked
        assert reported == {(f, line) for f, line in tsc_broken if f in checked}, r.plain
        # the rest is said, counted and not claimed: every broken file tsc found outside them imports headers.ts
        more = re.search(
            rf"typescript-language-server checks only open files: checked {CHECKED} file\(s\) importing "
            rf"{HEADERS}; at least (\d+) more import it and were not checked: ",
            r.plain,
        )
        assert more is not None, r.plain
        unchecked = {f for f, _ in tsc_broken} - checked
        assert unchecked and unchecked <= importing(cloudflare_root, HEADERS), unchecked
        assert int(more[1]) >= len(unchecked), r.plain

        r = await edit(run, HEADERS, BUILD_HEADERS[1], BUILD_HEADERS[0])
        assert not broken(r, "2554"), r.plain
        assert f"no errors any more in {len(others)} other file(s): " in r.plain, r.plain
        assert "pending" not in r.plain and "incomplete" not in r.plain, r.plain


@pytest.fixture(scope="session")
def vet_broken(tmp_path_factory, samples) -> set[tuple[str, int]]:
    """go vet's broken calls of analysisutil.Format (file, line) with its signature changed."""
    go = require_binary("go")
    root = samples.xtools_copy(tmp_path_factory.mktemp("vet") / "tools")
    path = root / UTIL
    path.write_text(path.read_text().replace(*FORMAT))
    done = subprocess.run(
        [go, "vet", "-gcflags=-e", PASSES], cwd=root, capture_output=True, text=True, timeout=600
    )
    return {(f.removeprefix("./"), int(line)) for f, line in VET_LINE.findall(done.stderr)}


def format_calls(root: Path) -> set[tuple[str, int]]:
    """(file, line) of every call of analysisutil.Format, read from the source."""
    out = set()
    for path in (root / "go").rglob("*.go"):
        if "testdata" not in path.parts:
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if "analysisutil.Format(" in line:
                    out.add((str(path.relative_to(root)), n))
    return out


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("cpu_stress")
async def test_a_breaking_write_on_a_big_go_tree_reports_every_call_go_vet_finds(xtools_root, vet_broken):
    require_binary("gopls")
    expected = format_calls(xtools_root)
    assert vet_broken == expected and len({f for f, _ in expected}) >= 5, (vet_broken, expected)
    async with tether.open_run(
        xtools_root, plugins=[tether.files], options={"diagnostics_timeout": 150}
    ) as run:
        r = await edit(run, UTIL, *FORMAT)
        assert "pending" not in r.plain and "incomplete" not in r.plain, r.plain
        errors = {(d["file"], d["line"]) for d in r.data["diagnostics"] if d["severity"] == "error"}
        assert errors == expected, r.plain
        r = await edit(run, UTIL, FORMAT[1], FORMAT[0])
        assert not [d for d in r.data.get("diagnostics", []) if d["severity"] == "error"], r.plain
        assert f"no errors any more in {len({f for f, _ in expected})} other file(s): " in r.plain, r.plain
