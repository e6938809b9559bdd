"""The `lsp` tool's call and type hierarchy: callers, callees, supertypes, subtypes of a symbol.

`textDocument/prepareCallHierarchy` then `callHierarchy/incomingCalls` / `outgoingCalls`, and
`textDocument/prepareTypeHierarchy` then `typeHierarchy/supertypes` / `subtypes` (clangd before 16
answers only its own extension, `textDocument/typeHierarchy`, which is asked instead). Each entry is
the calling (called, parent, child) symbol as `path:line:col name`, with the call sites' lines for
calls; sorted by file then line; `depth` levels, each indented, a symbol met again listed once more
without its own entries. A server that lacks the request says so, with what to ask instead: never an
empty list that reads as "no callers".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import attrs
from tether.tools import ToolError, ToolResult

from tether_lsp import readiness, render
from tether_lsp.positions import find_symbol
from tether_lsp.supervisor import NotAnswered

if TYPE_CHECKING:
    from pathlib import Path

    from tether_lsp.args import LspArgs
    from tether_lsp.connection import Connection, Doc
    from tether_lsp.supervisor import Supervisor

HIERARCHY_CAP = 50  # entries shown, over every level
MAX_DEPTH = 3

# action: (kind, method, the capability, what an entry is, what to ask instead)
ACTIONS = {
    "callers": ("call", "callHierarchy/incomingCalls", "callers", "references (who mentions it)"),
    "callees": ("call", "callHierarchy/outgoingCalls", "callees", "definition of each call, or hover"),
    "supertypes": ("type", "typeHierarchy/supertypes", "supertypes", "definition or hover of the base types"),
    "subtypes": (
        "type",
        "typeHierarchy/subtypes",
        "subtypes",
        "implementation (the types that implement it)",
    ),
}
PREPARE = {"call": "textDocument/prepareCallHierarchy", "type": "textDocument/prepareTypeHierarchy"}
CAPABILITY = {"call": "call_hierarchy_provider", "type": "type_hierarchy_provider"}
LEGACY_TYPES = "textDocument/typeHierarchy"  # clangd's extension (direction 0 children, 1 parents)


@attrs.frozen
class Entry:
    level: int  # 1: the symbol's own callers (or ...), 2: theirs, ...
    file: str
    line: int
    column: int
    name: str
    sites: tuple[int, ...]  # 1-based lines of the calls, in ``sites_file``
    sites_file: str
    repeated: bool  # met before: its own entries are not listed again

    def render(self) -> str:
        text = f"{'  ' * (self.level - 1)}{self.file}:{self.line}:{self.column} {self.name}"
        if self.sites:
            where = "" if self.sites_file == self.file else f"{self.sites_file}:"
            text += f" - calls at {where}{', '.join(map(str, self.sites))}"
        if self.repeated:
            text += " (listed above)"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "name": self.name,
            "sites": self.sites,
            "sites_file": self.sites_file,
            "repeated": self.repeated,
        }


class Found(NamedTuple):
    """One child of an item, with what sorting, the seen set and its entry need, worked out once."""

    item: Any
    ranges: Any  # the call's ranges (callers, callees), else None
    sites_file: str  # the file they are in, as shown ("": the item's own)
    uri: str
    start: tuple[int, int]  # 0-based line and character (server units) of its name
    shown: str  # its file as shown


def lacks(conn: Connection, action: str, why: str = "") -> ToolError:
    """The refusal of a server without the request (``why``: which part it lacks; default: the whole hierarchy)."""
    kind, _, noun, instead = ACTIONS[action]
    why = why or f"it offers no {kind} hierarchy"
    return ToolError(
        f"{conn.server.id} does not answer {noun} ({why}): this is not an answer that there are none. "
        f"Ask {instead} instead",
        code="unsupported",
        server=conn.server.id,
        action=action,
    )


def method_missing(exc: Exception) -> bool:
    text = str(exc).lower()
    return "method not found" in text or "unhandled method" in text or "-32601" in text


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _start(item: Any) -> tuple[int, int]:
    """0-based line and character of an item's name (clangd's extension answers camelCase objects)."""
    rng = _field(item, "selection_range") or _field(item, "selectionRange") or _field(item, "range")
    start = _field(rng, "start")
    return int(_field(start, "line", 0)), int(_field(start, "character", 0))


async def hierarchy(sup: Supervisor, path: Path, rel: str, args: LspArgs) -> ToolResult:
    """The answer of callers, callees, supertypes or subtypes for the symbol at ``rel``:``args.line``."""
    from tether_lsp.common import position, still_indexing
    from tether_lsp.connection import ServerError

    action = args.action
    kind, method, noun, _ = ACTIONS[action]
    depth = args.depth or 1
    line, symbol = args.line, args.symbol
    assert line is not None and symbol is not None  # `navigation.navigate` refused an action without them
    where = f"'{symbol}' at {rel}:{line}"

    async def ask(conn: Connection, doc: Doc) -> ToolResult:
        lsp = conn.lsp
        run = conn.run
        if not getattr(conn.capabilities, CAPABILITY[kind], None):
            raise NotAnswered(lacks(conn, action))
        spot = find_symbol(doc.text, line, symbol, args.occurrence, rel)
        pos = position(conn, doc.text, spot)
        ident = lsp.TextDocumentIdentifier(uri=doc.uri)
        legacy = False
        try:
            if kind == "call":
                params: Any = lsp.CallHierarchyPrepareParams(text_document=ident, position=pos)
            else:
                params = lsp.TypeHierarchyPrepareParams(text_document=ident, position=pos)
            items = await sup.request(conn, PREPARE[kind], params)
        except ServerError as exc:
            if kind != "type" or not method_missing(exc):
                raise
            legacy = True  # clangd before 16: its own extension, every level resolved in one answer
            direction = 1 if action == "supertypes" else 0
            legacy_params = {
                "textDocument": {"uri": doc.uri},
                "position": {"line": pos.line, "character": pos.character},
                "direction": direction,
                "resolve": depth,
            }
            try:
                found = await sup.request(conn, LEGACY_TYPES, legacy_params)
            except ServerError as again:
                if method_missing(again):
                    raise NotAnswered(lacks(conn, action, f"{LEGACY_TYPES}: method not found")) from None
                raise
            items = [found] if found else []
        if not items:
            if readiness.was_busy(conn):
                raise NotAnswered(still_indexing(conn, noun))
            what = "function or method" if kind == "call" else "type"
            raise NotAnswered(
                ToolResult.text(
                    f"no {what} at {where} for {noun}: point at the name of a {what} where it is defined or used",
                    {"entries": [], "total": 0},
                )
            )
        lines = render.Lines({doc.path: doc.text}, conn.uri_cache)

        def found(item: Any, ranges: Any = None, sites_file: str = "") -> Found:
            uri = _field(item, "uri")
            return Found(item, ranges, sites_file, uri, _start(item), lines.where(uri, run)[1])

        def place(f: Found) -> tuple[str, int, int]:
            loc = render.location_at(f.uri, *f.start, run, conn.encoding, lines)
            return loc.file, loc.line, loc.column

        async def below(item: Any) -> list[Found]:
            """The children of one item, sorted by file then line: from the uri and the range alone, so
            only the entries shown read their file."""
            if legacy:
                children = _field(item, "parents" if action == "supertypes" else "children") or []
                out = [found(c) for c in children]
            else:
                try:
                    if kind == "call":
                        cls = (
                            lsp.CallHierarchyIncomingCallsParams
                            if action == "callers"
                            else lsp.CallHierarchyOutgoingCallsParams
                        )
                        answer = await sup.request(conn, method, cls(item=item))
                    else:
                        cls = (
                            lsp.TypeHierarchySupertypesParams
                            if action == "supertypes"
                            else lsp.TypeHierarchySubtypesParams
                        )
                        answer = await sup.request(conn, method, cls(item=item))
                except ServerError as exc:
                    if method_missing(exc):
                        raise NotAnswered(lacks(conn, action, f"{method} is not implemented")) from None
                    raise
                if kind == "type":
                    out = [found(t) for t in answer or []]
                elif action == "callers":  # the sites are in the caller
                    out = [found(call.from_, call.from_ranges) for call in answer or []]
                else:  # in the item asked about
                    in_file = lines.where(item.uri, run)[1]
                    out = [found(call.to, call.from_ranges, in_file) for call in answer or []]
            return sorted(out, key=lambda f: (f.shown, f.start))

        entries: list[Entry] = []
        root = found(items[0])
        seen = {(root.uri, root.start)}
        cut = [0]  # entries of the first level not shown

        async def walk(item: Any, level: int) -> None:
            children = await below(item)
            for n, child in enumerate(children):
                if len(entries) >= HIERARCHY_CAP:
                    if level == 1:
                        cut[0] += len(children) - n
                    return
                key = (child.uri, child.start)
                repeated = key in seen
                seen.add(key)
                file, ln, col = place(child)
                name = str(_field(child.item, "name"))
                sites = tuple(sorted({r.start.line + 1 for r in child.ranges or ()}))
                entries.append(Entry(level, file, ln, col, name, sites, child.sites_file or file, repeated))
                if not repeated and level < depth:
                    await walk(child.item, level + 1)

        await walk(items[0], 1)
        top = [e for e in entries if e.level == 1]
        root_file, root_line, root_col = place(root)
        name = _field(items[0], "name")
        if not entries:
            if readiness.was_busy(conn):
                raise NotAnswered(still_indexing(conn, noun))
            return ToolResult.text(
                f"no {noun} of {name} ({root_file}:{root_line}:{root_col}) found by {conn.server.id}",
                {"entries": [], "total": 0, "server": conn.server.id},
            )
        head = (
            f"{len(top) + cut[0]} {noun[:-1]}(s) of {name} ({root_file}:{root_line}:{root_col})"
            + (f", {depth} levels" if depth > 1 else "")
            + ":"
        )
        body = [e.render() for e in entries]
        if len(entries) >= HIERARCHY_CAP:
            more = f"{cut[0]} more {noun} of the first level not shown; " if cut[0] else ""
            body.append(
                f"[cut at {HIERARCHY_CAP} entries: {more}ask with a smaller depth, or from one of the listed symbols]"
            )
        return ToolResult.text(
            "\n".join([head, *body]),
            {
                "entries": [e.to_json() for e in entries],
                "total": len(top) + cut[0],
                "not_shown": cut[0],
                "cut": len(entries) >= HIERARCHY_CAP,
                "server": conn.server.id,
            },
        )

    return await sup.with_file(path, ask)
