"""A symbol found without its line: a qualified name through workspace symbols, or a name declared once
in a given file through its document symbols. Several matches are listed, nothing is guessed."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import attrs
from tether.files import split_lines
from tether.tools import ToolError

from tether_lsp import render
from tether_lsp.positions import from_units

if TYPE_CHECKING:
    from tether.run import Run

    from tether_lsp.args import LspArgs
    from tether_lsp.connection import Connection, Doc
    from tether_lsp.supervisor import Supervisor

QUALIFIER = re.compile(r"\.|::")  # Context.invoke, FlagSet.VarP, Ky.#options, ns::f
LISTED = 20
GO_METHOD = re.compile(r"\(\*?(?P<type>[\w.]+)\)\.(?P<name>\w+)")


@attrs.frozen
class Found:
    file: str
    line: int  # 1-based
    column: int  # 1-based, in characters
    name: str
    kind: str
    container: str

    def render(self) -> str:
        inside = f" (in {self.container})" if self.container else ""
        return f"  {self.file}:{self.line}:{self.column}: {self.kind} {self.name}{inside}"


def split(symbol: str) -> tuple[str, str]:
    """(qualifier, name): ("Context", "invoke") of "Context.invoke"; ("", name) of a bare name."""
    parts = QUALIFIER.split(symbol)
    if len(parts) < 2 or not all(parts):
        return "", symbol
    return ".".join(parts[:-1]), parts[-1]


def _contained(container: str, qualifier: str) -> bool:
    """Whether a server's container name ("Context", "click.core.Context", "github.com/x/pflag") names the
    qualifier ("Context", "core.Context")."""
    container = QUALIFIER.sub(".", container)
    return container == qualifier or container.endswith("." + qualifier)


async def locate(run: Run, sup: Supervisor, args: LspArgs) -> tuple[LspArgs, str]:
    """``args`` with file, line and occurrence of its symbol found (and the line said in the answer), or a
    ToolError: the matches when there are several, that there is none, or what to give."""
    symbol = args.symbol
    assert symbol is not None  # asked only for a symbol given without its line
    qualifier, name = split(symbol)
    if args.file is None and not qualifier:
        raise ToolError(
            f"action {args.action} needs line (the line on which '{symbol}' is written), or file (a file that "
            f"declares '{symbol}' once), or a qualified name (e.g. Class.method) to find it by",
            code="missing_argument",
            missing=["line"],
        )
    if args.file is not None:
        found = await _in_file(run, sup, args.file, qualifier, name)
        how = f"declared in {run.relpath(run.resolve_path(args.file))}"
    else:
        found = await _in_workspace(run, sup, qualifier, name)
        how = "in the workspace symbols"
    if not found:
        where = f"in {args.file}" if args.file is not None else "among the workspace symbols"
        raise ToolError(
            f"no symbol named '{symbol}' {where} (exact name{' and container' if qualifier else ''}); give the "
            "line where it is written, or search with action symbols and a query",
            code="symbol_not_found",
        )
    if len(found) > 1:
        lines = [
            f"'{symbol}' names {len(found)} symbols {how}; give file and line (or a qualified name) of one:"
        ]
        lines += [f.render() for f in found[:LISTED]]
        if len(found) > LISTED:
            lines.append(f"  ... {len(found) - LISTED} more")
        raise ToolError(
            "\n".join(lines),
            code="ambiguous_symbol",
            matches=[attrs.asdict(f) for f in found[:LISTED]],
        )
    (hit,) = found
    path = run.resolve_path(hit.file, must_exist=True)
    source = split_lines(path.read_text(encoding="utf-8", errors="replace"))[hit.line - 1]
    starts = [m.start() for m in re.finditer(re.escape(hit.name), source)]
    occurrence = starts.index(hit.column - 1) + 1 if hit.column - 1 in starts else None
    if occurrence is None:
        raise ToolError(
            f"the server places '{symbol}' at {hit.file}:{hit.line}:{hit.column}, where it is not written; give the "
            "line where it is written",
            code="symbol_not_on_line",
        )
    said = f"'{symbol}' is at {hit.file}:{hit.line} ({hit.kind}{', ' + how})"
    resolved = attrs.evolve(
        args,
        file=hit.file,
        line=hit.line,
        symbol=hit.name,
        occurrence=occurrence if len(starts) > 1 else None,
    )
    return resolved, said


async def _in_workspace(run: Run, sup: Supervisor, qualifier: str, name: str) -> list[Found]:
    from tether_lsp.symbols import workspace_symbols

    result = await workspace_symbols(run, sup, name)
    found = []
    for row in (result.data or {}).get("symbols", []):
        if row["file"].startswith("/") or not row["line"]:
            continue  # outside the root (a library's declarations)
        full = f"{qualifier}.{name}"
        exact = row["name"] == name and _contained(row["container"], qualifier)
        if exact or QUALIFIER.sub(".", row["name"]) in (full, f"{qualifier.split('.')[-1]}.{name}"):
            found.append(Found(row["file"], row["line"], row["column"], name, row["kind"], row["container"]))
    return sorted(set(found), key=lambda f: (f.file, f.line, f.column))


async def _in_file(run: Run, sup: Supervisor, file: str, qualifier: str, name: str) -> list[Found]:
    from tether_lsp.common import source_file
    from tether_lsp.symbols import document_symbols, symbol_kind

    path, rel, _ = source_file(run, file)

    async def outline(conn: Connection, doc: Doc) -> list[Found]:
        result = await document_symbols(sup, conn, doc)
        lines = render.Lines({doc.path: doc.text})
        found: list[Found] = []

        def walk(items: Any, parents: tuple[str, ...]) -> None:
            for s in items or []:
                container = ".".join(parents) or (getattr(s, "container_name", None) or "")
                own = s.name
                if method := GO_METHOD.fullmatch(own):  # gopls: "(*FlagSet).VarP"
                    container, own = method["type"], method["name"]
                if own == name and (not qualifier or _contained(container, qualifier)):
                    rng = getattr(s, "selection_range", None) or s.location.range
                    col = from_units(lines.get(doc.path, rng.start.line), rng.start.character, conn.encoding)
                    found.append(
                        Found(rel, rng.start.line + 1, col + 1, name, symbol_kind(conn, s.kind), container)
                    )
                walk(getattr(s, "children", None), (*parents, s.name))

        walk(result, ())
        return found

    return await sup.with_file(path, outline)
