"""Bounding output for a model: cut, and say what was cut and how to see more."""

from __future__ import annotations

DEFAULT_MAX_CHARS = 30_000


def cap_text(text: str, max_chars: int = DEFAULT_MAX_CHARS, how_to_see_more: str = "") -> str:
    """Keep the head of ``text``; when cut, end with a line that says how much and how to see more."""
    if len(text) <= max_chars:
        return text
    cut = text.rfind("\n", 0, max_chars)
    keep = text[: cut if cut > max_chars // 2 else max_chars]
    more = f" {how_to_see_more}" if how_to_see_more else ""
    return f"{keep}\n[output cut: showed {len(keep):,} of {len(text):,} characters.{more}]"


def cap_items(items: list, cap: int, noun: str, how_to_see_more: str = "") -> tuple[list, str]:
    """First ``cap`` items, and a note naming how many were left out (empty when none)."""
    if len(items) <= cap:
        return items, ""
    more = f" {how_to_see_more}" if how_to_see_more else ""
    return items[:cap], f"[{len(items) - cap} more {noun} not shown (showing {cap} of {len(items)}).{more}]"
