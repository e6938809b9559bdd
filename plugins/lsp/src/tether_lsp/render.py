"""Server answers turned into what the model reads: `path:line:col` relative to the root, with the source line."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether.diagnostics import Diagnostic
from tether.files import MAX_FILE_BYTES

from tether_lsp.positions import from_units, text_lines

if TYPE_CHECKING:
    from tether.run import Run

SEVERITIES = {1: "error", 2: "warning", 3: "information", 4: "hint"}


def uri_to_path(uri: str) -> Path | None:
    """The path of a file: uri (None for another scheme)."""
    from pygls.uris import to_fs_path

    path = to_fs_path(uri)
    return Path(path) if path is not None else None


class Lines:
    """Source lines of files, read once per answer (and from the open document when there is one)."""

    def __init__(
        self, overrides: dict[Path, str] | None = None, uris: dict[str, tuple[Path | None, str]] | None = None
    ) -> None:
        self._cache: dict[Path, tuple[str, ...]] = {}
        self._overrides = overrides or {}
        self._uris = {} if uris is None else uris  # may be shared across answers: a uri always shows the same

    def where(self, uri: str, run: Run) -> tuple[Path | None, str]:
        """(path, path as shown) of a uri; cached, as resolving a path is syscalls and answers repeat files."""
        hit = self._uris.get(uri)
        if hit is None:
            path = uri_to_path(uri)
            hit = self._uris[uri] = (path, run.relpath(path) if path is not None else uri)
        return hit

    def get(self, path: Path, line: int) -> str:
        if path not in self._cache:
            text = self._overrides.get(path)
            self._cache[path] = text_lines(text) if text is not None else file_lines(path)
        lines = self._cache[path]
        return lines[line] if 0 <= line < len(lines) else ""


FILES_KEPT = 64
_files: dict[tuple[Path, int, int], tuple[str, ...]] = {}


def file_lines(path: Path) -> tuple[str, ...]:
    """A file's lines, read again only when its mtime or size changed (the last FILES_KEPT files): the
    callers of a method span tens of files, and each answer read and split them all again."""
    try:
        st = path.stat()
        key = (path, st.st_mtime_ns, st.st_size)
        hit = _files.pop(key, None)
        if hit is None:  # a line of a huge file is not shown: it is never read
            small = st.st_size <= MAX_FILE_BYTES
            hit = text_lines(path.read_text(encoding="utf-8", errors="replace")) if small else ()
        _files[key] = hit  # the most recent last
        while len(_files) > FILES_KEPT:
            del _files[next(iter(_files))]
        return hit
    except OSError:
        return ()


@attrs.frozen(order=True)
class Location:
    file: str
    line: int  # 1-based
    column: int  # 1-based, in characters
    text: str = attrs.field(order=False)

    def render(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.text.strip()[:200]}"

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def locations(result: Any, run: Run, encoding: str, lines: Lines) -> list[Location]:
    """Location | Location[] | LocationLink[] | None -> sorted, deduplicated locations."""
    if result is None:
        return []
    items = result if isinstance(result, (list, tuple)) else [result]
    out: set[Location] = set()
    for item in items:
        uri = getattr(item, "target_uri", None) or getattr(item, "uri", None)
        rng = getattr(item, "target_selection_range", None) or getattr(item, "range", None)
        if uri is None or rng is None:
            continue
        out.add(location(uri, rng.start, run, encoding, lines))
    return sorted(out, key=lambda loc: (loc.file, loc.line, loc.column))


def location(uri: str, pos: Any, run: Run, encoding: str, lines: Lines) -> Location:
    return location_at(uri, pos.line, pos.character, run, encoding, lines)


def location_at(uri: str, line: int, units: int, run: Run, encoding: str, lines: Lines) -> Location:
    """The location of a server's 0-based line and character offset (in its encoding's units) in a uri."""
    path, shown = lines.where(uri, run)
    if path is None:
        return Location(uri, line + 1, units + 1, "")
    source = lines.get(path, line)
    return Location(shown, line + 1, from_units(source, units, encoding) + 1, source)


def diagnostic(
    d: Any, path: Path, run: Run, encoding: str, lines: Lines, source: str | None = None
) -> Diagnostic:
    start = d.range.start
    source = lines.get(path, start.line)
    code = d.code
    severity = d.severity.value if hasattr(d.severity, "value") else d.severity
    return Diagnostic(
        file=run.relpath(path),
        line=start.line + 1,
        column=from_units(source, start.character, encoding) + 1,
        severity=SEVERITIES.get(severity or 1, "error"),
        message=one_line(str(d.message).strip(), run),
        code=None if code is None else str(code),
        source=d.source or source,
    )


# clangd (without relatedInformation) appends each note to the message as a paragraph of its own:
# "\n\n/abs/path/x.h:200:23:\nnote: 'f' declared here"
NOTE = re.compile(r"^(?P<path>/[^\n]*?):(?P<line>\d+):(?P<col>\d+):\s*\n(?P<text>.*)$", re.DOTALL)


def one_line(message: str, run: Run) -> str:
    """A message with paragraphs (clangd's notes) as one line: "main; note: text (x.h:200:23)", the
    note's path relative to the root. A message without blank lines is kept as it is."""
    if "\n\n" not in message:
        return message
    parts = []
    for para in message.split("\n\n"):
        if not para.strip():
            continue
        m = NOTE.match(para.strip())
        if m:
            where = f"{run.relpath(os.path.normpath(m['path']))}:{m['line']}:{m['col']}"
            parts.append(f"{' '.join(m['text'].split())} ({where})")
        else:
            parts.append(" ".join(para.split()))
    return "; ".join(parts)


def diagnostics(
    items: list[Any], path: Path, run: Run, encoding: str, lines: Lines, source: str | None = None
) -> list[Diagnostic]:
    """The errors and warnings among a server's diagnostics of one file (``source``: the server's id,
    for a diagnostic that does not name its source)."""
    out = [diagnostic(d, path, run, encoding, lines, source) for d in items]
    return [d for d in out if d.severity in ("error", "warning")]


def hover_text(result: Any) -> str:
    if result is None:
        return ""
    contents = result.contents
    parts = contents if isinstance(contents, (list, tuple)) else [contents]
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif hasattr(part, "value"):
            lang = getattr(part, "language", None)
            texts.append(f"```{lang}\n{part.value}\n```" if lang else part.value)
    return unescape_prose("\n\n".join(t.strip() for t in texts if t and t.strip()))


def unescape_prose(markdown: str) -> str:
    """HTML entities outside code fences as the characters they stand for: pyright-based servers write a
    docstring's indentation as `&nbsp;` and `<`, `&` as `&lt;`, `&amp;`. Code blocks are left as written."""
    parts = re.split(r"(^```.*?^```)", markdown, flags=re.MULTILINE | re.DOTALL)
    return "".join(
        part if part.startswith("```") else html.unescape(part).replace("\xa0", " ") for part in parts
    )


NAMED = 5  # files named in a note before "and N more"


def names(rels: list[str]) -> str:
    """Files for a one-line note: the first NAMED, then "and N more"."""
    more = f" and {len(rels) - NAMED} more" if len(rels) > NAMED else ""
    return ", ".join(rels[:NAMED]) + more
