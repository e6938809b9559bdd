r"""apply_patch: a unified diff parsed (by unidiff: git's extended headers, renames, "\ No newline at end of
file"), checked, and applied to the files under the run's root, every file or none.

Lines are split at "\n" only, as diff and git do: every line a hunk does not change keeps its bytes (a
CRLF ending, a form feed, a U+2028 inside a string), and lines it adds take the file's ending. Loaded at
the first apply_patch call (`tether.files` lists the tool).
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from tether.atomic import ChangedSince, Snapshot
from tether.files import _changed, _current, _dry_run, _load, _writable
from tether.tools import ToolError, ToolResult

if TYPE_CHECKING:
    from tether.files import PatchArgs


@attrs.frozen
class Hunk:
    old_start: int
    # (' ', '-' or '+'; the line as the patch has it, without its "\n"; True when "\ No newline at end
    # of file" follows it)
    lines: tuple[tuple[str, str, bool], ...]


@attrs.frozen
class FilePatch:
    old: str | None  # None: the file is created
    new: str | None  # None: the file is deleted
    hunks: tuple[Hunk, ...]

    @property
    def target(self) -> str:
        name = self.new if self.new is not None else self.old
        assert name is not None  # parse_patch refuses /dev/null on both sides
        return name


def _strip(name: str) -> str | None:
    name = name.split("\t", 1)[0].strip()
    if name == "/dev/null":
        return None
    if name.startswith(("a/", "b/")):
        return name[2:]
    return name


def _bare(line: str) -> str:
    """A line without its ending ("\n", "\r\n")."""
    line = line[:-1] if line.endswith("\n") else line
    return line[:-1] if line.endswith("\r") else line


@functools.lru_cache(maxsize=4)  # touches parses the patch for approval, then the handler does
def parse_patch(patch: str) -> tuple[FilePatch, ...]:
    """Parse a unified diff; raise ToolError naming what does not fit."""
    from unidiff.errors import UnidiffParseError
    from unidiff.patch import PatchSet

    try:
        parsed = PatchSet(patch)
    except UnidiffParseError as exc:
        raise ToolError(
            f"the patch does not parse: {exc}; give a unified diff as `git diff` or `diff -u` prints it, "
            "with hunk headers that count the lines they hold",
            code="bad_patch",
        ) from None
    if not len(parsed):
        raise ToolError("the patch has no file headers ('--- a/file' / '+++ b/file'); give a unified diff")
    _refuse_stray_lines(patch, parsed)
    files: list[FilePatch] = []
    for pf in parsed:
        old, new = _strip(pf.source_file), _strip(pf.target_file)
        if pf.is_binary_file:
            raise ToolError(
                f"patch: '{new or old}' is a binary patch, which apply_patch does not apply; write the file instead"
            )
        if old is None and new is None:
            raise ToolError("patch: a file has /dev/null on both sides")
        hunks = []
        for h in pf:
            body: list[tuple[str, str, bool]] = []
            for line in h:
                if line.line_type == "\\":  # "\ No newline at end of file": the line before has no ending
                    if body:
                        body[-1] = (body[-1][0], body[-1][1], True)
                    continue
                if line.line_type in " -+":
                    body.append((line.line_type, line.value.removesuffix("\n"), False))
            hunks.append(Hunk(h.source_start, tuple(body)))
        if not hunks and not (pf.is_rename or pf.is_added_file or pf.is_removed_file):
            raise ToolError(f"patch: no hunks for '{new or old}'")
        files.append(FilePatch(old, new, tuple(hunks)))
    return tuple(files)


def _refuse_stray_lines(patch: str, parsed) -> None:
    """unidiff stops a hunk where its header's counts end; a diff line past that would be dropped silently."""
    used = {line.diff_line_no for pf in parsed for h in pf for line in h}
    lines = patch.split("\n")
    in_hunks = False
    for n, text in enumerate(lines, 1):
        if text.startswith("@@"):
            in_hunks = True
        elif text == "-- ":  # git format-patch's signature follows
            return
        elif text.startswith(("--- ", "+++ ")) and (
            (text.startswith("--- ") and n < len(lines) and lines[n].startswith("+++ "))
            or (text.startswith("+++ ") and n > 1 and lines[n - 2].startswith("--- "))
        ):
            continue
        elif in_hunks and text[:1] in ("+", "-") and n not in used:
            raise ToolError(
                f"patch line {n} ('{text[:60]}') lies past the end of its hunk: the hunk header "
                "(@@ -start,count +start,count @@) counts fewer lines than the hunk holds; fix the counts",
                code="bad_patch",
            )


def _apply_hunks(data: bytes, fp: FilePatch) -> bytes:
    """The file's new content. A line the patch adds keeps the ending the patch gives it when the
    patch quotes the file's endings exactly (as git's diffs do); in a patch that leaves out the CRs
    of a CRLF file (as a model writes it), an added line takes the file's ending."""
    src = _lines(data.decode("utf-8"))
    bare = [_bare(line) for line in src]
    places: list[int] = []
    pos = 0
    for n, hunk in enumerate(fp.hunks, 1):
        old = [_bare(t) for tag, t, _ in hunk.lines if tag in " -"]
        want = max(hunk.old_start - 1, 0) if old else hunk.old_start
        # exact place first, then the nearest offset (as `patch` does, without fuzz)
        candidates = sorted(range(pos, len(src) - len(old) + 1), key=lambda s: abs(s - want))
        at = next((s for s in candidates if bare[s : s + len(old)] == old), None)
        if at is None:
            raise ToolError(
                f"patch: hunk {n} of '{fp.target}' does not apply: its context and removed lines were not found "
                f"(expected near line {hunk.old_start}); read the file and make the patch from its current content"
            )
        places.append(at)
        pos = at + len(old)
    quoted = [t for h in fp.hunks for tag, t, _ in h.lines if tag in " -"]
    matched = [
        src[at + k].removesuffix("\n")
        for h, at in zip(fp.hunks, places)
        for k in range(sum(tag in " -" for tag, _, _ in h.lines))
    ]
    eol = "\n"
    if quoted != matched:  # the patch drops the file's CRs: added lines get the file's ending
        eol = next(("\r\n" if line.endswith("\r\n") else "\n" for line in src if line.endswith("\n")), "\n")
    out: list[str] = []

    def put(line: str) -> None:
        if out and not out[-1].endswith("\n"):  # a line that ended the file unended gets an ending
            out[-1] += eol
        out.append(line)

    pos = 0
    for hunk, at in zip(fp.hunks, places):
        for line in src[pos:at]:
            put(line)
        i = at
        for tag, t, unended in hunk.lines:
            if tag == " ":
                put(src[i])
            if tag in " -":
                i += 1
            if tag == "+":
                put(t if unended else t + "\n" if t.endswith("\r") else t + eol)
        pos = i
    for line in src[pos:]:
        put(line)
    return "".join(out).encode("utf-8")


def patch_paths(args: PatchArgs) -> list[str]:
    paths = []
    for fp in parse_patch(args.patch):
        paths.extend(p for p in {fp.old, fp.new} if p is not None)
    return sorted(set(paths))


def _lines(text: str) -> list[str]:
    """The lines of ``text`` with their endings, split at "\n" only (str.splitlines also splits at
    form feeds, U+2028 and more, which no diff tool counts as line breaks)."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _plan_patch(run, patch: str) -> tuple[dict[Path, bytes | None], list[Snapshot], list[str]]:
    """What the patch writes, snapshots of what it was made against, and one line per file."""
    changes: dict[Path, bytes | None] = {}
    expect: list[Snapshot] = []
    summary: list[str] = []
    for fp in parse_patch(patch):
        if fp.old is None:
            target, rel, exists = _writable(run, fp.target)
            if exists:
                raise ToolError(f"patch creates '{rel}', but it already exists; patch it instead")
            changes[target] = _apply_hunks(b"", fp)
            expect.append(Snapshot.of(target, None))
            summary.append(f"created {rel}")
            continue
        source, rel, data, _ = _load(run, fp.old)
        expect.append(Snapshot.of(source, data))
        new = _apply_hunks(data, fp)  # a deletion too must match the current content
        if fp.new is None:
            changes[source] = None
            summary.append(f"deleted {rel}")
            continue
        target, target_rel, _ = _writable(run, fp.new)
        changes[target] = new
        if target != source:
            changes[source] = None
            summary.append(
                f"renamed {rel} -> {target_rel}" + (f" ({len(fp.hunks)} hunk(s))" if fp.hunks else "")
            )
        else:
            summary.append(f"patched {rel} ({len(fp.hunks)} hunk(s))")
    return changes, expect, summary


async def apply_patch(ctx, args: PatchArgs) -> ToolResult:
    run = ctx.run
    changes, expect, summary = await asyncio.to_thread(_plan_patch, run, args.patch)
    if args.dry_run:
        old = {p: await asyncio.to_thread(_current, p) for p in changes}
        return await _dry_run(run, "the patch would make: " + "; ".join(summary), changes, old)
    try:
        await run.write_files(changes, expect=expect)
    except ChangedSince as exc:
        raise _changed(run, exc) from None
    files = sorted(run.relpath(p) for p in changes)
    return ToolResult.text("applied the patch: " + "; ".join(summary), {"files": files})
