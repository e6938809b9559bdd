"""Matching a compiled pattern against a tree-sitter tree, with ast-grep's default ("smart") rules.

- A named leaf of the pattern matches a node of the same kind and text; an unnamed token matches a
  token of the same kind (its text is not compared: some grammars give tokens odd spans).
- Unnamed tokens and comments in the code are skipped where the pattern has no counterpart.
- ``$$$`` is lazy: it takes candidates until the next pattern node matches, with no backtracking.
- Once the pattern's children are used up, the candidate may have more children (a pattern with one
  statement matches a block that starts with it). `Match.end_of_pattern` records where the pattern's
  last element ended, so a rewrite replaces only what the pattern covered (see `rewrite`).
- A metavariable seen twice must capture structurally equal code.

The search itself never walks the whole tree in Python: a tree-sitter query on the pattern root's
kind yields the candidate nodes.
"""

from __future__ import annotations

from typing import Any

import attrs

from tether_astgrep.pattern import CAPTURE, DROPPED, ELLIPSIS, INNER, META, MULTI, TERM, Pattern

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
    __slots__ = ("src", "comments")

    def __init__(self, src: bytes, comments: frozenset[int]) -> None:
        self.src = src
        self.comments = comments


def _same(a: Any, b: Any, src: bytes) -> bool:
    """ast-grep's exact comparison for a repeated metavariable (whitespace-insensitive)."""
    if a.start_byte == b.start_byte and a.end_byte == b.end_byte and a.kind_id == b.kind_id:
        return True
    if (a.is_named and a.child_count == 0) or (b.is_named and b.child_count == 0):
        return src[a.start_byte : a.end_byte] == src[b.start_byte : b.end_byte]
    if a.kind_id != b.kind_id or a.child_count != b.child_count:
        return False
    return all(_same(x, y, src) for x, y in zip(a.children, b.children))


def _bind_multi(env: dict, name: str | None, nodes: list, skipped: int, src: bytes) -> bool:
    if nodes:
        last = nodes[-1].end_byte
        if last > env[_END]:
            env[_END] = last
    if name is None:
        return True
    if skipped:
        nodes = nodes[: max(0, len(nodes) - skipped)]
    old = env.get(name)
    if old is not None:
        return isinstance(old, list) and len(old) == len(nodes) and all(_same(a, b, src) for a, b in zip(old, nodes))
    env[name] = list(nodes)
    return True


def _match_node(goal: tuple, cand: Any, env: dict, ctx: _Ctx) -> int:
    tag = goal[0]
    if tag == TERM:
        kind = cand.kind_id
        if kind == goal[1] and (not goal[3] or ctx.src[cand.start_byte : cand.end_byte] == goal[2]):
            env[_END] = cand.end_byte
            return MATCHED
        if not cand.is_named or kind in ctx.comments:
            return SKIP
        return NOMATCH
    if tag == META:
        if cand.is_named and cand.kind_id in ctx.comments:
            return SKIP
        kind, name, named = goal[1], goal[2], goal[3]
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
            if old is not None and not (isinstance(old, list) and len(old) == 1 and _same(old[0], cand, ctx.src)):
                return NOMATCH
            env[name] = [cand]
        env[_END] = cand.end_byte
        return MATCHED
    if cand.kind_id != goal[1]:
        if cand.is_named and cand.kind_id in ctx.comments:
            return SKIP
        return NOMATCH
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
    return Capture(src[value.start_byte : value.end_byte].decode("utf-8", "replace"), value.start_byte, value.end_byte, False)


def candidates(tree: Any, pattern: Pattern, query: Any) -> list:
    """Nodes that may match, in source order (outer before inner)."""
    root = tree.root_node
    if query is not None:
        from tree_sitter import QueryCursor

        found = QueryCursor(query).captures(root).get("c", [])
        found.sort(key=lambda n: (n.start_byte, -n.end_byte))
        return found
    out = []  # a bare metavariable: every named node, pre-order
    cursor = root.walk()
    while True:
        node = cursor.node
        if node.is_named:
            out.append(node)
        if cursor.goto_first_child() or cursor.goto_next_sibling():
            continue
        while True:
            if not cursor.goto_parent():
                return out
            if cursor.goto_next_sibling():
                break


def find_matches(tree: Any, src: bytes, pattern: Pattern, query: Any) -> list[Match]:
    ctx = _Ctx(src, pattern.comment_kinds)
    goal = pattern.root
    out = []
    for node in candidates(tree, pattern, query):
        env: dict = {_END: node.start_byte}
        if _match_node(goal, node, env, ctx) != MATCHED:
            continue
        end_of_pattern = env.pop(_END)
        out.append(
            Match(
                start_byte=node.start_byte,
                end_byte=node.end_byte,
                end_of_pattern=min(end_of_pattern, node.end_byte),
                start=_position(src, node.start_byte, node.start_point),
                end=_position(src, node.end_byte, node.end_point),
                text=src[node.start_byte : node.end_byte].decode("utf-8", "replace"),
                captures={k: _capture(v, src) for k, v in env.items()},
            )
        )
    return out
