"""The host's generic file tools: read, write, edit, apply_patch (its patches: `tether.patch`) — confined to
the run's root.

A plugin module like any family (register it with ``open_run(plugins=[tether.files])``); the
`tether` host does. The three writing tools declare `touches`, so the run wraps them with the
post-write diagnostics hooks: a write answers with the errors it introduced.
"""

from __future__ import annotations

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
    import asyncio

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
    import asyncio

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
    import asyncio

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


LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` as language servers count them (LSP: "\n", "\r\n" and "\r" only; not the
    form feeds, U+2028 and others where str.splitlines also breaks), without their endings."""
    lines = LINE_BREAK.split(text)
    return lines[:-1] if lines[-1] == "" else lines


def _patch_paths(args: PatchArgs) -> list[str]:
    from tether import patch  # parsed by unidiff: both load at the first apply_patch

    return patch.patch_paths(args)


async def apply_patch(ctx, args: PatchArgs) -> ToolResult:
    from tether import patch

    return await patch.apply_patch(ctx, args)


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
