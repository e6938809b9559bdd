"""A server's WorkspaceEdit computed in memory, confined to the root, then written all at once.

Both forms are taken: `changes` (uri -> edits) and `documentChanges` (text document edits and
create/rename/delete file operations, applied in order). Nothing is written until every edit of
every file applied cleanly; `tether.atomic.write_all` then writes all files or none.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether.atomic import Snapshot
from tether.files import LINE_BREAK
from tether.tools import ToolError

from tether_lsp.positions import from_units
from tether_lsp.render import uri_to_path
from tether_lsp.watching import too_large

if TYPE_CHECKING:
    from tether.run import Run

    from tether_lsp.connection import Connection


@attrs.define
class PlannedEdit:
    contents: dict[Path, str | None] = attrs.field(factory=dict)  # final content; None = deleted
    originals: dict[Path, Snapshot] = attrs.field(factory=dict)
    edits: Counter = attrs.field(factory=Counter)  # per path: text edits applied
    operations: list[str] = attrs.field(factory=list)  # "renamed a -> b", ...
    renamed: dict[Path, Path] = attrs.field(factory=dict)

    def writes(self) -> dict[Path, bytes | None]:
        """The files whose final content differs from what was read (told by digest: no file is read again)."""
        out: dict[Path, bytes | None] = {}
        for path, text in self.contents.items():
            new = None if text is None else text.encode("utf-8")
            if Snapshot.of(path, new) != self.originals.get(path):
                out[path] = new
        return out


def _offset(text: str, line: int, units: int, encoding: str) -> int:
    """Offset in ``text`` of an LSP position (past-the-end lines clamp to the end, as the spec allows).

    Lines end at "\n", "\r\n" or "\r" only, as the server counts them: never at a form feed or U+2028."""
    start = 0
    for _ in range(line):
        found = LINE_BREAK.search(text, start)
        if found is None:
            return len(text)
        start = found.end()
    end = LINE_BREAK.search(text, start)
    body = text[start : end.start() if end else len(text)]
    return start + from_units(body, units, encoding)


def apply_text_edits(text: str, edits: list[Any], encoding: str) -> str:
    spans = []
    for i, e in enumerate(edits):
        new_text = getattr(e, "new_text", None)
        if new_text is None:  # a snippet edit: take its text literally
            new_text = getattr(getattr(e, "snippet", None), "value", "")
        start = _offset(text, e.range.start.line, e.range.start.character, encoding)
        end = _offset(text, e.range.end.line, e.range.end.character, encoding)
        spans.append((start, end, i, new_text))
    spans.sort()
    for a, b in itertools.pairwise(spans):
        if b[0] < a[1]:
            raise ToolError(
                "the server's edit has overlapping changes in one file; nothing was written",
                code="bad_edit",
            )
    for start, end, _, new_text in reversed(spans):
        text = text[:start] + new_text + text[end:]
    return text


class Planner:
    def __init__(self, run: Run, encoding: str) -> None:
        self.run = run
        self.encoding = encoding
        self.plan = PlannedEdit()

    def _path(self, uri: str) -> Path:
        path = uri_to_path(uri)
        resolved = path.resolve() if path is not None else None
        if resolved is None or not resolved.is_relative_to(self.run.root):
            shown = self.run.relpath(path) if path is not None else uri
            raise ToolError(
                f"the server's edit touches '{shown}', which is outside the root; nothing was written. "
                "Rename symbols defined inside the project only.",
                code="edit_outside_root",
                path=str(shown),
            )
        return resolved

    def _load(self, path: Path) -> str | None:
        if path not in self.plan.contents:
            # read once: the snapshot is of the very bytes the edits apply to
            data: bytes | None
            text: str | None
            if (refusal := too_large(path, self.run.relpath(path), "; nothing was written")) is not None:
                raise refusal
            try:
                data = path.read_bytes()
                text = data.decode("utf-8")
            except FileNotFoundError:
                data = text = None
            except (OSError, UnicodeDecodeError):
                raise ToolError(
                    f"'{self.run.relpath(path)}' is not UTF-8 text; nothing was written",
                    code="unreadable",
                ) from None
            self.plan.originals[path] = Snapshot.of(path, data)
            self.plan.contents[path] = text
        return self.plan.contents[path]

    def text_edits(self, uri: str, edits: list[Any]) -> None:
        path = self._path(uri)
        text = self._load(path)
        if text is None:
            raise ToolError(
                f"the server's edit changes '{self.run.relpath(path)}', which does not exist; nothing was written",
                code="bad_edit",
            )
        self.plan.contents[path] = apply_text_edits(text, list(edits), self.encoding)
        self.plan.edits[path] += len(edits)

    def operation(self, op: Any) -> None:
        kind = getattr(op, "kind", None)
        options = getattr(op, "options", None)
        overwrite = bool(getattr(options, "overwrite", False))
        ignore = bool(
            getattr(options, "ignore_if_exists", False) or getattr(options, "ignore_if_not_exists", False)
        )
        if kind == "create":
            path = self._path(op.uri)
            if self._load(path) is not None and not overwrite:
                if not ignore:
                    raise ToolError(
                        f"the server's edit creates '{self.run.relpath(path)}', which exists; nothing was written",
                        code="bad_edit",
                    )
                return
            self.plan.contents[path] = ""
            self.plan.operations.append(f"created {self.run.relpath(path)}")
        elif kind == "rename":
            old, new = self._path(op.old_uri), self._path(op.new_uri)
            if self.plan.renamed.get(old) == new:
                return  # planned already (a server's edit that holds lsp_move's own rename of the file)
            text = self._load(old)
            if text is None:
                if ignore:
                    return
                raise ToolError(
                    f"the server's edit renames '{self.run.relpath(old)}', which does not exist; nothing was written",
                    code="bad_edit",
                )
            if self._load(new) is not None and not overwrite:
                if ignore:
                    return
                raise ToolError(
                    f"the server's edit renames onto '{self.run.relpath(new)}', which exists; nothing was written",
                    code="bad_edit",
                )
            self.plan.contents[new] = text
            self.plan.contents[old] = None
            self.plan.renamed[old] = new
            self.plan.operations.append(f"renamed {self.run.relpath(old)} -> {self.run.relpath(new)}")
        elif kind == "delete":
            path = self._path(op.uri)
            if path.is_dir():
                raise ToolError(
                    f"the server's edit deletes the directory '{self.run.relpath(path)}'; refused, nothing was written",
                    code="bad_edit",
                )
            if self._load(path) is None:
                if ignore:
                    return
                raise ToolError(
                    f"the server's edit deletes '{self.run.relpath(path)}', which does not exist; nothing was written",
                    code="bad_edit",
                )
            self.plan.contents[path] = None
            self.plan.operations.append(f"deleted {self.run.relpath(path)}")


def plan_workspace_edit(edit: Any, run: Run, encoding: str, then: Sequence[Any] = ()) -> PlannedEdit:
    """The edit planned in memory; ``then``: file operations of our own applied after it (`lsp_move`'s
    rename of the moved file, whose own edits the server wrote against its old path)."""
    planner = Planner(run, encoding)
    if edit is not None and getattr(edit, "document_changes", None):
        for change in edit.document_changes:
            if hasattr(change, "text_document"):
                planner.text_edits(change.text_document.uri, change.edits)
            else:
                planner.operation(change)
    elif edit is not None and getattr(edit, "changes", None):
        for uri, edits in edit.changes.items():
            planner.text_edits(uri, edits)
    for op in then:
        planner.operation(op)
    return planner.plan


async def write_planned(
    conns: list[Connection], run: Run, plan: PlannedEdit, what: str, expect: Any = ()
) -> dict[Path, Any]:
    """Write a planned WorkspaceEdit, every file or none, and tell the servers ``conns``: the one door of
    the family's writes (`lsp_rename`, `lsp_fix`, `lsp_move`). The originals read for the plan (and
    ``expect``: snapshots the caller read before, such as the text a code action was computed on) are
    checked under the root's write lock, so no write slips in between. ``what`` names the write in its
    errors ("the rename"). The files written."""
    from tether.atomic import ChangedSince

    writes = plan.writes()
    if not writes:
        return writes
    try:
        await run.write_files(writes, expect=[*plan.originals.values(), *expect])
    except ChangedSince as exc:
        raise ToolError(
            f"{', '.join(run.relpath(p) for p in exc.paths)} changed while {what} was computed; nothing was "
            "written, retry",
            code="changed_meanwhile",
        ) from None
    except OSError as exc:
        raise ToolError(
            f"could not write {what} ({exc.strerror or exc} on {run.relpath(exc.filename or '?')}); "
            "nothing was written: every file was restored",
            code="write_failed",
        ) from None
    for conn in conns:
        _tell(conn, plan, writes)
    return writes


def renames_offered(conn: Connection, operation: str) -> bool:
    """Whether the server asked for ``workspace/<operation>RenameFiles`` (its fileOperations capability)."""
    ops = getattr(getattr(conn.capabilities, "workspace", None), "file_operations", None)
    return getattr(ops, f"{operation}_rename", None) is not None


def _tell(conn: Connection, plan: PlannedEdit, writes: dict[Path, Any]) -> None:
    """A server after a write of ours: open documents get their new text; a renamed file's document is
    closed, the rename notified where the server asked for it (didRenameFiles), the new path opened."""
    from lsprotocol import types as lsp

    for old, new in plan.renamed.items():
        d = conn.docs.get(old.as_uri())
        if d is not None:
            conn.close_doc(d)
        if renames_offered(conn, "did"):
            conn.notify(
                "workspace/didRenameFiles",
                lsp.RenameFilesParams(files=[lsp.FileRename(old_uri=old.as_uri(), new_uri=new.as_uri())]),
            )
        if d is not None:
            conn.open(new)
    conn.watcher.files_changed(list(writes))
