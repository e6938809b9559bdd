"""Previews on a real project: click 8.5.1 with basedpyright, one warm server for the module.

A staged change (`ast_edit`, `lsp_rename` with preview) or a dry run says what it would break, from the
server given the new contents as unsaved documents, and the server is put back to the disk after: nothing is
written, and what is asked after a preview is answered from the disk. Every test leaves the files as it found
them; the test of concurrent calls runs under CPU load (its rounds are those of a busy machine). The first preview
of a fresh run, and a staged change's if_clean, are in tests/lsp/test_lsp_click.py.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import pytest_asyncio
import real_projects
import tether
import tether.files
from tether_lsp import readiness
from tether_lsp.hookspecs import tether_lsp_supervisor

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

UTILS = "src/click/utils.py"
# echo's message loses its default: two callers in files no tool opened break
ECHO_PARAM = {"kind": "typed_default_parameter", "regex": r"^message: object = None$"}
BROKEN = {
    ("src/click/core.py", 1591, "reportCallIssue"),
    ("src/click/termui.py", 1024, "reportCallIssue"),
}
# a cold basedpyright under load takes over 30 s for click's first round
OPTIONS = {"diagnostics_timeout": 90}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def click(tmp_path_factory):
    root = Path(shutil.copytree(real_projects.click_pristine(), tmp_path_factory.mktemp("preview") / "click"))
    async with tether.open_run(root, plugins=[tether.files], options=OPTIONS) as run:
        # previews of a warm server: its first analysis of click over (its progress round ended)
        r = await run.call("lsp", {"action": "symbols", "file": UTILS})
        assert not r.is_error, r.plain
        (conn,) = sup_of(run).connections.values()
        async with asyncio.timeout(150):
            while conn.first_end is None or await readiness.wait_ready(conn, 150) is not None:
                await conn.next_event(1.0)
        yield run, root


def found(r) -> set[tuple[str, int, str | None]]:
    return {(d["file"], d["line"], d["code"]) for d in r.data["preview"]["introduced"]}


def sup_of(run):
    return run.resource(tether_lsp_supervisor)


async def diagnostics(run, file: str) -> list[tuple[int, str]]:
    r = await run.call("lsp", {"action": "diagnostics", "file": file})
    assert not r.is_error, r.plain
    return sorted((d["line"], d["message"]) for d in r.data["diagnostics"])


@pytest.mark.usefixtures("cpu_stress")
async def test_a_query_and_a_second_preview_wait_for_a_preview_and_find_the_disk_after_it(click):
    run, root = click
    text = (root / UTILS).read_text()
    sup = sup_of(run)
    # the overlaid file and an unrelated one, before; one it breaks (never opened before) is asked during it
    earlier = [await diagnostics(run, f) for f in (UTILS, "src/click/formatting.py")]
    broken = text.replace("    message: object = None,", "    message: object,")
    clean = text.replace("    message: object = None,", "    message: object | None = None,")
    # a dry run of a plain write previews the same breakage as ast_edit's (tests/lsp/test_lsp_click.py)
    first = asyncio.create_task(run.call("write", {"path": UTILS, "content": broken, "dry_run": True}))
    async with asyncio.timeout(60):
        while not sup.gate.held:  # the first preview holds the server
            await asyncio.sleep(0.01)
    query = asyncio.create_task(diagnostics(run, "src/click/termui.py"))
    second = asyncio.create_task(run.call("write", {"path": UTILS, "content": clean, "dry_run": True}))
    a, q, b = await asyncio.gather(first, query, second)
    assert found(a) == BROKEN, a.plain
    # asked while the broken contents were in place: answered from the disk
    assert not any("Argument missing" in m for _, m in q), q
    assert q == await diagnostics(run, "src/click/termui.py")
    assert found(b) == set() and b.data["preview"]["unchecked"] == [], b.plain  # never mixed with the first
    assert [await diagnostics(run, f) for f in (UTILS, "src/click/formatting.py")] == earlier
    assert (root / UTILS).read_text() == text


async def test_a_preview_cancelled_mid_round_puts_the_server_back_and_the_next_one_is_whole(
    click, monkeypatch
):
    """A client that cancels a preview while the server holds the unsaved contents (the round not over): the
    server is put back to the disk all the same, the gate is let go, and nothing of the cancelled preview is
    in what is asked after it, nor in the next preview."""
    from tether_lsp.connection import Connection

    run, root = click
    text = (root / UTILS).read_text()
    callers = ("src/click/core.py", "src/click/termui.py")
    earlier = [await diagnostics(run, f) for f in (UTILS, *callers)]
    broken = text.replace("    message: object = None,", "    message: object,")
    overlaid = asyncio.Event()
    real = Connection.overlay

    def spied(self, path, new_text):
        restore = real(self, path, new_text)
        overlaid.set()
        return restore

    monkeypatch.setattr(Connection, "overlay", spied)
    preview = asyncio.create_task(run.call("write", {"path": UTILS, "content": broken, "dry_run": True}))
    async with asyncio.timeout(60):
        await overlaid.wait()  # the server has the broken contents; its round is not over
    preview.cancel()
    with pytest.raises(asyncio.CancelledError):
        await preview
    assert (root / UTILS).read_text() == text
    async with asyncio.timeout(
        120
    ):  # the gate is let go once the server's round after the putting back is over
        after = [await diagnostics(run, f) for f in (UTILS, *callers)]
    assert after == earlier
    again = await run.call("write", {"path": UTILS, "content": broken, "dry_run": True})
    assert found(again) == BROKEN, again.plain
    assert [await diagnostics(run, f) for f in (UTILS, *callers)] == earlier


async def test_a_preview_after_a_shell_edit_of_another_file_claims_none_of_it_and_leaves_the_disk_state(
    click,
):
    """A shell's edit of another file just before a preview: its error is not the preview's doing, and after
    the preview the server answers both files as the disk has them."""
    run, root = click
    text = (root / UTILS).read_text()
    other = root / "src/click/formatting.py"
    pristine = other.read_text()
    earlier = await diagnostics(run, UTILS)
    try:
        other.write_text(pristine + '\nSHELL_ERROR: int = "not an int"\n')  # the shell's own error
        broken = text.replace("    message: object = None,", "    message: object,")
        r = await run.call("write", {"path": UTILS, "content": broken, "dry_run": True})
        assert found(r) == BROKEN, r.plain  # the shell's error is not among them
        shell = [m for _, m in await diagnostics(run, "src/click/formatting.py") if "not an int" in m]
        assert len(shell) == 1, shell
        assert await diagnostics(run, UTILS) == earlier and (root / UTILS).read_text() == text
    finally:
        other.write_text(pristine)
    async with asyncio.timeout(120):  # the shell's revert is seen by a query's refresh
        while any("not an int" in m for _, m in await diagnostics(run, "src/click/formatting.py")):
            await asyncio.sleep(0.2)


async def test_a_previewed_rename_is_staged_with_its_counts_and_refused_once_a_file_changed(click):
    run, root = click
    core = (root / "src/click/core.py").read_text()
    r = await run.call(
        "lsp_rename",
        {"file": UTILS, "line": 52, "symbol": "make_str", "new_name": "make_text", "preview": True},
    )
    assert not r.is_error, r.plain
    assert r.plain.startswith("(proposed) would rename 'make_str' to 'make_text': ")
    files = {f["file"]: f["edits"] for f in r.data["files"]}
    assert files.keys() == {UTILS, "src/click/core.py"} and all(n >= 1 for n in files.values()), files
    assert found(r) == set() and r.data["preview"]["unchecked"] == [], r.plain
    assert "make_text" not in core and "make_text" not in (root / UTILS).read_text()  # nothing written
    (root / "src/click/core.py").write_text(core + "\n")  # a shell edit after the staging
    try:
        refused = await run.call("resolve", {"edit_id": r.data["edit_id"], "action": "accept"})
        assert refused.is_error and refused.data["error"] == "changed_since_staged", refused.plain
        assert "make_text" not in (root / UTILS).read_text()  # all or nothing
    finally:
        (root / "src/click/core.py").write_text(core)


def written(r) -> set[tuple[str, int, str | None]]:
    return {(d["file"], d["line"], d["code"]) for d in (r.data or {}).get("diagnostics", [])}


def spy_notifications(monkeypatch, conn) -> list[str]:
    """The methods of what tether tells the server from now on (didChange, didOpen, watched files, ...)."""
    told: list[str] = []
    real = conn.notify

    def notify(method, params=None):
        told.append(method)
        return real(method, params)

    monkeypatch.setattr(conn, "notify", notify)
    return told


async def test_the_write_of_a_previewed_change_answers_what_the_preview_showed_and_tells_the_server_nothing(
    click, monkeypatch
):
    """A preview's overlays stay in place for the write of the same contents: once the disk holds them, the
    server already has the change, so the write sends nothing and answers the preview's round. The server is
    then as the disk is (broken), and a write back to the old text is a write like any other."""
    run, root = click
    text = (root / UTILS).read_text()
    callers = ("src/click/core.py", "src/click/termui.py")
    earlier = [await diagnostics(run, f) for f in (UTILS, *callers)]
    broken = text.replace("    message: object = None,", "    message: object,")
    p = await run.call("write", {"path": UTILS, "content": broken, "dry_run": True})
    assert found(p) == BROKEN, p.plain
    (conn,) = sup_of(run).connections.values()
    told = spy_notifications(monkeypatch, conn)
    try:
        w = await run.call("write", {"path": UTILS, "content": broken})
        assert not w.is_error and written(w) == BROKEN, w.plain
        assert told == [], told  # the server had the change already: no didChange, no watched-file event
        assert (root / UTILS).read_text() == broken
        now = [await diagnostics(run, f) for f in callers]
        assert all(any("Argument missing" in m for _, m in found_now) for found_now in now), now
    finally:
        back = await run.call("write", {"path": UTILS, "content": text})
    assert not back.is_error and written(back) == set(), back.plain
    assert "textDocument/didChange" in told, told  # that one was told, as every write is
    assert [await diagnostics(run, f) for f in (UTILS, *callers)] == earlier


async def test_a_write_of_other_contents_after_a_preview_answers_its_own_round_not_the_previews(click):
    run, root = click
    text = (root / UTILS).read_text()
    callers = ("src/click/core.py", "src/click/termui.py")
    earlier = [await diagnostics(run, f) for f in (UTILS, *callers)]
    broken = text.replace("    message: object = None,", "    message: object,")
    clean = text.replace("    message: object = None,", "    message: object | None = None,")
    p = await run.call("write", {"path": UTILS, "content": broken, "dry_run": True})
    assert found(p) == BROKEN, p.plain
    try:
        w = await run.call("write", {"path": UTILS, "content": clean})  # the model changed its mind
        assert not w.is_error and written(w) == set(), w.plain
        assert [await diagnostics(run, f) for f in callers] == earlier[1:]
    finally:
        await run.call("write", {"path": UTILS, "content": text})
    assert [await diagnostics(run, f) for f in (UTILS, *callers)] == earlier


async def test_a_previewed_files_write_that_fails_holds_nothing_and_the_next_answers_see_the_disk(click):
    """A write of the previewed file that takes the preview over and then fails (its edit does not apply, so
    no diagnostics are asked after it): the next query is not kept waiting and answers from the disk."""
    run, root = click
    text = (root / UTILS).read_text()
    earlier = await diagnostics(run, UTILS)
    broken = text.replace("    message: object = None,", "    message: object,")
    p = await run.call("write", {"path": UTILS, "content": broken, "dry_run": True})
    assert found(p) == BROKEN, p.plain
    assert sup_of(run).kept is not None  # kept for the write of these contents
    failed = await run.call("edit", {"path": UTILS, "old_string": "no such text anywhere", "new_string": "x"})
    assert failed.is_error, failed.plain
    async with asyncio.timeout(120):
        assert await diagnostics(run, UTILS) == earlier
    assert sup_of(run).kept is None and (root / UTILS).read_text() == text
    r = await run.call("write", {"path": UTILS, "content": broken})
    try:
        assert written(r) == BROKEN, r.plain
    finally:
        await run.call("write", {"path": UTILS, "content": text})
