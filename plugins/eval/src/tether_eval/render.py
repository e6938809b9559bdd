"""A cell's Jupyter messages turned into what the model sees: text and images, bounded, in order.

- streams: stdout and stderr, carriage-return progress collapsed, head and tail kept when long;
- results and displays: the richest readable text: markdown, plain, or HTML rendered as markdown
  (markdownify: tables stay tables, links keep their targets) when plain text is missing or only
  IPython's placeholder (`<IPython.core.display.HTML object>`: `%%html`, `display(HTML(...))`);
  a PNG/JPEG becomes an image block, once (ipykernel sends a figure that is the last expression both
  as the result and as a display: identical images are deduplicated);
- errors: type, message and the traceback frames of the cell's own code (library and helper frames
  are counted, not shown);
- what IPython sends in the execute_reply's payloads instead of output: the pager's text (`obj?`,
  `obj??`, `%pdoc`, `%psource`, `%prun`) and `%load`'s next input, after the output, bounded.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

import attrs
from markdownify import MarkdownConverter
from tether import Image, Text
from tether.tools import Block

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_CR = re.compile(r"[^\n]*\r(?!\n)")
_PLACEHOLDER = re.compile(r"<[\w.]+ object(?: at 0x[0-9a-f]+)?>")
MAX_HTML_CHARS = 500_000  # HTML parsed per output: a bigger page is cut first (and says so)
INLINE_HTML_CHARS = 20_000  # up to this much HTML in a cell is rendered on the event loop, more in a thread
MAX_IMAGES = 8
MAX_TRACEBACK_FRAMES = 8
# raised by a cell's `tools` object (kernel_side/): the message is all there is to say, no traceback
ONE_LINE_ERRORS = frozenset({"ToolArgumentsError", "ToolNotFoundError"})


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


class _Markdown(MarkdownConverter):
    """HTML as markdown for a model: a `|` inside a table cell escaped (it would split the cell), and
    no base64 `data:` URIs (an inline image or download link would fill the output with noise)."""

    def convert_td(self, el: Any, text: str, parent_tags: Any) -> str:
        return super().convert_td(el, text.replace("|", "\\|"), parent_tags)  # pyright: ignore[reportAttributeAccessIssue] - markdownify's stub omits the convert_<tag> methods

    def convert_th(self, el: Any, text: str, parent_tags: Any) -> str:
        return super().convert_th(el, text.replace("|", "\\|"), parent_tags)  # pyright: ignore[reportAttributeAccessIssue] - markdownify's stub omits the convert_<tag> methods

    def convert_img(self, el: Any, text: str, parent_tags: Any) -> str:
        if str(el.attrs.get("src", "")).startswith("data:"):
            alt = el.attrs.get("alt") or ""
            return f"[inline image{': ' + alt if alt else ''}]"
        return super().convert_img(el, text, parent_tags)  # pyright: ignore[reportAttributeAccessIssue] - markdownify's stub omits the convert_<tag> methods

    def convert_a(self, el: Any, text: str, parent_tags: Any) -> str:
        if str(el.get("href", "")).startswith("data:"):
            return f"{text} [inline data link]"
        return super().convert_a(el, text, parent_tags)  # pyright: ignore[reportAttributeAccessIssue] - markdownify's stub omits the convert_<tag> methods


def html_text(html: str) -> str:
    """HTML rendered as readable markdown text; a page over MAX_HTML_CHARS is cut first, and says so."""
    note = ""
    if len(html) > MAX_HTML_CHARS:
        note = (
            f"\n[... the HTML was {len(html):,} characters: only its first {MAX_HTML_CHARS:,} were rendered]"
        )
        html = html[:MAX_HTML_CHARS]
    text = _Markdown(heading_style="ATX", bullets="-").convert(html)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + note


def bundle_text(data: dict[str, Any]) -> str | None:
    if "text/markdown" in data:
        return str(data["text/markdown"])
    plain = strip_ansi(str(data["text/plain"])) if "text/plain" in data else None
    if "text/html" in data and (plain is None or _PLACEHOLDER.fullmatch(plain.strip())):
        return html_text(str(data["text/html"]))
    if plain is not None:
        return plain
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
    blocks: list[Block]
    error: dict[str, Any] | None
    images: int
    cut: bool


async def render_cell(
    messages: list[dict[str, Any]], max_chars: int, payloads: Sequence[dict[str, Any]]
) -> Rendered:
    """``render``, in a thread when the cell sent much HTML (parsing 500,000 characters takes a second)."""
    html = sum(len(str((m["content"].get("data") or {}).get("text/html", ""))) for m in messages)
    if html <= INLINE_HTML_CHARS:
        return render(messages, max_chars, payloads)
    return await asyncio.to_thread(render, messages, max_chars, payloads)


def render(
    messages: list[dict[str, Any]], max_chars: int, payloads: Sequence[dict[str, Any]] = ()
) -> Rendered:
    parts: list[str | Image] = []  # str pieces and Image blocks, in order
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
            if ename in ONE_LINE_ERRORS:
                parts.append(f"{ename}: {evalue}")
                continue
            lines = ["Traceback (the cell's own frames):" if frames else ""]
            lines += frames
            if omitted:
                lines.append(f"[{omitted} frame(s) inside libraries or tether's helper not shown]")
            summary = f"{ename}: {evalue}"
            if not any(summary in f or f"\n{ename}: " in "\n" + f for f in frames):
                lines.append(summary)
            parts.append("\n".join(x for x in lines if x))
    flush_stream()
    for payload in payloads:
        if payload.get("source") == "page":
            text, what = bundle_text(payload.get("data") or {}) or "", "the pager's text"
        elif payload.get("source") == "set_next_input" and payload.get("text"):
            text, what = (
                "[IPython's text for the next cell; send it as a cell to run it]\n" + payload["text"],
                "it",
            )
        else:
            continue
        text, cut = bounded(text.strip("\n"), max_chars, what)
        cut_any = cut_any or cut
        parts.append(text)
    if dropped_images:
        parts.append(f"[{dropped_images} more image(s) not shown: the cell displayed more than {MAX_IMAGES}]")
    blocks: list[Block] = []
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
