"""The files a write can break, for a server that checks only open documents (clangd, tsserver).

clangd diagnoses only the documents it has open: a changed prototype in cJSON's `cJSON.h` breaks
calls in `cJSON.c` and `cJSON_Utils.c`, and clangd says so only when those are open. So before a
header is written, the source files that include it, directly or through other headers, are found
with one bounded read of the server's files (`Watcher.scan`: at most SCAN_CAP files; files over
READ_BYTES are not read) and opened; after the write each is closed and opened again, because clangd
rebuilds an open file on its header's save only when the include is in its preamble, and not at all
for the same text sent again (cJSON_Utils.c kept its old diagnostics). The write's baseline and its
answer then cover them like written files. Its answer says, one line each, how many includers were
not opened (over OPEN_CAP, or not text clangd can be given), which files were too big to read, and
when the scan stopped at its cap.

The files looked at are those of the compilation database (`compile_commands.json` at the server's
root or in `build/`) when there is one: the project's own build, not every file clangd could guess
flags for; otherwise every source file under the root. An include is matched by name:
`#include "x/y.h"` names every header whose path ends with `x/y.h`; a same-named header elsewhere can
open a file too many, which costs a parse and claims nothing.

A server in open-files mode (`Connection.open_files`: basedpyright on a program over the run option
`lsp_open_files_above` files) checks only open documents too: before a Python file is written, the
files importing it (`tether_lsp.imports`, nearest first) are opened, at most the run option `lsp_importers_checked`, and stay
open for the writes after it (at most KEEP_OPEN, the least recently written-for closed first): the
server re-checks an open file when a module it imports changes, so they are not reopened. The answer
says how many were checked and how many more import the file and were not.

typescript-language-server (tsserver) can be asked instead of read: `importers` are the files that
import the written ones, directly or through files importing them (re-exports), from tsserver's
`fileReferences`; a write asks tsserver for their diagnostics before and after it without opening them
(`Connection.pull_path`), at most `importers_checked` (tsserver's own 60) and the answer counts the rest
in the same note as basedpyright's (`importers_note`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from tether_lsp import render
from tether_lsp.connection import Connection, RequestTimeout, ServerError
from tether_lsp.messages import message_field
from tether_lsp.options import LspOptions
from tether_lsp.watching import SCAN_CAP

if TYPE_CHECKING:
    from tether_lsp.supervisor import Supervisor

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\n]+)[>"]', re.MULTILINE)
OPEN_CAP = 20  # dependents opened for one write; the rest are named as not checked
IMPORTERS_CAP = 60  # files importing a written TypeScript file that a write asks about
KEEP_OPEN = 30  # importers kept open between writes by an open-files server; the oldest are closed first
READ_BYTES = 2_000_000  # a bigger file is not read for its includes


def _names(include: str, header: Path) -> bool:
    parts = [p for p in Path(include).parts if p not in (".", "..")]
    return bool(parts) and header.parts[-len(parts) :] == tuple(parts)


def _built(root: Path) -> set[Path] | None:
    """The files of the compilation database at ``root`` (or ``root/build``); None when there is none."""
    import json

    for where in (root / "compile_commands.json", root / "build" / "compile_commands.json"):
        try:
            if where.stat().st_size > 50 * READ_BYTES:
                return None
            entries = json.loads(where.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(entries, list):
            return None
        out = set()
        for e in entries:
            if isinstance(e, dict) and isinstance(e.get("file"), str):
                out.add((Path(str(e.get("directory") or where.parent)) / e["file"]).resolve())
        return out
    return None


@attrs.frozen
class Includers:
    files: list[Path]  # the non-header files that include the header: at most OPEN_CAP, sorted
    more: int  # how many more include it
    unread: list[Path]  # files over READ_BYTES, not read: whether they include it is not known
    scan_cut: bool  # the server's scan stopped at SCAN_CAP files: files past it were not read


def includers(conn: Connection, header: Path) -> Includers:
    """The files that include ``header``, directly or through other headers, and what was not read."""
    headers = conn.server.header_extensions
    built = _built(conn.root)
    scanned = conn.watcher.scan()
    includes: dict[Path, list[str]] = {}
    unread = []
    for path in scanned:
        if built is not None and path.suffix.lower() not in headers and path.resolve() not in built:
            continue
        try:
            if path.stat().st_size > READ_BYTES:
                unread.append(path)
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "include" in text:
            includes[path] = INCLUDE.findall(text)
    found: set[Path] = set()
    todo, seen = [header], {header}
    while todo:
        target = todo.pop()
        for path, names in includes.items():
            if path not in seen and any(_names(n, target) for n in names):
                seen.add(path)
                if path.suffix.lower() in headers:
                    todo.append(path)  # a header including it: its includers are dependents too
                else:
                    found.add(path)
    ordered = sorted(found)
    return Includers(
        ordered[:OPEN_CAP], max(0, len(ordered) - OPEN_CAP), sorted(unread), conn.watcher.truncated
    )


async def open_dependents(
    sup: Supervisor, targets: list[tuple[str, Path, Connection]]
) -> tuple[list[tuple[str, Path, Connection]], list[str]]:
    """The files including the written headers of a server that checks only open documents, opened
    (rel, path, connection); and a one-line note for each way a header's includers were not all checked."""
    import asyncio

    written = {path for _, path, _ in targets}
    out: dict[Path, tuple[str, Path, Connection]] = {}
    notes = []
    for rel, path, conn in targets:
        if conn.open_files and path.suffix.lower() in (".py", ".pyi"):
            opened, note = await _open_importers(sup, conn, rel, path, written)
            for dep in opened:
                out.setdefault(dep, (sup.run.relpath(dep), dep, conn))
            notes += [note] if note else []
            continue
        if path.suffix.lower() not in conn.server.header_extensions:
            continue
        found = await asyncio.to_thread(includers, conn, path)
        unopened = []
        for dep in found.files:
            if dep in written:
                continue
            if conn.open(dep) is None:
                unopened.append(sup.run.relpath(dep))
            else:
                out.setdefault(dep, (sup.run.relpath(dep), dep, conn))
        server = conn.server.id
        if found.more:
            notes.append(
                f"{found.more} more file(s) include {rel} and were not checked ({server} checks open files "
                f"only, and {OPEN_CAP} were opened); run lsp diagnostics on them or build"
            )
        if unopened:
            notes.append(
                f"{len(unopened)} file(s) include {rel} and were not checked: {server} could not be given "
                f"them (not UTF-8 text or not readable): {render.names(unopened)}"
            )
        if found.unread:
            big = [sup.run.relpath(p) for p in found.unread]
            notes.append(
                f"{len(big)} file(s) over {READ_BYTES // 1_000_000} MB were not read, so whether they include "
                f"{rel} is not known and they were not checked: {render.names(big)}; build to check them"
            )
        if found.scan_cut:
            notes.append(
                f"files that include {rel} were looked for in the first {SCAN_CAP} source files only: the "
                f"rest of the tree was not checked; build to check it"
            )
    return list(out.values()), notes


def importers_checked(sup: Supervisor, conn: Connection) -> int:
    """How many files importing a written one a write checks on this server: the run option
    lsp_importers_checked, else the server's own number (`ServerDef.importers_checked`)."""
    said = sup.run.options.of(LspOptions).lsp_importers_checked
    return int(conn.server.importers_checked if said is None else said)


def importers_note(server: str, why: str, rel: str, checked: int, more: list[str], cut: bool) -> str:
    """The one line of every server that checks only open files about the importers of a written file:
    how many were checked, and how many more import it and were not (``cut``: the search stopped at the
    cap, so that many at least), named."""
    said = f"{server} checks only open files{why}: checked {checked} file(s) importing {rel}"
    if not more and not cut:
        return said
    if more:
        count = f"at least {len(more)}" if cut else str(len(more))
        said += f"; {count} more import it and were not checked: {render.names(more)}"
    else:
        said += "; more may import it (through the files checked) and were not looked for"
    return said + '; run lsp diagnostics on them, or lsp diagnostics "*" for the whole project'


async def _open_importers(
    sup: Supervisor, conn: Connection, rel: str, path: Path, written: set[Path]
) -> tuple[list[Path], str | None]:
    """The files importing ``path`` opened in an open-files server (at most `importers_checked`, nearest
    first), and the note saying how many were checked and how many were not."""
    import asyncio

    from tether_lsp.imports import ImportIndex

    if conn.index is None:
        conn.index = ImportIndex(conn.root)
    await asyncio.to_thread(conn.index.update, dict(conn.watcher.files))
    found = [p for p in await asyncio.to_thread(conn.index.importers, [path]) if p not in written]
    opened, unopened, cap = [], 0, importers_checked(sup, conn)
    for dep in found:
        if len(opened) >= cap:
            break
        if conn.open(dep) is None:
            unopened += 1
            continue
        opened.append(dep)
        conn.kept_open.pop(dep, None)
        conn.kept_open[dep] = None  # the most recent last
    while len(conn.kept_open) > max(KEEP_OPEN, cap):
        old = next(iter(conn.kept_open))
        del conn.kept_open[old]
        if old not in opened and old not in written and (doc := conn.docs.get(old.as_uri())) is not None:
            conn.close_doc(doc)
    if not found:
        return opened, None
    more = [sup.run.relpath(p) for p in found if p not in opened]
    return opened, importers_note(conn.server.id, " in a project this big", rel, len(opened), more, False)


@attrs.frozen
class Importers:
    """The files importing a set of written files, as tsserver answered (`importers`)."""

    files: list[Path]  # to check: nearest first, at most the cap
    more: list[Path]  # found importing them too, not to check (over the cap)
    cut: bool  # the search stopped at the cap: files importing the unsearched ones are not known
    answered: bool = True  # False: tsserver did not answer a search (a timeout or an error)


async def importers(
    conn: Connection, paths: list[Path], timeout: float, cap: int = IMPORTERS_CAP
) -> Importers:
    """The files under the root that import ``paths``, directly or through files importing them, nearest
    first: at most ``cap`` to check, and those found beyond it (a file's importers are asked of tsserver's
    `fileReferences` one file at a time, breadth first; once ``cap`` are found the search stops, so the
    rest of the last answer is counted and the importers of files not searched are not known). An empty
    answer for a server other than tsserver (`rounds="tsserver"`).

    A change of the written files cannot change who imports them: the last answer for the same files
    holds until another file changes (the search took 0.8-1.4 s for map.ts's 42 importers in rxjs).
    """
    if conn.server.rounds != "tsserver":
        return Importers([], [], False)
    key = (*sorted(paths), cap)
    others = conn.edits.total() - sum(conn.edits[p.as_uri()] for p in paths)
    cached = conn.importers_found.get(key)
    if cached is not None and cached[1] == others:
        return cached[0]
    # a file not on disk (deleted, or a move's old path or a destination before it) is in no project: tsserver
    # answers "No Project", which would cut the search; its importers are not asked
    seen, queue, found, more = set(paths), [p for p in paths if p.is_file()], [], []
    while queue and len(found) < cap:
        try:
            body = await conn.tsserver("fileReferences", {"file": str(queue.pop(0))}, timeout)
        except (RequestTimeout, ServerError):
            return Importers(found, more, True, answered=False)
        for ref in message_field(body, "refs") or []:
            dep = Path(message_field(ref, "file", ""))
            if dep in seen or not dep.is_relative_to(conn.root) or "node_modules" in dep.parts:
                continue
            seen.add(dep)
            if len(found) < cap:
                found.append(dep)
                queue.append(dep)
            else:
                more.append(dep)
    out = Importers(found, more, bool(queue) or bool(more))
    if len(conn.importers_found) > 64:  # one entry per set of written files: bounded
        conn.importers_found.clear()
    conn.importers_found[key] = (out, others)
    return out


WORD = re.compile(r"\w+")
# how a file is named by the files importing it, by extension: Python by its module (a package by its
# folder), Go by its package's folder (the last part of the import path)
IMPORT_NAMES = {".py": "module", ".pyi": "module", ".go": "folder"}


def _import_name(path: Path) -> set[str] | None:
    kind = IMPORT_NAMES.get(path.suffix.lower())
    if kind is None:
        return None
    name = path.parent.name if kind == "folder" or path.stem == "__init__" else path.stem
    return set(WORD.findall(name)) or None


def _reaches(path: Path, named: set[str], words: set[str], reached: set[Path]) -> bool:
    """Whether a file of the reached ones can import ``path`` (whose import name is ``named``)."""
    if path in reached or named <= words:
        return True
    if IMPORT_NAMES[path.suffix.lower()] == "folder":  # a Go package: its files see each other
        return any(r.parent == path.parent for r in reached)
    # a Python package's __init__ is run (and `from . import *` read) by every module under it
    return path.stem == "__init__" and any(r.is_relative_to(path.parent) for r in reached)


def depended_on(conn: Connection, doc: Path, changed: list[Path]) -> list[Path] | None:
    """The files of ``changed`` that ``doc``'s diagnostics can depend on, None when that is not known.

    Read, not asked: the files ``doc`` can import, directly or through the files they import, are those
    of the server's files whose import name (a Python module's, a Go package folder's) is a word of a
    file reached; a same-named module elsewhere reaches a file too many, which costs only a wait. Not
    known: more than IMPORTERS_CAP files reached, a scan cut at SCAN_CAP, a file over READ_BYTES or
    unreadable, a language without an import name here (typescript: `importers`).
    """
    if _import_name(doc) is None or conn.watcher.truncated:
        return None
    names = {p: n for p in [*conn.watcher.files, *changed] if (n := _import_name(p)) is not None}
    if any(_import_name(p) is None for p in changed):
        return None
    reached: set[Path] = set()
    words: set[str] = set()
    todo = [doc]
    while todo:
        for path in todo:
            try:
                if path.stat().st_size > READ_BYTES:
                    return None
                words |= set(WORD.findall(path.read_text(encoding="utf-8", errors="replace")))
            except FileNotFoundError:
                continue  # deleted: it imports nothing now
            except OSError:
                return None
        reached.update(todo)
        if len(reached) > IMPORTERS_CAP:
            return None
        todo = [p for p, n in names.items() if p not in reached and _reaches(p, n, words, reached)]
    return [p for p in changed if _reaches(p, names[p], words, reached)]


async def changes_seen_by(
    conn: Connection, doc: Path, changed: list[Path], timeout: float
) -> list[Path] | None:
    """The files of ``changed`` (made outside tether) that ``doc``'s diagnostics can depend on, None when
    that is not known: tsserver is asked who imports them (`importers`), the other servers' files read
    (`depended_on`)."""
    import asyncio

    if conn.server.rounds != "tsserver":
        return await asyncio.to_thread(depended_on, conn, doc, changed)
    if doc in changed:
        return [doc]
    found = await importers(conn, changed, timeout)
    if doc in found.files or doc in found.more:
        return list(changed)
    if found.cut or not found.answered:
        return None
    return []
