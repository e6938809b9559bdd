"""Matching a compiled pattern against a tree-sitter tree, with ast-grep's default ("smart") rules.

- A named leaf of the pattern matches a node of the same kind and text; an unnamed token matches a
  token of the same kind (its text is not compared: some grammars give tokens odd spans).
- Unnamed tokens in the code are skipped where the pattern has no counterpart, and so are comments
  (and other extras, like Python's backslash line continuation) where the pattern has a leaf or a
  metavariable (not before an inner node: ast-grep 0.51 does the same).
- ``$$$`` is lazy: it takes candidates until the next pattern node matches, with no backtracking.
- Once the pattern's children are used up, the candidate may have more children (a pattern with one
  statement matches a block that starts with it). `Match.end_of_pattern` records where the pattern's
  last element ended, so a rewrite replaces only what the pattern covered (see `rewrite`).
- A metavariable seen twice must capture structurally equal code.

The search itself never walks the whole tree in Python: a tree-sitter query on the pattern root's
kind yields the candidate nodes.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import attrs

from tether_astgrep.pattern import CAPTURE, DROPPED, ELLIPSIS, ERROR_KIND, META, MULTI, TERM, Pattern

if TYPE_CHECKING:
    from tether_astgrep.rules import Rule

MATCHED, SKIP, NOMATCH = 0, 1, 2
_END = None  # env key: where the last matched element ends


@attrs.frozen
class Capture:
    text: str
    start_byte: int
    end_byte: int
    multi: bool


@attrs.frozen
class Match:
    start_byte: int
    end_byte: int
    end_of_pattern: int  # where the pattern's last element ended (<= end_byte)
    start: tuple[int, int]  # 1-based line and column (characters)
    end: tuple[int, int]
    text: str
    captures: dict[str, Capture]


class _Ctx:
    """What one pattern's matching needs, with its strictness (ast-grep's levels):

    ``smart`` (default: tokens and comments of the code may be skipped), ``cst`` (no code token is
    skipped), ``ast`` (the pattern's tokens are dropped when compiled), ``relaxed`` (ast, and comments
    are skipped anywhere), ``signature`` (relaxed, and names are compared by kind, not text).
    """

    __slots__ = ("ast", "comments", "relaxed", "src", "texts", "tokens")

    def __init__(self, src: bytes, pattern: Pattern) -> None:
        self.src = src
        self.comments = pattern.comment_kinds
        level = pattern.strictness
        self.tokens = level != "cst"
        self.ast = level in ("ast", "relaxed", "signature")  # a metavariable skips the code's tokens too
        self.relaxed = level in ("relaxed", "signature")
        self.texts = level != "signature"


def _same(a: Any, b: Any, src: bytes) -> bool:
    """ast-grep's exact comparison for a repeated metavariable (whitespace-insensitive).

    Iterative: the captures compared may be arbitrarily deep (a 500-term sum).
    """
    stack = [(a, b)]
    while stack:
        a, b = stack.pop()
        if a.start_byte == b.start_byte and a.end_byte == b.end_byte and a.kind_id == b.kind_id:
            continue
        if (a.is_named and a.child_count == 0) or (b.is_named and b.child_count == 0):
            if src[a.start_byte : a.end_byte] != src[b.start_byte : b.end_byte]:
                return False
            continue
        if a.kind_id != b.kind_id or a.child_count != b.child_count:
            return False
        stack.extend(zip(a.children, b.children))
    return True


def _bind_multi(env: dict, name: str | None, nodes: list, skipped: int, src: bytes) -> bool:
    if nodes:
        last = nodes[-1].end_byte
        env[_END] = max(env[_END], last)
    if name is None:
        return True
    if skipped:
        nodes = nodes[: max(0, len(nodes) - skipped)]
    old = env.get(name)
    if old is not None:
        return (
            isinstance(old, list)
            and len(old) == len(nodes)
            and all(_same(a, b, src) for a, b in zip(old, nodes))
        )
    env[name] = list(nodes)
    return True


def _match_node(goal: tuple, cand: Any, env: dict, ctx: _Ctx) -> int:
    tag = goal[0]
    if tag == TERM:
        kind = cand.kind_id
        if (kind == goal[1] or goal[1] == ERROR_KIND) and (
            not goal[3] or not ctx.texts or ctx.src[cand.start_byte : cand.end_byte] == goal[2]
        ):
            env[_END] = cand.end_byte
            return MATCHED
        if (not cand.is_named and ctx.tokens) or kind in ctx.comments or cand.is_extra:
            return SKIP
        return NOMATCH
    if tag == META:
        if cand.is_extra and (cand.is_named or cand.kind_id in ctx.comments):
            return SKIP
        kind, name, named = goal[1], goal[2], goal[3]
        if named and not cand.is_named and ctx.ast and kind <= DROPPED:
            return SKIP
        if kind == CAPTURE:
            if named and not cand.is_named:
                return NOMATCH
            old = env.get(name)
            if old is not None and (isinstance(old, list) or not _same(old, cand, ctx.src)):
                return NOMATCH
            env[name] = cand
        elif kind == DROPPED:
            if named and not cand.is_named:
                return NOMATCH
        elif kind == MULTI:
            old = env.get(name)
            if old is not None and not (
                isinstance(old, list) and len(old) == 1 and _same(old[0], cand, ctx.src)
            ):
                return NOMATCH
            env[name] = [cand]
        env[_END] = cand.end_byte
        return MATCHED
    if cand.kind_id != goal[1] and goal[1] != ERROR_KIND:
        # ast-grep skips no comment before an inner node: `f(a, /* c */ g())` is no `f(a, g())`
        return SKIP if ctx.relaxed and cand.kind_id in ctx.comments else NOMATCH
    return MATCHED if _match_children(goal[2], cand.children, env, ctx) else NOMATCH


def _is_ellipsis(g: tuple) -> bool:
    return g[0] == META and g[1] >= ELLIPSIS


def _match_children(goals: tuple, cands: list, env: dict, ctx: _Ctx) -> bool:
    n_goals, n_cands = len(goals), len(cands)
    if n_cands == 0:
        return False
    gi = ci = 0
    while True:
        if gi >= n_goals:
            return True
        goal = goals[gi]
        if _is_ellipsis(goal):
            name = goal[2] if goal[1] == MULTI else None
            first = ci
            gi += 1
            if gi >= n_goals:
                return _bind_multi(env, name, cands[ci:], 0, ctx.src)
            skipped = 0
            while goals[gi][0] == TERM and not goals[gi][3]:  # separators after $$$
                gi += 1
                skipped += 1
                if gi >= n_goals:
                    return _bind_multi(env, name, cands[ci:], skipped, ctx.src)
            nxt = goals[gi]
            if _is_ellipsis(nxt):
                ci += 1
                if ci >= n_cands:
                    return False
                if not _bind_multi(env, name, cands[first:ci], skipped, ctx.src):
                    return False
                continue
            while True:
                probe = dict(env)  # a failed look-ahead must not leave bindings behind
                if _match_node(nxt, cands[ci], probe, ctx) == MATCHED:
                    env.clear()
                    env.update(probe)
                    if not _bind_multi(env, name, cands[first:ci], skipped, ctx.src):
                        return False
                    break
                ci += 1
                if ci >= n_cands:
                    return False
        while True:
            if ci >= n_cands:
                while gi < n_goals and _is_ellipsis(goals[gi]):
                    gi += 1
                if gi < n_goals:
                    return False
                break
            r = _match_node(goals[gi], cands[ci], env, ctx)
            if r == MATCHED:
                break
            if r == SKIP:
                ci += 1
                continue
            return False
        if gi < n_goals:
            gi += 1
            ci += 1
        if gi >= n_goals:
            return True
        if ci >= n_cands:
            return False


def _position(src: bytes, byte: int, point: tuple[int, int]) -> tuple[int, int]:
    row, col = point
    line_start = byte - col
    return row + 1, len(src[line_start:byte].decode("utf-8", "replace")) + 1


def _capture(value: Any, src: bytes) -> Capture:
    if isinstance(value, list):
        if not value:
            return Capture("", 0, 0, True)
        s, e = value[0].start_byte, value[-1].end_byte
        return Capture(src[s:e].decode("utf-8", "replace"), s, e, True)
    return Capture(
        src[value.start_byte : value.end_byte].decode("utf-8", "replace"),
        value.start_byte,
        value.end_byte,
        False,
    )


def _around_needle(root: Any, src: bytes, pattern: Pattern, kinds: frozenset[int]) -> list:
    """Nodes of the root's kind that contain an occurrence of the pattern's rarest literal.

    Every match contains the node that matched that literal, so walking up from each occurrence
    finds every candidate, without visiting the rest of the tree (a query visits every node).
    """
    needle = min(pattern.needles, key=src.count)
    seen: dict[tuple[int, int], Any] = {}
    size = len(needle)
    at = src.find(needle)
    while at >= 0:
        node = root.descendant_for_byte_range(at, at + size)
        while node is not None:
            if node.kind_id in kinds or (not kinds and node.child_count):
                key = (node.start_byte, node.end_byte)
                if key in seen:
                    break  # its ancestors were collected from an earlier occurrence
                seen[key] = node
            node = node.parent
        at = src.find(needle, at + size)
    return sorted(seen.values(), key=lambda n: (n.start_byte, -n.end_byte))


def candidates(tree: Any, pattern: Pattern, query: Any, src: bytes = b"") -> list:
    """Nodes that may match, in source order (outer before inner)."""
    root = tree.root_node
    if pattern.needles and pattern.root[0] != META and src:
        return _around_needle(root, src, pattern, pattern.root_kinds)
    if query is not None:
        from tree_sitter import QueryCursor

        found = QueryCursor(query).captures(root).get("c", [])
        found.sort(key=lambda n: (n.start_byte, -n.end_byte))
        return found
    out = []  # a bare metavariable: every named node (every node for `$$A`), pre-order
    tokens_too = pattern.root[0] == META and not pattern.root[3]
    cursor = root.walk()
    while True:
        node = cursor.node
        if node.is_named or tokens_too:
            out.append(node)
        if cursor.goto_first_child() or cursor.goto_next_sibling():
            continue
        while True:
            if not cursor.goto_parent():
                return out
            if cursor.goto_next_sibling():
                break


def _room_for(pattern: Pattern | Rule) -> None:
    """Recursion enough for the pattern: the matcher recurses twice per level of the pattern tree.

    The pattern's depth bounds it (the code's depth does not matter), and Python-to-Python calls
    do not grow the C stack, so a deeper limit is safe.
    """
    need = 3 * pattern.depth + 1000
    if sys.getrecursionlimit() < need:
        sys.setrecursionlimit(need)


def _iter_matches(tree: Any, src: bytes, pattern: Pattern | Rule, query: Any):
    _room_for(pattern)
    if not isinstance(pattern, Pattern):  # a rule (`tether_astgrep.rules.Rule`) walks its own way
        yield from pattern.iter_matches(tree, src, query)
        return
    ctx = _Ctx(src, pattern)
    goal = pattern.root
    others = pattern.needles[1:] if len(pattern.needles) > 1 else ()
    for node in candidates(tree, pattern, query, src):
        if others:
            part = src[node.start_byte : node.end_byte]
            if not all(n in part for n in pattern.needles):
                continue
        env: dict = {_END: node.start_byte}
        if _match_node(goal, node, env, ctx) != MATCHED:
            continue
        end_of_pattern = min(env.pop(_END), node.end_byte)
        yield node, end_of_pattern, env


def find_matches(tree: Any, src: bytes, pattern: Pattern | Rule, query: Any) -> list[Match]:
    """Every match in source order, with its text and captures."""
    return [
        Match(
            start_byte=node.start_byte,
            end_byte=node.end_byte,
            end_of_pattern=eop,
            start=_position(src, node.start_byte, node.start_point),
            end=_position(src, node.end_byte, node.end_point),
            text=src[node.start_byte : node.end_byte].decode("utf-8", "replace"),
            captures={k: _capture(v, src) for k, v in env.items()},
        )
        for node, eop, env in _iter_matches(tree, src, pattern, query)
    ]


# A span: (start_byte, end_byte, end_of_pattern, captures) with captures a tuple of
# (name, start_byte, end_byte, multi). Searches move and cache spans, not text: the texts of the
# matches shown are read back from the file (`materialize`), which keeps results small to pickle.
Span = tuple


def find_spans(tree: Any, src: bytes, pattern: Pattern | Rule, query: Any) -> list[Span]:
    out = []
    for node, eop, env in _iter_matches(tree, src, pattern, query):
        caps = []
        for name, v in env.items():
            if isinstance(v, list):
                caps.append((name, v[0].start_byte, v[-1].end_byte, True) if v else (name, 0, 0, True))
            else:
                caps.append((name, v.start_byte, v.end_byte, False))
        out.append((node.start_byte, node.end_byte, eop, tuple(caps)))
    return out


def _point(src: bytes, byte: int) -> tuple[int, int]:
    line_start = src.rfind(b"\n", 0, byte) + 1
    return src.count(b"\n", 0, byte) + 1, len(src[line_start:byte].decode("utf-8", "replace")) + 1


def materialize(span: Span, src: bytes) -> Match:
    """The full match for a span, from the file's bytes."""
    s, e, eop, caps = span
    return Match(
        start_byte=s,
        end_byte=e,
        end_of_pattern=eop,
        start=_point(src, s),
        end=_point(src, e),
        text=src[s:e].decode("utf-8", "replace"),
        captures={
            name: Capture(src[cs:ce].decode("utf-8", "replace"), cs, ce, multi)
            for name, cs, ce, multi in caps
        },
    )
