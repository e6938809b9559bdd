"""A cell's Jupyter messages turned into what the model sees: text and images, bounded, in order.

- streams: stdout and stderr, carriage-return progress collapsed, head and tail kept when long;
- results and displays: the richest readable text (markdown, plain, then HTML stripped of tags);
  a PNG/JPEG becomes an image block, once (ipykernel sends a figure that is the last expression both
  as the result and as a display: identical images are deduplicated);
- errors: type, message and the traceback frames of the cell's own code (library and helper frames
  are counted, not shown).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from typing import Any

import attrs
from tether import Image, Text

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_CR = re.compile(r"[^\n]*\r(?!\n)")
_TAG = re.compile(r"<[^>]+>")
MAX_IMAGES = 8
MAX_TRACEBACK_FRAMES = 8


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def bounded(text: str, limit: int, what: str) -> tuple[str, bool]:
    """Head and tail of ``text`` within ``limit`` characters, saying what was cut and how to see it."""
    if len(text) <= limit:
        return text, False
    head = text[: limit * 2 // 3]
    tail = text[-(limit // 3) :]
    cut = len(text) - len(head) - len(tail)
    note = f"\n[... {cut:,} characters of {what} cut (showing the first {len(head):,} and the last {len(tail):,}); write it to a file and read parts of it, or print less ...]\n"
    return head + note + tail, True


def bundle_text(data: dict[str, Any]) -> str | None:
    if "text/markdown" in data:
        return str(data["text/markdown"])
    if "text/plain" in data:
        return strip_ansi(str(data["text/plain"]))
    if "text/html" in data:
        return html.unescape(_TAG.sub("", str(data["text/html"]))).strip()
    if "application/json" in data:
        return json.dumps(data["application/json"], indent=1)
    if "text/latex" in data:
        return str(data["text/latex"])
    if "image/svg+xml" in data:
        return f"[an SVG image of {len(data['image/svg+xml']):,} characters, not shown]"
    return None


def trim_traceback(lines: list[str]) -> tuple[list[str], int]:
    """The cell's own frames of a Jupyter traceback, and how many other frames were left out."""
    kept: list[str] = []
    omitted = 0
    frames = [strip_ansi(x) for x in lines]
    for i, frame in enumerate(frames):
        body = frame.strip("\n")
        if not body.strip() or set(body.strip()) <= {"-"}:
            continue  # the separator line
        if "<tether-helper>" in body or "__tether" in body.split("\n", 1)[0]:
            omitted += 1
            continue
        head = body.lstrip().split("\n", 1)[0]
        own = head.startswith(("Cell In[", "Input In [", "File <ipython-input")) or (
            head.startswith("at ") and "<anonymous>" in head  # Deno: code of a cell has no file name
        )
        last = i == len(frames) - 1
        if own or last or "Error" in head.split(":", 1)[0] or "Exception" in head.split(":", 1)[0]:
            kept.append(body)
        else:
            omitted += 1
    if len(kept) > MAX_TRACEBACK_FRAMES:
        omitted += len(kept) - MAX_TRACEBACK_FRAMES
        kept = kept[: MAX_TRACEBACK_FRAMES // 2] + kept[-MAX_TRACEBACK_FRAMES // 2 :]
    return kept, omitted


@attrs.define
class Rendered:
    blocks: list[Any]
    error: dict[str, Any] | None
    images: int
    cut: bool


def render(messages: list[dict[str, Any]], max_chars: int) -> Rendered:
    parts: list[Any] = []  # str pieces and Image blocks, in order
    seen_images: set[str] = set()
    images = 0
    dropped_images = 0
    error: dict[str, Any] | None = None
    streams: dict[str, list[str]] = {}
    last_stream: str | None = None
    cut_any = False

    def flush_stream() -> None:
        nonlocal last_stream, cut_any
        if last_stream is None:
            return
        text = _CR.sub("", "".join(streams.pop(last_stream)))
        if "characters of output dropped" in text:  # the kernel already kept only head and tail
            cut = True
        else:
            text, cut = bounded(text, max_chars, last_stream)
        cut_any = cut_any or cut
        parts.append(text if last_stream == "stdout" else "[stderr]\n" + text)
        last_stream = None

    for msg in messages:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            name = content.get("name", "stdout")
            if last_stream != name:
                flush_stream()
                last_stream = name
                streams[name] = []
            streams[name].append(strip_ansi(content.get("text", "")))
            continue
        flush_stream()
        if kind == "clear_output":
            parts.clear()
            continue
        if kind in ("execute_result", "display_data", "update_display_data"):
            data = content.get("data") or {}
            image = next((m for m in ("image/png", "image/jpeg") if m in data), None)
            if image is not None:
                raw = base64.b64decode(data[image])
                digest = hashlib.sha256(raw).hexdigest()
                if digest in seen_images:
                    continue  # the same figure sent as result and as display
                seen_images.add(digest)
                if images >= MAX_IMAGES:
                    dropped_images += 1
                    continue
                images += 1
                parts.append(Image(raw, image))
                continue
            text = bundle_text(data)
            if text is None:
                continue
            text, cut = bounded(text, max_chars, "this output")
            cut_any = cut_any or cut
            if kind == "execute_result":
                count = content.get("execution_count")
                sep = "\n" if "\n" in text else " "
                text = f"Out[{count}]:{sep}{text}" if count else text
            parts.append(text)
        elif kind == "error":
            ename, evalue = content.get("ename", "Error"), strip_ansi(str(content.get("evalue", "")))
            frames, omitted = trim_traceback(list(content.get("traceback") or []))
            error = {"ename": ename, "evalue": evalue}
            lines = ["Traceback (the cell's own frames):" if frames else ""]
            lines += frames
            if omitted:
                lines.append(f"[{omitted} frame(s) inside libraries or tether's helper not shown]")
            summary = f"{ename}: {evalue}"
            if not any(summary in f or f"\n{ename}: " in "\n" + f for f in frames):
                lines.append(summary)
            parts.append("\n".join(x for x in lines if x))
    flush_stream()
    if dropped_images:
        parts.append(f"[{dropped_images} more image(s) not shown: the cell displayed more than {MAX_IMAGES}]")
    blocks: list[Any] = []
    buffer: list[str] = []
    for part in parts:
        if isinstance(part, str):
            buffer.append(part.rstrip("\n"))
        else:
            if buffer:
                blocks.append(Text("\n".join(buffer)))
                buffer = []
            blocks.append(part)
    if buffer:
        blocks.append(Text("\n".join(buffer)))
    return Rendered(blocks, error, images, cut_any)
