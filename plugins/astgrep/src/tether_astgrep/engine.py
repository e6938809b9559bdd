"""Searching files: the work a worker process does (and the run's own process for small jobs).

Everything here is module-level so a process pool can call it; each process keeps its own parsers
and queries (a tree-sitter parser is not shareable across processes).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from tether_astgrep.matcher import Match, Span, find_matches, find_spans
from tether_astgrep.pattern import META, Pattern

if TYPE_CHECKING:
    from tether_astgrep.rules import Rule

log = logging.getLogger("tether.astgrep")

MAX_FILE_BYTES = 8 * 1024 * 1024  # larger files are skipped and counted (generated code, data)

_languages: dict[str, Any] = {}
_local = threading.local()  # a tree-sitter parser must not be used by two threads at once
_queries: dict[tuple[str, str], Any] = {}


@attrs.frozen
class FileResult:
    path: str  # as given (absolute)
    status: str  # "searched", "binary", "non-utf8", "too large", "unreadable", "failed"
    matches: tuple[Span, ...] = ()  # see `matcher.find_spans`
    detail: str = ""  # for "failed": what went wrong
    # `digest` of the bytes searched, for a file with matches: its spans index those bytes, and the matches
    # shown are read back from the file (`grep._materialize`) only if it still holds them
    digest: bytes = b""


def digest(data: bytes) -> bytes:
    """A file's content in 32 bytes (SHA-256: the fastest of hashlib's here, with the CPU's SHA instructions)."""
    import hashlib  # here: a search that matches nothing never loads it

    return hashlib.sha256(data).digest()


def language(grammar_id: str, loader: Callable[[], Any]) -> Any:
    lang = _languages.get(grammar_id)
    if lang is None:
        from tree_sitter import Language

        raw = loader()
        lang = raw if isinstance(raw, Language) else Language(raw)
        _languages[grammar_id] = lang
    return lang


def parser(grammar_id: str, loader: Callable[[], Any]) -> Any:
    parsers = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    p = parsers.get(grammar_id)
    if p is None:
        from tree_sitter import Parser

        p = parsers[grammar_id] = Parser(language(grammar_id, loader))
    return p


def _query(pattern: Pattern | Rule, loader: Callable[[], Any]) -> Any:
    source = pattern.query_source()
    if source is None:
        return None
    key = (pattern.lang_key, source)
    q = _queries.get(key)
    if q is None:
        from tree_sitter import Query

        q = _queries[key] = Query(language(pattern.lang_key, loader), source)
    return q


def classify(data: bytes) -> str | None:
    """Why a file cannot be searched, or None."""
    if len(data) > MAX_FILE_BYTES:
        return "too large"
    if b"\0" in data:
        return "binary"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "non-utf8"
    return None


def _candidate_query(pattern: Pattern | Rule, loader: Callable[[], Any]) -> Any:
    """The query that finds candidates, when the pattern has no literal to walk up from (a rule always)."""
    if isinstance(pattern, Pattern) and pattern.needles and pattern.root[0] != META:
        return None
    return _query(pattern, loader)


def _merge(per_reading: list[list], key: Callable[[Any], tuple]) -> list:
    """The matches of several readings of one pattern: in source order, each range once."""
    if len(per_reading) == 1:
        return per_reading[0]
    seen: dict[tuple, Any] = {}
    for found in per_reading:
        for m in found:
            seen.setdefault(key(m), m)
    return [seen[k] for k in sorted(seen, key=lambda k: (k[0], -k[1]))]


def search_source(data: bytes, pattern: Pattern | Rule, loader: Callable[[], Any]) -> tuple[Any, list[Match]]:
    """The tree of ``data`` and its full matches (texts and captures): for a rewrite."""
    tree = parser(pattern.lang_key, loader).parse(data)
    found = [find_matches(tree, data, p, _candidate_query(p, loader)) for p in pattern.readings]
    return tree, _merge(found, lambda m: (m.start_byte, m.end_byte))


def parse(data: bytes, pattern: Pattern | Rule, loader: Callable[[], Any]) -> Any:
    """``data`` parsed with the pattern's grammar (a rewritten file, to check it still parses)."""
    return parser(pattern.lang_key, loader).parse(data)


def read_file(path: str) -> bytes | str:
    """A file's bytes, or why it is not searched ("too large", "unreadable"): its size decided from
    ``fstat`` before a byte is read, and never more than MAX_FILE_BYTES + 1 bytes read (a file that grew
    meanwhile). Opened non-blocking, so a path swapped for a FIFO is never waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return "unreadable"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "unreadable"
        if st.st_size > MAX_FILE_BYTES:
            return "too large"
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError:
        return "unreadable"
    finally:
        if fd >= 0:
            os.close(fd)
    return "too large" if len(data) > MAX_FILE_BYTES else data


def search_file(path: str, pattern: Pattern | Rule, loader: Callable[[], Any]) -> FileResult:
    data = read_file(path)
    if isinstance(data, str):
        return FileResult(path, data)
    return search_data(path, data, pattern, loader)


def search_data(path: str, data: bytes, pattern: Pattern | Rule, loader: Callable[[], Any]) -> FileResult:
    """`search_file` of the bytes ``data`` read from ``path``."""
    why = classify(data)
    if why is not None:
        return FileResult(path, why)
    # cheaper than parsing: most files lack a literal of the pattern
    readings = [p for p in pattern.readings if all(n in data for n in p.needles)]
    if not readings:
        return FileResult(path, "searched")
    try:
        tree = parser(pattern.lang_key, loader).parse(data)
        found = [find_spans(tree, data, p, _candidate_query(p, loader)) for p in readings]
    except Exception as exc:  # one file (a generated one, a grammar fault) never fails a search
        log.warning("searching %s failed", path, exc_info=True)
        return FileResult(path, "failed", detail=f"{type(exc).__name__}: {exc}"[:200])
    spans = tuple(_merge(found, lambda span: (span[0], span[1])))
    return FileResult(path, "searched", spans, digest=digest(data) if spans else b"")


def search_chunk(
    paths: Sequence[str], pattern: Pattern | Rule, loader: Callable[[], Any]
) -> list[FileResult]:
    return [search_file(p, pattern, loader) for p in paths]
