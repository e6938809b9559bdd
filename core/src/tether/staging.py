"""Staged changes and previews, top to bottom: see the breakage before it is written.

A tool that can stage (``Tool(stages=True)``: `ast_edit`, `lsp_rename` with ``preview``) hands the run a
set of new file contents with a snapshot of each file as it read it. The run keeps it as a
`StagedChange` under an ``edit_id`` and previews it: the diagnostics plugins are asked, through
``tether_diagnostics_preview``, for each affected file's set before and with the new contents, without a
byte written (the language servers get the contents as unsaved documents and are put back to the disk
after). What the change would introduce is decided by the same rule as for a write, on a copy of the run's
registry: a preview neither records nor consumes anything, so the write that follows reports what the
preview showed.

`resolve` (registered by the core when a tool of the run can stage) writes a staged change all at once,
refused when a file changed since it was staged; with ``if_clean`` also when the preview found new errors
(or warnings, with ``if_clean: "warnings"``) or could not check a file. A dry run of a file tool
(``dry_run: true``) is a preview of a plain change: nothing written, no approval asked, nothing staged.
"""

from __future__ import annotations

import inspect
import itertools
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from tether.args import arg
from tether.diagnostics import (
    DIAGNOSTICS_SLACK,
    Diagnostic,
    PreviewDiagnostics,
    render_introduced,
    sort_diagnostics,
)
from tether.hookspecs import hookimpl
from tether.options import CoreOptions
from tether.tools import Tier, Tool, ToolError, ToolResult

if TYPE_CHECKING:
    from tether.atomic import Snapshot
    from tether.run import Run

log = logging.getLogger("tether")

DIFF_LINES = 120  # diff lines a preview shows


# -- what a preview found ----------------------------------------------------------------------------


@attrs.frozen
class Preview:
    """The diagnostics a change would introduce, and what could not be checked.

    Attributes:
        introduced: what the change would introduce (the write rule, on a copy of the registry), errors first.
        unchecked: files of the change (or files it would break) that could not be checked, and why.
        notes: the checkers' lines for the model (a cut round, importers not looked for).
    """

    introduced: tuple[Diagnostic, ...] = ()
    unchecked: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()

    def errors(self, warnings: bool = False) -> list[Diagnostic]:
        kinds = ("error", "warning") if warnings else ("error",)
        return [d for d in self.introduced if d.severity in kinds]

    def to_json(self) -> dict[str, Any]:
        return {
            "introduced": [d.to_json() for d in self.introduced],
            "unchecked": [{"file": f, "why": why} for f, why in self.unchecked],
            "notes": list(self.notes),
        }

    def render(self, paths: Sequence[str]) -> list[str]:
        """The lines the model sees: said as what WOULD happen, and never "clean" unless every file was checked."""
        lines = render_introduced(self.introduced, paths, "This change would introduce")
        if not self.introduced and {f for f, _ in self.unchecked} >= set(paths):
            pass  # nothing was checked: no claim either way
        elif not self.introduced:
            if self.unchecked:
                lines.append("The preview found no new diagnostics in the files it could check.")
            else:
                lines.append("The preview found no new diagnostics: nothing would be introduced.")
        by_why: dict[str, list[str]] = {}
        for file, why in self.unchecked:
            by_why.setdefault(why, []).append(file)
        for why, files in by_why.items():
            shown = ", ".join(files[:10]) + (f" (and {len(files) - 10} more)" if len(files) > 10 else "")
            lines.append(f"not checked ({why}): {shown}")
        lines.extend(self.notes)
        return lines


_previews = itertools.count(1)


async def preview(run: Run, contents: Mapping[Path, bytes | None]) -> Preview:
    """What writing ``contents`` (None: delete) would introduce, asked of every diagnostics plugin; nothing is
    written and the run's registry is left as it was."""
    import asyncio

    texts = {
        run.relpath(p): (None if c is None else c.decode("utf-8", "replace")) for p, c in contents.items()
    }
    paths = sorted(texts)
    call_id = f"{run.id}.preview.{next(_previews)}"
    hook = run.hook.tether_diagnostics_preview
    # a round before the change and one with it
    wait = 2 * run.options.of(CoreOptions).diagnostics_timeout + DIAGNOSTICS_SLACK
    kwargs = {"run": run, "contents": texts, "call_id": call_id}
    before: dict[str, list[Diagnostic]] = {}
    after: dict[str, list[Diagnostic]] = {}
    unchecked: dict[str, str] = {}
    notes: list[str] = []
    covered: set[str] = set()
    for impl in reversed(hook.get_hookimpls()):
        try:
            answer = impl.function(*(kwargs[a] for a in impl.argnames))
            value = await asyncio.wait_for(answer, wait) if inspect.isawaitable(answer) else answer
        except TimeoutError:
            notes.append("the preview is incomplete: a checker did not answer in time")
            unchecked.update({p: "its checker did not answer in time" for p in paths if p not in covered})
            continue
        except Exception as exc:
            log.exception("diagnostics preview failed")
            notes.append(f"the preview is incomplete: a checker failed ({type(exc).__name__})")
            unchecked.update({p: "its checker failed" for p in paths if p not in covered})
            continue
        if not isinstance(value, PreviewDiagnostics):
            continue
        before.update(value.before)
        after.update(value.after)
        unchecked.update(value.unchecked)
        covered |= set(value.covered)
        notes.extend(value.notes)
    for p in paths:
        if p not in covered and p not in unchecked:
            unchecked[p] = "no checker of this run previews changes to it"
    registry = run.diagnostics.copy()  # a preview neither records nor consumes anything
    registry.baseline(before)
    introduced = registry.update({f: d for f, d in after.items() if f not in unchecked})
    return Preview(tuple(sort_diagnostics(introduced)), tuple(sorted(unchecked.items())), tuple(notes))


def diff(rel: str, old: bytes | None, new: bytes | None, context: int = 1) -> list[str]:
    """The unified diff of one file (a created or deleted file against /dev/null)."""
    import difflib  # not at import: listing the tools imports nothing it does not need

    a = (old or b"").decode("utf-8", "replace").splitlines()
    b = (new or b"").decode("utf-8", "replace").splitlines()
    src = f"a/{rel}" if old is not None else "/dev/null"
    dst = f"b/{rel}" if new is not None else "/dev/null"
    return list(difflib.unified_diff(a, b, src, dst, n=context, lineterm=""))


def diff_lines(run: Run, old: Mapping[Path, bytes | None], new: Mapping[Path, bytes | None]) -> list[str]:
    """The change's diff, bounded, with the cut said."""
    out: list[str] = []
    for path in sorted(new):
        out.extend(diff(run.relpath(path), old.get(path), new[path]))
    if len(out) > DIFF_LINES:
        cut = len(out) - DIFF_LINES
        out = [
            *out[:DIFF_LINES],
            f"[{cut} more diff lines not shown; the whole change is what a write makes]",
        ]
    return out


# -- the store --------------------------------------------------------------------------------------


@attrs.define
class StagedChange:
    """A change a tool staged: written by `resolve` all at once, or not at all.

    Attributes:
        edit_id: ``edit_N``, what `resolve` takes.
        by: the tool that staged it.
        changes: the new content of every file (None: delete it).
        snapshots: each file as the tool read it: `resolve` refuses when one no longer holds.
        what: what accept writes, for the model ("3 replacements", "a rename of x to y").
        preview: what the change would introduce, when it was previewed.
        state: pending, accepted or discarded.
    """

    edit_id: str
    by: str
    changes: dict[Path, bytes | None]
    snapshots: list[Snapshot]
    what: str
    preview: Preview | None = None
    state: str = "pending"


class Staging:
    """The run's staged changes (``run.staging``)."""

    def __init__(self) -> None:
        self.changes: dict[str, StagedChange] = {}

    def stage(
        self,
        by: str,
        changes: Mapping[Path, bytes | None],
        snapshots: Sequence[Snapshot],
        what: str,
        preview: Preview | None = None,
    ) -> StagedChange:
        edit_id = f"edit_{len(self.changes) + 1}"
        change = StagedChange(edit_id, by, dict(changes), list(snapshots), what, preview)
        self.changes[edit_id] = change
        return change

    def pending(self) -> list[str]:
        return [c.edit_id for c in self.changes.values() if c.state == "pending"]

    def get(self, edit_id: str) -> StagedChange:
        """The change, pending; a `ToolError` naming the pending ones when it is unknown or already resolved."""
        change = self.changes.get(edit_id.strip())
        if change is None:
            pending = self.pending()
            listing = f"pending edits: {', '.join(pending)}" if pending else "no edit is pending in this run"
            raise ToolError(
                f"unknown edit_id '{edit_id}'; {listing}. ast_edit (or lsp_rename with preview) gives the id",
                code="unknown_edit",
            )
        if change.state != "pending":
            raise ToolError(
                f"{change.edit_id} was already {change.state}; stage the change again with {change.by} if you "
                "still want it",
                code="already_resolved",
                state=change.state,
            )
        return change


# -- resolve ----------------------------------------------------------------------------------------


@attrs.frozen
class ResolveArgs:
    edit_id: str = arg(
        "The id the staging tool gave (ast_edit, lsp_rename with preview), e.g. edit_1", min_length=1
    )
    action: Literal["accept", "discard"] = arg("accept writes the staged change, discard drops it")
    if_clean: bool | Literal["warnings"] = arg(
        'With accept: write only if the preview found no new errors ("warnings": no new errors or warnings) '
        "and checked every file of the change; else refuse and write nothing.",
        default=False,
    )


def _changed_since_staged(run: Run, change: StagedChange, paths: Sequence[Path]) -> ToolError:
    what = [f"{run.relpath(p)} ({'deleted' if not p.exists() else 'changed'})" for p in paths]
    return ToolError(
        f"refused {change.edit_id}: {', '.join(what)} changed since the change was staged; nothing was written "
        f"(a partly applied change leaves code in neither form). Run {change.by} again to stage it against the "
        "current files",
        code="changed_since_staged",
        files=[run.relpath(p) for p in paths],
    )


def _not_clean(run: Run, change: StagedChange, warnings: bool) -> ToolError | None:
    """The refusal of an ``if_clean`` accept, or None when the preview allows it."""
    p = change.preview
    if p is None:
        return ToolError(
            f"refused {change.edit_id}: it was staged without a preview, so if_clean cannot be decided; nothing "
            "was written. Accept without if_clean to write it",
            code="not_previewed",
        )
    bad = p.errors(warnings)
    if bad:
        kinds = "errors or warnings" if warnings else "errors"
        shown = "; ".join(d.render() for d in bad[:10]) + (
            f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""
        )
        return ToolError(
            f"refused {change.edit_id}: its preview found {len(bad)} new {kinds}: {shown}. Nothing was written. "
            "Stage a change that does not break these, or accept without if_clean",
            code="not_clean",
            diagnostics=[d.to_json() for d in bad],
        )
    if p.unchecked:
        files = ", ".join(f"{f} ({why})" for f, why in p.unchecked[:10])
        return ToolError(
            f"refused {change.edit_id}: the preview could not check {files}, so it is not known to be clean. "
            "Nothing was written. Accept without if_clean to write it anyway",
            code="not_checked",
            files=[f for f, _ in p.unchecked],
        )
    return None


def resolve_touches(run: Run, args: ResolveArgs) -> list[str]:
    """The files an accept will write. A refusal (a file changed since staging, an unclean preview) is made
    here, before the write's diagnostics baseline is asked for: a refusal needs none. The handler checks the
    snapshots again under the write lock."""
    change = run.staging.changes.get(args.edit_id.strip())
    if args.action != "accept" or change is None or change.state != "pending":
        return []
    changed = [snap.path for snap in change.snapshots if not snap.still_holds()]
    if changed:
        raise _changed_since_staged(run, change, changed)
    if args.if_clean is not False and (refusal := _not_clean(run, change, args.if_clean == "warnings")):
        raise refusal
    return [run.relpath(p) for p in change.changes]


async def resolve(ctx: Any, args: ResolveArgs) -> ToolResult:
    from tether.atomic import ChangedSince

    run = ctx.run
    change = run.staging.get(args.edit_id)
    rels = [run.relpath(p) for p in change.changes]
    if args.action == "discard":
        change.state = "discarded"
        return ToolResult.text(
            f"discarded {change.edit_id}; nothing was written", {"edit_id": change.edit_id, "files": []}
        )
    if args.if_clean is not False and (refusal := _not_clean(run, change, args.if_clean == "warnings")):
        raise refusal
    try:  # the snapshots are checked under the root's write lock, so no write slips in between
        await run.write_files(dict(change.changes), expect=change.snapshots)
    except ChangedSince as exc:
        raise _changed_since_staged(run, change, exc.paths) from None
    except OSError as exc:
        raise ToolError(
            f"writing {change.edit_id} failed ({exc.strerror or exc}); no file was changed (files already replaced "
            "were restored). Fix the cause (permissions, disk space) and call resolve again",
            code="write_failed",
            files=rels,
        ) from None
    change.state = "accepted"
    n = len(rels)
    return ToolResult.text(
        f"accepted {change.edit_id}: {change.what} written to {n} file{'s' if n != 1 else ''}: "
        + ", ".join(rels),
        {"edit_id": change.edit_id, "files": rels},
    )


def preview_note(run: Run, result: ToolResult, introduced: Sequence[Diagnostic]) -> list[str]:
    """After `resolve` wrote a previewed change: which of the diagnostics it introduced the preview showed."""
    edit_id = (result.data or {}).get("edit_id")
    change = run.staging.changes.get(edit_id) if isinstance(edit_id, str) else None
    if change is None or change.state != "accepted" or change.preview is None:
        return []
    shown = {d.key for d in change.preview.introduced}
    seen = sum(d.key in shown for d in introduced)
    if not introduced:
        n = len(change.preview.introduced)
        return [f"the preview's {n} diagnostic(s) did not come with the write"] if n else []
    if seen == len(introduced):
        return [f"the preview showed all {len(introduced)} of these"]
    return [f"the preview showed {seen} of these {len(introduced)}; the others are new since it"]


RESOLVE = Tool(
    "resolve",
    Tier.WRITE,
    "Accept (write all files at once, refused if any changed since staging; with if_clean, also if its preview "
    "found new errors) or discard a change staged by ast_edit or lsp_rename with preview.",
    ResolveArgs,
    resolve,
    family="core",
    parallel_safe=False,
)


@hookimpl(trylast=True)
def tether_register_tools(run: Run, register: Any) -> None:
    """`resolve`, once some tool of the run can stage (its families registered before: this runs last)."""
    if any(t.stages for t in register.tools.values()):
        register(attrs.evolve(RESOLVE, touches=lambda args: resolve_touches(run, args)))
