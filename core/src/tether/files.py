"""The host's generic file tools: read, write, edit, apply_patch — confined to the run's root.

A plugin module like any family (register it with ``open_run(plugins=[tether.files])``); the
`tether` host does. The three writing tools declare `touches`, so the run wraps them with the
post-write diagnostics hooks: a write answers with the errors it introduced.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import attrs

from tether.args import arg
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


@attrs.frozen
class EditArgs:
    path: str = arg("File to edit, relative to the root.", min_length=1)
    old_string: str = arg("Exact text to replace; must occur once unless replace_all is true.", min_length=1)
    new_string: str = arg("Text to put in its place.")
    replace_all: bool = arg("Replace every occurrence instead of exactly one.", default=False)


@attrs.frozen
class PatchArgs:
    patch: str = arg("A unified diff (as `git diff` or `diff -u` prints it); applied to all files or none.", min_length=1)


def write_all(changes) -> None:
    from tether.atomic import write_all as atomic_write_all  # hashlib/tempfile: only when writing

    atomic_write_all(changes)


def _read_text(path: Path, rel: str) -> str:
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        raise ToolError(f"'{rel}' is a binary file; read shows text files only")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"'{rel}' is not valid UTF-8 text; read shows UTF-8 text files only") from None


def _existing_file(run, path: str) -> tuple[Path, str]:
    p = run.resolve_path(path, must_exist=True)
    rel = run.relpath(p)
    if p.is_dir():
        raise ToolError(f"'{rel}' is a directory, not a file")
    return p, rel


async def read(ctx, args: ReadArgs) -> ToolResult:
    p, rel = _existing_file(ctx.run, args.path)
    lines = _read_text(p, rel).splitlines()
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
        text += f"\n[showing lines {args.offset}-{last} of {total}; call read with offset={last + 1} to see more]"
    return ToolResult.text(text, {"path": rel, "start_line": args.offset, "end_line": last, "total_lines": total})


async def write(ctx, args: WriteArgs) -> ToolResult:
    p = ctx.run.resolve_path(args.path)
    rel = ctx.run.relpath(p)
    if p.is_dir():
        raise ToolError(f"'{rel}' is a directory; give a file path")
    existed = p.exists()
    data = args.content.encode("utf-8")
    write_all({p: data})
    verb = "overwrote" if existed else "created"
    lines = args.content.count("\n") + (0 if args.content.endswith("\n") or not args.content else 1)
    return ToolResult.text(f"{verb} {rel} ({len(data)} bytes, {lines} lines)", {"path": rel, "bytes": len(data), "created": not existed})


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


async def edit(ctx, args: EditArgs) -> ToolResult:
    p, rel = _existing_file(ctx.run, args.path)
    text = _read_text(p, rel)
    if args.old_string == args.new_string:
        raise ToolError("old_string and new_string are the same; nothing would change")
    count = text.count(args.old_string)
    if count == 0:
        hint = ""
        if args.old_string.strip() and args.old_string.strip() in text:
            hint = " (it does occur with different leading/trailing whitespace: copy the exact text from read)"
        raise ToolError(f"old_string was not found in '{rel}'{hint}; read the file and copy the exact text to replace")
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
    new = text.replace(args.old_string, args.new_string) if args.replace_all else text.replace(args.old_string, args.new_string, 1)
    write_all({p: new.encode("utf-8")})
    first = _line_of(text, text.index(args.old_string))
    return ToolResult.text(
        f"edited {rel}: {count if args.replace_all else 1} replacement(s), first at line {first}",
        {"path": rel, "replacements": count if args.replace_all else 1, "line": first},
    )


# -- apply_patch -------------------------------------------------------------------------------------

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@attrs.frozen
class Hunk:
    old_start: int
    lines: tuple[str, ...]  # each begins with ' ', '-' or '+'


@attrs.frozen
class FilePatch:
    old: str | None  # None: the file is created
    new: str | None  # None: the file is deleted
    hunks: tuple[Hunk, ...]

    @property
    def target(self) -> str:
        return self.new if self.new is not None else self.old  # type: ignore[return-value]


def _strip(name: str) -> str | None:
    name = name.split("\t", 1)[0].strip()
    if name == "/dev/null":
        return None
    if name.startswith(("a/", "b/")):
        return name[2:]
    return name


def parse_patch(patch: str) -> list[FilePatch]:
    """Parse a unified diff; raise ToolError naming the line that does not fit."""
    lines = patch.splitlines()
    files: list[FilePatch] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise ToolError(f"patch line {i + 2}: expected '+++ <file>' after '{lines[i]}'")
        old, new = _strip(lines[i][4:]), _strip(lines[i + 1][4:])
        if old is None and new is None:
            raise ToolError(f"patch line {i + 1}: both sides are /dev/null")
        i += 2
        hunks: list[Hunk] = []
        while i < len(lines) and lines[i].startswith("@@"):
            m = _HUNK.match(lines[i])
            if not m:
                raise ToolError(f"patch line {i + 1}: malformed hunk header '{lines[i]}'")
            old_count = int(m.group(2)) if m.group(2) is not None else 1
            new_count = int(m.group(4)) if m.group(4) is not None else 1
            i += 1
            body: list[str] = []
            seen_old = seen_new = 0
            while i < len(lines) and (seen_old < old_count or seen_new < new_count):
                line = lines[i]
                if line.startswith("\\"):  # "\ No newline at end of file"
                    i += 1
                    continue
                tag = line[:1] or " "  # an empty line is an empty context line
                if tag not in " -+":
                    raise ToolError(f"patch line {i + 1}: expected a line starting with ' ', '-' or '+', got '{line[:60]}'")
                body.append(tag + line[1:])
                seen_old += tag in " -"
                seen_new += tag in " +"
                i += 1
            if seen_old != old_count or seen_new != new_count:
                raise ToolError(f"patch: a hunk of '{new or old}' is shorter than its header says (the patch is truncated)")
            while i < len(lines) and lines[i].startswith("\\"):
                i += 1
            hunks.append(Hunk(int(m.group(1)), tuple(body)))
        if not hunks:
            raise ToolError(f"patch: no hunks for '{new or old}'")
        files.append(FilePatch(old, new, tuple(hunks)))
    if not files:
        raise ToolError("the patch has no file headers ('--- a/file' / '+++ b/file'); give a unified diff")
    return files


def _apply_hunks(text: str, fp: FilePatch) -> str:
    src = text.splitlines()
    trailing_newline = text.endswith("\n") or not text
    out: list[str] = []
    pos = 0
    for n, hunk in enumerate(fp.hunks, 1):
        old = [line[1:] for line in hunk.lines if line[0] in " -"]
        new = [line[1:] for line in hunk.lines if line[0] in " +"]
        want = max(hunk.old_start - 1, 0) if old else hunk.old_start
        # exact place first, then the nearest offset (as `patch` does, without fuzz)
        candidates = sorted(range(pos, len(src) - len(old) + 1), key=lambda s: abs(s - want))
        at = next((s for s in candidates if src[s : s + len(old)] == old), None)
        if at is None:
            raise ToolError(
                f"patch: hunk {n} of '{fp.target}' does not apply: its context and removed lines were not found "
                f"(expected near line {hunk.old_start}); read the file and make the patch from its current content"
            )
        out.extend(src[pos:at])
        out.extend(new)
        pos = at + len(old)
    out.extend(src[pos:])
    return "\n".join(out) + ("\n" if trailing_newline and out else "")


def _patch_paths(args: PatchArgs) -> list[str]:
    paths = []
    for fp in parse_patch(args.patch):
        paths.extend(p for p in {fp.old, fp.new} if p is not None)
    return sorted(set(paths))


async def apply_patch(ctx, args: PatchArgs) -> ToolResult:
    run = ctx.run
    changes: dict[Path, bytes | None] = {}
    summary: list[str] = []
    for fp in parse_patch(args.patch):
        if fp.old is None:
            target = run.resolve_path(fp.new)  # type: ignore[arg-type]
            if target.exists():
                raise ToolError(f"patch creates '{fp.new}', but it already exists; patch it instead")
            changes[target] = _apply_hunks("", fp).encode()
            summary.append(f"created {run.relpath(target)}")
            continue
        source, rel = _existing_file(run, fp.old)
        text = _read_text(source, rel)
        if fp.new is None:
            _apply_hunks(text, fp)  # the deletion must match the current content
            changes[source] = None
            summary.append(f"deleted {rel}")
            continue
        target = run.resolve_path(fp.new)
        changes[target] = _apply_hunks(text, fp).encode()
        if target != source:
            changes[source] = None
            summary.append(f"renamed {rel} -> {run.relpath(target)}")
        else:
            summary.append(f"patched {rel} ({len(fp.hunks)} hunk(s))")
    write_all(changes)
    files = sorted(run.relpath(p) for p in changes)
    return ToolResult.text("applied the patch: " + "; ".join(summary), {"files": files})


def _one(args) -> Sequence[str]:
    return [args.path]


TOOLS = (
    Tool("read", Tier.READ, "Read a text file under the root, with line numbers.", ReadArgs, read, family="files"),
    Tool("write", Tier.WRITE, "Create or overwrite a file under the root with the given content.", WriteArgs, write,
         family="files", touches=_one),
    Tool("edit", Tier.WRITE, "Replace an exact string in a file (once, or every occurrence with replace_all).", EditArgs,
         edit, family="files", touches=_one),
    Tool("apply_patch", Tier.WRITE, "Apply a unified diff to files under the root: every file changes or none does.",
         PatchArgs, apply_patch, family="files", touches=_patch_paths),
)


@hookimpl
def tether_register_tools(run, register) -> None:
    for tool in TOOLS:
        register(tool)
