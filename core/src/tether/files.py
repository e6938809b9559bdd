"""The host's generic file tools: read, write, edit, apply_patch — confined to the run's root.

A plugin module like any family (register it with ``open_run(plugins=[tether.files])``); the
`tether` host does. The three writing tools declare `touches`, so the run wraps them with the
post-write diagnostics hooks: a write answers with the errors it introduced.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

import attrs

from tether.args import arg
from tether.atomic import ChangedSince, Snapshot
from tether.hookspecs import hookimpl
from tether.tools import Tier, Tool, ToolError, ToolResult

MAX_LINE = 2000


@attrs.frozen
class ReadArgs:
    path: str = arg("File to read, relative to the root (or absolute inside it).", min_length=1)
    offset: int = arg("First line to show (1-based).", default=1, minimum=1)
    limit: int = arg("How many lines to show at most.", default=2000, minimum=1, maximum=10000)


@attrs.frozen
class WriteArgs:
    path: str = arg("File to create or overwrite, relative to the root.", min_length=1)
    content: str = arg("The whole new content of the file.")
    dry_run: bool = arg(
        "Write nothing: answer the diff this call would make and the diagnostics it would introduce.",
        default=False,
    )


@attrs.frozen
class EditArgs:
    path: str = arg("File to edit, relative to the root.", min_length=1)
    old_string: str = arg("Exact text to replace; must occur once unless replace_all is true.", min_length=1)
    new_string: str = arg("Text to put in its place.")
    replace_all: bool = arg("Replace every occurrence instead of exactly one.", default=False)
    dry_run: bool = arg(
        "Write nothing: answer the diff this call would make and the diagnostics it would introduce.",
        default=False,
    )


@attrs.frozen
class PatchArgs:
    patch: str = arg(
        "A unified diff (as `git diff` or `diff -u` prints it); applied to all files or none.", min_length=1
    )
    dry_run: bool = arg(
        "Write nothing: answer the diff this call would make and the diagnostics it would introduce.",
        default=False,
    )


MAX_FILE_BYTES = 16 * 1024 * 1024  # read, edit and apply_patch refuse bigger files (checked before reading)

_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def _not_a_file(rel: str, mode: int) -> ToolError:
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    return ToolError(
        f"'{rel}' is {kind}, not a regular file; these tools read and write regular files only",
        code="not_a_file",
    )


def _read_bytes(path: Path, rel: str) -> bytes:
    """The content of a regular file, its type and size checked before a byte is read.

    Opened non-blocking, so a FIFO put in its place after the check cannot hang the call.
    """
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise _not_a_file(rel, st.st_mode)
    if st.st_size > MAX_FILE_BYTES:
        raise ToolError(
            f"'{rel}' is {st.st_size / 2**20:.1f} MiB, more than the {MAX_FILE_BYTES // 2**20} MiB these tools read; "
            "search it with a tool that streams (e.g. ast_grep, or grep in a shell) instead",
            code="too_large",
        )
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_a_file(rel, st.st_mode)
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > MAX_FILE_BYTES:
        raise ToolError(
            f"'{rel}' grew past {MAX_FILE_BYTES // 2**20} MiB while it was read", code="too_large"
        )
    return b"".join(chunks)


def _decode(data: bytes, rel: str) -> str:
    if b"\0" in data[:8192]:
        raise ToolError(f"'{rel}' is a binary file; read shows text files only")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"'{rel}' is not valid UTF-8 text; read shows UTF-8 text files only") from None


def _load(run, path: str) -> tuple[Path, str, bytes, str]:
    """An existing text file under the root: its path, its path as shown, its bytes and its text."""
    p = run.resolve_path(path, must_exist=True)
    rel = run.relpath(p)
    data = _read_bytes(p, rel)
    return p, rel, data, _decode(data, rel)


def _writable(run, path: str) -> tuple[Path, str, bool]:
    """A path a file may be written to: refused when something other than a regular file is there."""
    p = run.resolve_path(path)
    rel = run.relpath(p)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return p, rel, False
    if not stat.S_ISREG(st.st_mode):
        raise _not_a_file(rel, st.st_mode)
    return p, rel, True


def _changed(run, exc: ChangedSince) -> ToolError:
    names = ", ".join(f"'{run.relpath(p)}'" for p in exc.paths)
    return ToolError(
        f"{names} changed while this call was working on it; nothing was written: read it again and retry",
        code="changed_meanwhile",
        files=[run.relpath(p) for p in exc.paths],
    )


async def read(ctx, args: ReadArgs) -> ToolResult:
    _, rel, _, text = await asyncio.to_thread(_load, ctx.run, args.path)
    lines = split_lines(text)
    total = len(lines)
    if total and args.offset > total:
        raise ToolError(f"offset {args.offset} is past the end of '{rel}', which has {total} lines")
    start = args.offset - 1
    shown = lines[start : start + args.limit]
    out = []
    for i, line in enumerate(shown, start=args.offset):
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE] + f" [line cut at {MAX_LINE} of {len(line)} characters]"
        out.append(f"{i:6}\t{line}")
    last = start + len(shown)
    text = "\n".join(out) if out else f"('{rel}' is empty)"
    if last < total:
        text += (
            f"\n[showing lines {args.offset}-{last} of {total}; call read with offset={last + 1} to see more]"
        )
    return ToolResult.text(
        text, {"path": rel, "start_line": args.offset, "end_line": last, "total_lines": total}
    )


async def _dry_run(
    run, head: str, changes: dict[Path, bytes | None], old: dict[Path, bytes | None]
) -> ToolResult:
    """A dry run's answer: what the call would write, the diff, and what its preview found; nothing written."""
    from tether.staging import diff_lines, preview

    found = await preview(run, changes)
    rels = sorted(run.relpath(p) for p in changes)
    lines = [f"(dry run) {head}; nothing was written", *found.render(rels), *diff_lines(run, old, changes)]
    return ToolResult.text("\n".join(lines), {"dry_run": True, "files": rels, "preview": found.to_json()})


def _current(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


async def write(ctx, args: WriteArgs) -> ToolResult:
    p, rel, existed = await asyncio.to_thread(_writable, ctx.run, args.path)
    data = args.content.encode("utf-8")
    verb = "overwrote" if existed else "created"
    if args.dry_run:
        old = await asyncio.to_thread(_current, p) if existed else None
        would = "overwrite" if existed else "create"
        return await _dry_run(ctx.run, f"would {would} {rel} ({len(data)} bytes)", {p: data}, {p: old})
    await ctx.run.write_files({p: data})
    lines = args.content.count("\n") + (0 if args.content.endswith("\n") or not args.content else 1)
    return ToolResult.text(
        f"{verb} {rel} ({len(data)} bytes, {lines} lines)",
        {"path": rel, "bytes": len(data), "created": not existed},
    )


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


async def edit(ctx, args: EditArgs) -> ToolResult:
    p, rel, data, text = await asyncio.to_thread(_load, ctx.run, args.path)
    if args.old_string == args.new_string:
        raise ToolError("old_string and new_string are the same; nothing would change")
    count = text.count(args.old_string)
    if count == 0:
        hint = ""
        if args.old_string.strip() and args.old_string.strip() in text:
            hint = (
                " (it does occur with different leading/trailing whitespace: copy the exact text from read)"
            )
        raise ToolError(
            f"old_string was not found in '{rel}'{hint}; read the file and copy the exact text to replace"
        )
    if count > 1 and not args.replace_all:
        at, starts = 0, []
        for _ in range(min(count, 10)):
            at = text.index(args.old_string, at)
            starts.append(str(_line_of(text, at)))
            at += 1
        raise ToolError(
            f"old_string occurs {count} times in '{rel}' (lines {', '.join(starts)}); include more surrounding "
            "text to make it unique, or set replace_all to true"
        )
    new = (
        text.replace(args.old_string, args.new_string)
        if args.replace_all
        else text.replace(args.old_string, args.new_string, 1)
    )
    first = _line_of(text, text.index(args.old_string))
    if args.dry_run:
        n = count if args.replace_all else 1
        head = f"would edit {rel}: {n} replacement(s), first at line {first}"
        return await _dry_run(ctx.run, head, {p: new.encode("utf-8")}, {p: data})
    try:
        await ctx.run.write_files({p: new.encode("utf-8")}, expect=[Snapshot.of(p, data)])
    except ChangedSince as exc:
        raise _changed(ctx.run, exc) from None
    return ToolResult.text(
        f"edited {rel}: {count if args.replace_all else 1} replacement(s), first at line {first}",
        {"path": rel, "replacements": count if args.replace_all else 1, "line": first},
    )


# -- apply_patch -------------------------------------------------------------------------------------
# Parsed by unidiff (git's extended headers, renames, "\ No newline at end of file"); applied here.
# Lines are split at "\n" only, as diff and git do: every line a hunk does not change keeps its bytes
# (a CRLF ending, a form feed, a U+2028 inside a string), and lines it adds take the file's ending.


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


LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` as language servers count them (LSP: "\n", "\r\n" and "\r" only; not the
    form feeds, U+2028 and others where str.splitlines also breaks), without their endings."""
    lines = LINE_BREAK.split(text)
    return lines[:-1] if lines[-1] == "" else lines


def _lines(text: str) -> list[str]:
    """The lines of ``text`` with their endings, split at "\n" only (str.splitlines also splits at
    form feeds, U+2028 and more, which no diff tool counts as line breaks)."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _patch_paths(args: PatchArgs) -> list[str]:
    paths = []
    for fp in parse_patch(args.patch):
        paths.extend(p for p in {fp.old, fp.new} if p is not None)
    return sorted(set(paths))


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


def _one(args) -> Sequence[str]:
    return [args.path]


TOOLS = (
    Tool(
        "read",
        Tier.READ,
        "Read a text file under the root, with line numbers.",
        ReadArgs,
        read,
        family="files",
    ),
    Tool(
        "write",
        Tier.WRITE,
        "Create or overwrite a file under the root with the given content.",
        WriteArgs,
        write,
        family="files",
        touches=_one,
    ),
    Tool(
        "edit",
        Tier.WRITE,
        "Replace an exact string in a file (once, or every occurrence with replace_all).",
        EditArgs,
        edit,
        family="files",
        touches=_one,
    ),
    Tool(
        "apply_patch",
        Tier.WRITE,
        "Apply a unified diff to files under the root: every file changes or none does.",
        PatchArgs,
        apply_patch,
        family="files",
        touches=_patch_paths,
    ),
)


@hookimpl
def tether_register_tools(run, register) -> None:
    for tool in TOOLS:
        register(tool)
