"""typescript-language-server on a real project: rxjs 7.8.2's sources from npm (src/, 251 files; the root
tsconfig.json has no include, so the whole tree is one project).

Each test runs on its own copy with a fresh run (a cold tsserver); the diagnostics-on-write and first-query
tests under CPU load: what is said must hold on a busy machine.
"""

from __future__ import annotations

import pytest
import tether
import tether.files
from support import edit, introduced, require_binary

MAP = "src/internal/operators/map.ts"
VALID_DATE = (
    "export function isValidDate(value: any): value is Date {",
    "export function isValidDate(value: any, strict: boolean): value is Date {",
)
AJAX = "src/internal/ajax/ajax.ts"  # 622 lines
SIGNATURE = "export function map<T, R>(project: (value: T, index: number) => R, thisArg?: any): OperatorFunction<T, R> {"
BREAK = (SIGNATURE, SIGNATURE + "\n  const count: number = project;")


@pytest.fixture
def ts_root(rxjs_root, samples, with_node_bin):
    require_binary("typescript-language-server", str(samples.node_bin() / "typescript-language-server"))
    return rxjs_root


@pytest.mark.usefixtures("cpu_stress")
async def test_a_breaking_first_write_is_reported_and_a_clean_one_ends_clean(ts_root):
    async with tether.open_run(ts_root, plugins=[tether.files]) as run:
        # the file was never opened: its baseline is tsserver's complete check, not the empty syntax round
        r = await edit(run, MAP, *BREAK)
        assert (MAP, 48, "2322") in introduced(r), r.plain
        assert "not assignable to type 'number'" in r.plain
        assert "pending" not in r.plain and "incomplete" not in r.plain, r.plain
        # the fix republishes an empty list; a clean edit of a clean file publishes nothing at all
        r = await edit(run, MAP, BREAK[1], BREAK[0])
        assert introduced(r) == [] and "pending" not in r.plain, r.plain
        r = await edit(run, MAP, "let index = 0;", "let index = 0; // counts values")
        assert introduced(r) == [] and "pending" not in r.plain and "incomplete" not in r.plain, r.plain
        # and the file's diagnostics are answered, not "still pending" for ever
        r = await run.call("lsp", {"action": "diagnostics", "file": MAP})
        assert not r.is_error, r.plain
        assert r.data["diagnostics"] == [], r.plain


@pytest.mark.usefixtures("cpu_stress")
async def test_old_errors_are_never_reported_as_new_and_diagnostics_lists_them_all(ts_root):
    # 23 errors written behind the server's back before the run (the test/main.ts had 23): old ones
    path = ts_root / AJAX
    text = path.read_text()
    first = len(text.splitlines()) + 2
    path.write_text(text + "\n" + "".join(f"export const old{n}: number = 'x{n}';\n" for n in range(23)))
    async with tether.open_run(ts_root, plugins=[tether.files]) as run:
        r = await edit(
            run,
            AJAX,
            "export const old0: number",
            "export const new0: string = 1;\nexport const old0: number",
        )
        assert introduced(r) == [(AJAX, first, "2322")], r.plain
        r = await run.call("lsp", {"action": "diagnostics", "file": AJAX})
        assert not r.is_error, r.plain
        errors = [(d["line"], d["code"]) for d in r.data["diagnostics"] if d["severity"] == "error"]
        assert errors == [(first + n, "2322") for n in range(24)], r.plain


@pytest.mark.usefixtures("cpu_stress")
async def test_a_signature_change_reports_the_broken_callers_in_files_never_opened(ts_root):
    # typescript-language-server checks only open files: the files importing isDate.ts (13, through
    # re-exports) are asked of tsserver
    broken = [
        ("src/internal/observable/timer.ts", 159, "2554"),
        ("src/internal/operators/timeout.ts", 316, "2554"),
        ("src/internal/operators/timeoutWith.ts", 93, "2554"),
    ]
    path = ts_root / "src/internal/util/isDate.ts"
    text = path.read_text()
    async with tether.open_run(ts_root, plugins=[tether.files]) as run:
        # previewed first (a dry run: tsserver given the unsaved contents): the same three, nothing written
        r = await run.call(
            "write",
            {"path": "src/internal/util/isDate.ts", "content": text.replace(*VALID_DATE), "dry_run": True},
        )
        preview = r.data["preview"]
        assert sorted((d["file"], d["line"], d["code"]) for d in preview["introduced"]) == broken, r.plain
        assert preview["unchecked"] == [] and path.read_text() == text, r.plain
        r = await edit(run, "src/internal/util/isDate.ts", *VALID_DATE)
        assert sorted(introduced(r)) == broken, r.plain
        assert "incomplete" not in r.plain, r.plain
        r = await edit(run, "src/internal/util/isDate.ts", VALID_DATE[1], VALID_DATE[0])
        assert introduced(r) == [] and "also changed" not in r.plain, r.plain
        # a clean change previews clean
        r = await run.call(
            "write",
            {"path": "src/internal/util/isDate.ts", "content": text + "\n// a note\n", "dry_run": True},
        )
        assert r.data["preview"]["introduced"] == [] and r.data["preview"]["unchecked"] == [], r.plain
        # a previewed rename: staged with the callers' files, clean, nothing written
        line = next(n for n, t in enumerate(text.splitlines(), 1) if t.startswith(VALID_DATE[0]))
        rename = {"line": line, "symbol": "isValidDate", "new_name": "isValidDay", "preview": True}
        r = await run.call("lsp_rename", {"file": "src/internal/util/isDate.ts", **rename})
        assert not r.is_error and r.data["edit_id"], r.plain
        edits = {f["file"]: f["edits"] for f in r.data["files"]}
        assert {"src/internal/util/isDate.ts", *(f for f, _, _ in broken)} <= edits.keys(), edits
        assert r.data["preview"]["introduced"] == [] and r.data["preview"]["unchecked"] == [], r.plain
        assert path.read_text() == text
        assert "isValidDay" not in (ts_root / "src/internal/observable/timer.ts").read_text()
        done = await run.call("resolve", {"edit_id": r.data["edit_id"], "action": "discard"})
        assert not done.is_error, done.plain


@pytest.mark.usefixtures("cpu_stress")
async def test_importers_are_asked_one_at_a_time_and_one_unanswered_before_the_write_is_said(
    ts_root, monkeypatch
):
    # tsserver answers one request at a time: asked all at once, the last importers' bounds ran out behind the
    # others' on a loaded machine; and an importer with no answer before the write was then dropped, unsaid
    from tether_lsp.connection import Connection

    real_ask, real_pull = Connection.tsserver, Connection.pull_path
    flying, most, refused = [0], [0], []

    async def counted(self, command, args, timeout):
        flying[0] += 1
        most[0] = max(most[0], flying[0])
        try:
            return await real_ask(self, command, args, timeout)
        finally:
            flying[0] -= 1

    async def unanswered_once(self, path, *args, **kwargs):
        if path.name == "timer.ts" and not refused:
            refused.append(path)
            return None  # as a request that ran out of time
        return await real_pull(self, path, *args, **kwargs)

    monkeypatch.setattr(Connection, "tsserver", counted)
    monkeypatch.setattr(Connection, "pull_path", unanswered_once)
    async with tether.open_run(ts_root, plugins=[tether.files]) as run:
        r = await edit(run, "src/internal/util/isDate.ts", *VALID_DATE)
        assert refused, r.plain
        # timer.ts had no baseline: not claimed, and said by name
        assert sorted(introduced(r)) == [
            ("src/internal/operators/timeout.ts", 316, "2554"),
            ("src/internal/operators/timeoutWith.ts", 93, "2554"),
        ], r.plain
        assert (
            "typescript-language-server did not answer for 1 file(s) importing src/internal/util/isDate.ts "
            "before the change"
        ) in r.plain, r.plain
        assert "so they were not compared: src/internal/observable/timer.ts" in r.plain, r.plain
    assert most[0] <= len(("syntactic", "semantic")), most  # one file's two requests at a time


@pytest.mark.usefixtures("cpu_stress")
async def test_the_first_definition_and_references_of_a_fresh_run_come_from_the_loaded_project(ts_root):
    async with tether.open_run(ts_root) as run:
        r = await run.call("lsp", {"action": "definition", "file": MAP, "line": 48, "symbol": "operate"})
        assert not r.is_error, r.plain
        # not the import line of map.ts (what the syntax-only server answers while the project loads)
        assert [(x["file"], x["line"]) for x in r.data["locations"]] == [("src/internal/util/lift.ts", 17)], (
            r.plain
        )
    async with tether.open_run(ts_root) as run:
        r = await run.call("lsp", {"action": "references", "file": MAP, "line": 48, "symbol": "operate"})
        assert not r.is_error, r.plain
        # operate is imported and called by about 70 operators; the open file alone has 2
        assert r.data["total"] > 100 or r.data["ready"] is False, r.plain


async def test_workspace_symbols_before_any_file_is_open_search_the_project(ts_root):
    async with tether.open_run(ts_root) as run:
        r = await run.call("lsp", {"action": "symbols", "query": "isObservable"})
        assert not r.is_error, r.plain
        assert "No Project" not in r.plain and " at " not in r.plain, r.plain
        assert "src/internal/util/isObservable.ts:9:" in r.plain, r.plain


async def test_a_rename_of_an_exported_name_says_the_public_name_was_kept(ts_root):
    async with tether.open_run(ts_root, plugins=[tether.files]) as run:
        r = await run.call(
            "lsp_rename",
            {
                "file": "src/internal/util/isObservable.ts",
                "line": 9,
                "symbol": "isObservable",
                "new_name": "isObservableValue",
            },
        )
        assert not r.is_error, r.plain
        assert "kept the public name: 'isObservable'" in r.plain, r.plain
        assert "src/index.ts:48: isObservableValue as isObservable" in r.plain, r.plain
        assert [(k["file"], k["line"]) for k in r.data["kept_names"]] == [("src/index.ts", 48)]
        assert {"file": "src/index.ts", "line": 48} not in r.data["not_renamed"]  # said once, as the alias
    index = (ts_root / "src/index.ts").read_text().splitlines()
    assert index[47] == "export { isObservableValue as isObservable } from './internal/util/isObservable';"


async def test_an_outline_is_in_line_order_without_the_locals_of_functions(ts_root):
    async with tether.open_run(ts_root) as run:
        r = await run.call("lsp", {"action": "symbols", "file": "src/internal/operators/timeout.ts"})
        assert not r.is_error, r.plain
        rows = [(s["name"], s["kind"], s["line"], s["depth"]) for s in r.data["symbols"]]
        assert [line for *_, line, depth in rows if depth == 0] == sorted(
            line for *_, line, depth in rows if depth == 0
        ), r.plain  # tsserver lists them alphabetically
        assert rows[:2] == [("TimeoutConfig", "interface", 12, 0), ("each", "property", 16, 1)], r.plain
        names = {name for name, *_ in rows}
        # locals of timeout()'s body (tsserver lists them, and the callbacks it passes, as its children)
        assert not names & {"originalSourceSubscription", "startTimer", "timerSubscription", "_with"}, r.plain
        assert not any("callback" in name for name in names), r.plain
        assert ("timeoutErrorFactory", "function", 401, 0) in rows, r.plain
