"""Compiling a pattern: the ladder of contexts, metavariables, and what a file must contain to match.

A compiled pattern is a tree of plain tuples (cheap to pickle to the worker processes):

- ``(META, kind, name, named)``: a metavariable; kind is CAPTURE (``$A``), DROPPED (``$_``, ``$_X``),
  ELLIPSIS (``$$$``, ``$$$_X``) or MULTI (``$$$A``); ``named`` is False for ``$$A`` (may match a token).
- ``(TERM, kind_id, text, is_named)``: a leaf; named leaves must match by text, tokens by kind only.
- ``(INNER, kind_id, children)``: an inner node.

The rules follow ast-grep's pattern compiler (so results agree with the anchor), except that the
fragment is parsed inside a context that fits it instead of always as a whole file.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import attrs

from tether_astgrep.grammars import PLACEHOLDER, Grammar, Rung

META, TERM, INNER = 0, 1, 2
CAPTURE, DROPPED, ELLIPSIS, MULTI = 0, 1, 2, 3
ERROR_KIND = 65535  # tree-sitter's ERROR node: in a pattern read through error recovery it matches any kind
RECOVERED = "whole file, through tree-sitter's error recovery"  # the rung of such a reading
SOUND_NODE = "whole file, the one sound node its error recovery leaves"  # CSS `$B:$A`: a selector

# Languages whose keyword tokens always read as the keyword: their word-like tokens can prefilter
# files. (tree-sitter-typescript gives some tokens wrong spans, so its tokens are not used.)
_KEYWORD_PREFILTER = {"python", "javascript", "go", "rust", "c", "cpp", "java", "dart"}
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]+")
_VAR_CHARS = re.compile(r"[A-Z0-9_]*")


class PatternError(ValueError):
    """The pattern cannot be used; the message says why and what to do."""


@attrs.frozen
class Pattern:
    source: str
    grammar_id: str
    lang_key: str  # which loaded language (engine caches by it)
    rung: str  # the context that accepted the fragment
    root: tuple
    root_kind: str | None  # the query that finds candidate nodes; None: every named node
    root_named: bool
    needles: tuple[bytes, ...]  # literal texts a file must contain for any match
    names: frozenset[str]  # metavariables that capture (usable in a rewrite)
    comment_kinds: frozenset[int]
    root_kinds: frozenset[int] = frozenset()  # kinds a candidate may have (the root's)
    depth: int = 1  # how deep the pattern tree nests: the matcher needs that much recursion
    also: tuple[Pattern, ...] = ()  # other readings of the same text, searched too (a type and an expression)
    strictness: str = "smart"  # see `matcher._Ctx`

    @property
    def key(self) -> tuple:
        return (self.lang_key, self.root, *(p.root for p in self.also))

    @property
    def readings(self) -> tuple[Pattern, ...]:
        return (self, *self.also)

    def query_source(self) -> str | None:
        """The tree-sitter query for nodes of the root's kind (None for a bare metavariable)."""
        if self.root_kind is None:
            return None
        if self.root_named:
            return f"({self.root_kind}) @c"
        return '"' + self.root_kind.replace("\\", "\\\\").replace('"', '\\"') + '" @c'


def preprocess(source: str, expando: str) -> str:
    """Replace the ``$`` of metavariables by ``expando`` (ast-grep's rule, so both parse alike)."""
    if expando == "$":
        return source
    out: list[str] = []
    dollars = 0
    for ch in source:
        if ch == "$":
            dollars += 1
            continue
        sigil = expando if ("A" <= ch <= "Z" or ch == "_" or dollars == 3) else "$"
        out.append(sigil * dollars)
        dollars = 0
        out.append(ch)
    out.append((expando if dollars == 3 else "$") * dollars)
    return "".join(out)


def metavariable(text: str, expando: str) -> tuple[int, str | None, bool] | None:
    """(kind, name, named) when ``text`` is a metavariable, else None."""
    if not text.startswith(expando):
        return None
    three = expando * 3
    if text == three:
        return (ELLIPSIS, None, True)
    if text.startswith(three):
        rest = text[len(three) :]
        if not _VAR_CHARS.fullmatch(rest):
            return None
        return (ELLIPSIS, None, True) if rest.startswith("_") else (MULTI, rest, True)
    rest = text[len(expando) :]
    named = True
    if rest.startswith(expando):
        rest, named = rest[len(expando) :], False
    if not rest or not ("A" <= rest[0] <= "Z" or rest[0] == "_") or not _VAR_CHARS.fullmatch(rest):
        return None
    return (DROPPED, None, named) if rest.startswith("_") else (CAPTURE, rest, named)


def _is_single(node: Any) -> bool:
    n = node.child_count
    if n == 1:
        return True
    if n == 2:
        second = node.child(1)
        return second.is_missing or second.type == ""
    return False


def _leaf_or_meta(node: Any, src: bytes, expando: str, forms: dict[bytes, str]) -> tuple | None:
    """The pattern tuple of a metavariable or a leaf, or None for an inner node."""
    text = src[node.start_byte : node.end_byte]
    mv = None
    if forms and text in forms:  # a metavariable written as a string or a type name (see _placeholders)
        mv = metavariable(forms[text], expando)
    elif text.startswith(expando.encode()):
        mv = metavariable(text.decode("utf-8", "replace"), expando)
    if mv is not None:
        return (META, *mv)
    if node.child_count == 0 or (
        node.is_named and node.named_child_count == 0 and _text_outside_children(node, src)
    ):
        # a node of tokens only whose own text is not all in them (CSS `#fff`: the only child is
        # `#`) is compared by its text, as a leaf is
        return (TERM, node.kind_id, text, node.is_named)
    return None


def _text_outside_children(node: Any, src: bytes) -> bool:
    pos = node.start_byte
    for child in node.children:
        if src[pos : child.start_byte].strip():
            return True
        pos = max(pos, child.end_byte)
    return bool(src[pos : node.end_byte].strip())


def _convert(top: Any, src: bytes, expando: str, forms: dict[bytes, str]) -> tuple:
    """The pattern tree of a node (iterative: a pattern may nest deeper than Python's recursion limit)."""
    done = _leaf_or_meta(top, src, expando, forms)
    if done is not None:
        return done
    # each frame: (node, its non-missing children, the tuples converted so far)
    stack = [(top, [c for c in top.children if not c.is_missing], [])]
    while True:
        node, kids, out = stack[-1]
        if len(out) == len(kids):
            stack.pop()
            done = (INNER, node.kind_id, tuple(out))
            if not stack:
                return done
            stack[-1][2].append(done)
            continue
        child = kids[len(out)]
        leaf = _leaf_or_meta(child, src, expando, forms)
        if leaf is not None:
            out.append(leaf)
        else:
            stack.append((child, [c for c in child.children if not c.is_missing], []))


STRICTNESS = ("cst", "smart", "ast", "relaxed", "signature")


def with_strictness(pattern: Pattern, level: str) -> Pattern:
    """The pattern matched at another strictness; `ast` and looser drop the pattern's own tokens."""
    if level in ("cst", "smart"):
        return attrs.evolve(
            pattern, strictness=level, also=tuple(with_strictness(p, level) for p in pattern.also)
        )
    root = _drop_tokens(pattern.root)
    needles: list[bytes] = []
    if level != "signature":  # a signature compares no text: no literal is required
        _walk(root, set(), needles, False)
    return attrs.evolve(
        pattern,
        strictness=level,
        root=root,
        needles=tuple(dict.fromkeys(needles)),
        also=tuple(with_strictness(p, level) for p in pattern.also),
    )


def _drop_tokens(top: tuple) -> tuple:
    """The pattern tree without its unnamed leaves (iterative, as `_convert`)."""
    if top[0] != INNER:
        return top
    stack = [(top, [c for c in top[2] if not (c[0] == TERM and not c[3])], [])]
    while True:
        node, kids, out = stack[-1]
        if len(out) == len(kids):
            stack.pop()
            done = (INNER, node[1], tuple(out))
            if not stack:
                return done
            stack[-1][2].append(done)
            continue
        child = kids[len(out)]
        if child[0] == INNER:
            stack.append((child, [c for c in child[2] if not (c[0] == TERM and not c[3])], []))
        else:
            out.append(child)


def _nesting(p: tuple) -> int:
    """How deep a pattern tree nests (the matcher recurses once per level)."""
    best, stack = 0, [(p, 1)]
    while stack:
        node, d = stack.pop()
        best = max(best, d)
        if node[0] == INNER:
            stack.extend((c, d + 1) for c in node[2])
    return best


def _is_metavariable_error(node: Any, src: bytes, expando: str) -> bool:
    """An ERROR node that is just a metavariable (`$$$ARMS` where a grammar wants a match arm).

    ast-grep reads such a node as the metavariable (it goes by the node's text), and so do we.
    """
    text = src[node.start_byte : node.end_byte].decode("utf-8", "replace")
    return metavariable(text, expando) is not None


def _first_problem(top: Any, src: bytes, expando: str, lenient_from: int | None = None) -> Any:
    """The first ERROR or MISSING node under ``top`` (pre-order), or None.

    With ``lenient_from`` (the pattern's end), a MISSING token at the end of the pattern (a `;` left
    off a statement) and ERROR nodes that are only a metavariable pass, as ast-grep accepts them; a
    context without them is always preferred.
    """
    lenient = lenient_from is not None
    stack = [top]
    while stack:
        node = stack.pop()
        if node.is_error and not (lenient and _is_metavariable_error(node, src, expando)):
            return node
        if node.is_missing and not (lenient and not node.is_named and node.start_byte >= lenient_from):
            return node
        if node.has_error and not node.is_error:
            stack.extend(reversed(node.children))
    return None


def _walk(root: tuple, names: set[str], needles: list[bytes], words: bool) -> None:
    stack = [root]
    while stack:
        p = stack.pop()
        if p[0] == META:
            if p[2]:
                names.add(p[2])
        elif p[0] == TERM:
            text = p[2]
            if text and (p[3] or (words and _WORD.fullmatch(text))):
                needles.append(text)
        else:
            stack.extend(reversed(p[2]))


def _placeholders(processed: str, expando: str):
    """The pattern with one metavariable written in another form its position may need.

    Where a grammar wants a string (`import µA from µB`: the module is a string literal) or a type
    or constant name (Ruby's `module µM`: a constant starts with a capital), a metavariable written
    as a name is a syntax error. Each metavariable in turn is tried as a string literal and as a
    capitalized name (a list metavariable as a terminated statement instead), and last all of them
    as strings at once (JSON `µK: µV`: a key and a value); yields (text, {placeholder: metavariable}).
    """
    meta = re.compile(re.escape(expando) + r"(?:" + re.escape(expando * 2) + r")?[A-Z_][A-Z0-9_]*")
    found = list(meta.finditer(processed))
    for m in found:
        var = m.group(0)
        forms = ['"' + var + '"']
        if var.startswith(expando * 3):
            forms.append(var + ";")  # statements where a body wants them terminated (C++ `{ $$$B }`)
        else:
            forms.append("Xµ" + var[len(expando) :])
        for form in forms:
            yield processed[: m.start()] + form + processed[m.end() :], {form.encode(): var}
    if len(found) > 1:
        yield (
            meta.sub(lambda m: '"' + m.group(0) + '"', processed),
            {b'"' + m.group(0).encode() + b'"': m.group(0) for m in found},
        )


def comment_kinds(language: Any) -> frozenset[int]:
    kinds = set()
    for i in range(language.node_kind_count):
        name = language.node_kind_for_id(i) or ""
        if "comment" in name and language.node_kind_is_named(i):
            kinds.add(i)
    return frozenset(kinds)


class _Reject(Exception):
    """A rung does not accept the fragment; ``at`` is the first error's byte offset, when known."""

    def __init__(self, at: int | None = None) -> None:
        self.at = at


def _accept(rung: Rung, text: str, strict: bool, grammar: Grammar, parser: Any) -> tuple[Any, bytes]:
    """The node ``text`` parses to inside ``rung`` and the wrapped source; raises `_Reject`."""
    wrapped, first, last = rung.wrap(text)
    src = wrapped.encode()
    start, end = len(wrapped[:first].encode()), len(wrapped[:last].encode())
    root = parser.parse(src).root_node
    bad = _first_problem(root, src, grammar.expando, None if strict else end)
    if bad is not None:
        at = bad.start_byte - start if start <= bad.start_byte else None
        raise _Reject(None if at is None else len(src[start : start + at].decode("utf-8", "replace")))
    node = root.descendant_for_byte_range(start, end)
    ends = (end, end + len(rung.tail.encode())) if rung.tail else (end,)
    if node is None or node.start_byte != start or node.end_byte not in ends:
        raise _Reject()
    span_end = node.end_byte
    while node.parent is not None and node.parent.start_byte == start and node.parent.end_byte == span_end:
        node = node.parent
    if node.parent is None and not _is_single(node):
        # the whole file is the pattern and holds several nodes: ast-grep refuses this too
        raise PatternError(
            f"the pattern holds several {grammar.id} statements or nodes; search for one node at a "
            "time (inside a body, $$$ stands for the statements around it)"
        )
    # down to the node the pattern really is (an expression statement holding a call is the call),
    # never to a child narrower than its parent (CSS `#fff`: the `#` is the only child of the value), but
    # in a whole file, ast-grep's own reading, to a narrower named child as ast-grep goes (a Kotlin `"\n"`
    # is the string's content, its quotes no nodes: it matches the `\n` inside `"${a}\n${b}"` too)
    whole_file = rung.template == PLACEHOLDER
    while _is_single(node) and (
        (whole_file and node.child(0).is_named)
        or (node.child(0).start_byte, node.child(0).end_byte) == (node.start_byte, node.end_byte)
    ):
        node = node.child(0)
    return node, src


_LONE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _keyword(text: str, grammar: Grammar, parser: Any) -> tuple[Any, bytes] | None:
    """A lone word the first context refuses (`const`, `static`, `void`): the token the grammar reads.

    Left to the ladder, a keyword reads as a name where one fits (a JavaScript class field named
    `const`); ast-grep matches the keyword itself, and so does this.
    """
    if not _LONE_WORD.fullmatch(text):
        return None
    rung = grammar.ladder[0]
    try:
        _accept(rung, text, True, grammar, parser)
        return None
    except _Reject:
        pass
    wrapped, first, last = rung.wrap(text)
    src = wrapped.encode()
    start, end = len(wrapped[:first].encode()), len(wrapped[:last].encode())
    node = parser.parse(src).root_node.descendant_for_byte_range(start, end)
    if node is None or node.is_error or node.child_count or (node.start_byte, node.end_byte) != (start, end):
        return None
    return node, src


def compile_pattern(source: str, grammar: Grammar, language: Any, parser: Any, lang_key: str = "") -> Pattern:
    """Parse ``source`` with the first rung of the grammar's ladder that accepts it.

    Each rung is tried with the pattern as written, then with one metavariable at a time in another
    placeholder form (`_placeholders`); all rungs strictly (no ERROR or MISSING node) before any
    leniently. Later rungs marked ``also`` that accept the pattern too add their reading to the
    search (Go `$A.Buffer` is an expression and a type).
    """
    stripped = textwrap.dedent(source.strip("\n")).strip()  # a pattern copied from an indented body
    if not stripped:
        raise PatternError("the pattern is empty; give code with metavariables, e.g. 'print($A)'")
    lone = metavariable(preprocess(stripped, "µ"), "µ")
    if lone is not None and lone[0] >= ELLIPSIS:
        raise PatternError(
            f"the pattern {stripped!r} is only a list metavariable: it would match every sequence of nodes "
            "anywhere, so it means nothing on its own (ast-grep refuses it too). Put it inside code, e.g. "
            "'f($$$ARGS)' or 'def $F($$$P): $$$BODY', or use $A to match any single node"
        )
    processed = preprocess(stripped, grammar.expando)
    nearest: tuple[int, str] | None = None  # (offset in the pattern, rung) of the furthest first error
    chosen = None
    keyword = _keyword(processed, grammar, parser)
    if keyword is not None:
        chosen = (0, Rung("keyword"), *keyword, {})
    elif (clean := _clean_in_error(processed, grammar, parser)) is not None:
        # the whole file, through error recovery, is one sound node: ast-grep's own reading, before any
        # context (a CSS `$B:$A` is a pseudo-class selector to it, not a declaration)
        chosen = (0, Rung(SOUND_NODE), *clean, {})
    for strict in (True, False):
        for index, rung in enumerate(grammar.ladder):
            if chosen is not None:
                break
            for text, forms in ((processed, {}), *_placeholders(processed, grammar.expando)):
                try:
                    node, src = _accept(rung, text, strict, grammar, parser)
                except _Reject as rejected:
                    if (
                        strict
                        and not forms
                        and rejected.at is not None
                        and (nearest is None or rejected.at > nearest[0])
                    ):
                        nearest = (rejected.at, rung.name)
                    continue
                chosen = (index, rung, node, src, forms)
                break
    if chosen is None:
        recovered = _recovered(processed, grammar, parser)
        if recovered is None:
            raise PatternError(_refusal(stripped, grammar, nearest))
        return _build(stripped, grammar, language, lang_key, Rung(RECOVERED), *recovered, {})
    index, rung, node, src, forms = chosen
    main = _build(stripped, grammar, language, lang_key, rung, node, src, forms)
    if main.root[0] == META or rung.name in ("keyword", SOUND_NODE):
        return main
    others = []
    # the first rung is the whole file, or the whole file (through error recovery) reads a pattern of
    # metavariables and tokens only as the rung did: that is ast-grep's own reading, and it finds code (a
    # Go `*$A` is the unary expression, not a pointer type too); one that names something (`*FlagSet`)
    # keeps its type reading, which ast-grep's reading, an expression, would not find
    own = (index == 0 and rung.template == PLACEHOLDER) or (
        not _names_code(main.root) and _file_reading(processed, grammar, parser) == main.root
    )
    for later in grammar.ladder[index + 1 :]:
        # no other reading where the first rung parsed the pattern as a whole file into code: that is
        # ast-grep's own reading, and a TS `($A)` or `React.$A` read as a type too would find what it does
        # not (an HTML `class="box"`, which a whole file reads as text, is still read as an attribute)
        if not later.also or (own and main.root[0] == INNER):
            continue
        try:
            node, src = _accept(later, processed, True, grammar, parser)
        except _Reject:
            continue
        other = _build(stripped, grammar, language, lang_key, later, node, src, {})
        if own and main.root[0] == TERM and other.root[0] == TERM:
            # a lone name ast-grep reads as a whole file is the name of that kind only: a TS `Foo` is the
            # value, not the type of `let a: Foo` nor the property of `x.Foo`, as the CLI finds it
            continue
        if other.root != main.root and all(other.root != o.root for o in others):
            others.append(other)
    if rung.template != PLACEHOLDER and parser.parse(processed.encode()).root_node.has_error:
        # ast-grep reads the pattern as a whole file, through error recovery: what that reading finds is
        # searched too (a CSS `($A)` is a value in parentheses, and any `( ... )` to ast-grep)
        recovered = _recovered(processed, grammar, parser)
        if recovered is not None:
            other = _build(stripped, grammar, language, lang_key, Rung(RECOVERED), *recovered, {})
            if other.root != main.root and other.root[0] != META:
                others.append(other)
    return attrs.evolve(main, also=tuple(others)) if others else main


def _names_code(root: tuple) -> bool:
    """Whether a pattern tree holds a named leaf (a name, a literal), not only metavariables and tokens."""
    stack = [root]
    while stack:
        p = stack.pop()
        if p[0] == TERM and p[3]:
            return True
        if p[0] == INNER:
            stack.extend(p[2])
    return False


def _file_reading(processed: str, grammar: Grammar, parser: Any) -> tuple | None:
    """The pattern tree ast-grep makes of the pattern: the whole file, through error recovery if need
    be, down to its single node (None when it holds several)."""
    src = processed.encode()
    node = parser.parse(src).root_node
    if node.child_count == 0 or not _is_single(node):
        return None
    while _is_single(node):
        node = node.child(0)
    return _convert(node, src, grammar.expando, {})


def _clean_in_error(processed: str, grammar: Grammar, parser: Any) -> tuple[Any, bytes] | None:
    """The node ast-grep makes of a pattern whose whole file is an ERROR around one node that has none
    (CSS `_B:_A` is an ERROR holding only a pseudo-class selector), or None."""
    if grammar.expando != "$" and "$" in processed:
        return None
    rung = grammar.ladder[0]
    # the whole file is the first rung when that is a file with a head (a PHP file after its `<?php`)
    wrapped, first, _ = rung.wrap(processed) if rung.name == "file" else (processed, 0, 0)
    src = wrapped.encode()
    start = len(wrapped[:first].encode())
    node = parser.parse(src).root_node
    if not node.has_error:
        return None
    if start:  # the head's nodes end before the pattern: the file's node is the one node after them
        after = [c for c in node.children if c.end_byte > start]
        if len(after) != 1 or after[0].start_byte < start:
            return None
        node = after[0]
    elif node.child_count == 0 or not _is_single(node):
        return None
    through_error = node.is_error
    while _is_single(node):
        node = node.child(0)
        through_error = through_error or node.is_error
    # only an ERROR around it: a whole file that only misses a token (Go's `fmt.Println($$$A)` is a type
    # conversion there) is left to the contexts, which read what the code holds
    if (
        not through_error
        or node.has_error
        or node.is_error
        or node.is_missing
        or metavariable(src[node.start_byte : node.end_byte].decode("utf-8", "replace"), grammar.expando)
    ):
        return None
    return node, src


def _recovered(processed: str, grammar: Grammar, parser: Any) -> tuple[Any, bytes] | None:
    """ast-grep's own reading of a pattern no context accepts: the whole file, as tree-sitter's error
    recovery left it, down to its single node (an HTML `</p>` is an ERROR of `</`, `p` and `>`). Each
    ERROR node in it matches a node of any kind with the same children, or the same text for a leaf
    (that `</p>` is an end tag; a CSS `{$A}` is any `{ ... }` holding one node). None when that reading
    is no single node (ast-grep refuses those too)."""
    if not _balanced(processed) or (grammar.expando != "$" and "$" in processed):
        # a pattern cut short (`def f(:`) is refused, with where its error is; so is a `$name` in lowercase
        return None
    src = processed.encode()
    node = parser.parse(src).root_node
    if node.child_count == 0 or not _is_single(node):
        return None
    while _is_single(node):
        node = node.child(0)
    stack = [node]
    while stack:  # something to match by: a name, a literal or a metavariable, not tokens only (`let = ;`)
        n = stack.pop()
        if n.is_named and n.child_count == 0:
            return node, src
        stack.extend(n.children)
    return None


_PAIRS = {")": "(", "]": "[", "}": "{"}


def _balanced(text: str) -> bool:
    """Whether the brackets of ``text`` (outside quotes) pair up. A quote with no closing one after it
    opens no string (a Rust lifetime `<'a>`)."""
    open_: list[str] = []
    quote = None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'`" and ch in text[i + 1 :]:
            quote = ch
        elif ch in "([{":
            open_.append(ch)
        elif ch in _PAIRS and (not open_ or open_.pop() != _PAIRS[ch]):
            return False
    return not open_ and quote is None


def _refusal(stripped: str, grammar: Grammar, nearest: tuple[int, str] | None) -> str:
    where = ""
    if nearest is not None:
        before = stripped[: nearest[0]] if nearest[0] <= len(stripped) else stripped
        line = before.count("\n") + 1
        col = len(before.rsplit("\n", 1)[-1]) + 1
        where = f" (nearest error at line {line}, column {col} of the pattern, as a {nearest[1]})"
    lines = stripped.split("\n")
    shown = lines[0] if len(lines) == 1 else lines[0] + " ..."
    return (
        f"the pattern {shown!r} does not parse as {grammar.id} code in any context tried "
        f"({', '.join(dict.fromkeys(r.name for r in grammar.ladder))}){where}. Write it as valid {grammar.id} "
        "code, with $NAME where any single node may stand and $$$NAME for a list"
        + ("; metavariables are uppercase ($name is literal text)" if re.search(r"\$[a-z]", stripped) else "")
    )


def _build(
    stripped: str,
    grammar: Grammar,
    language: Any,
    lang_key: str,
    rung: Rung,
    node: Any,
    src: bytes,
    forms: dict[bytes, str],
) -> Pattern:
    root = _convert(node, src, grammar.expando, forms)
    names: set[str] = set()
    needles: list[bytes] = []
    _walk(root, names, needles, grammar.id in _KEYWORD_PREFILTER)
    if root[0] == META or root[1] == ERROR_KIND:
        root_kind, named = None, True
    else:
        root_kind, named = language.node_kind_for_id(root[1]), bool(node.is_named)
    return Pattern(
        source=stripped,
        grammar_id=grammar.id,
        lang_key=lang_key or grammar.id,
        rung=rung.name,
        root=root,
        root_kind=root_kind,
        root_named=named,
        needles=tuple(dict.fromkeys(needles)),
        names=frozenset(names),
        comment_kinds=comment_kinds(language),
        # an ERROR root (a reading through error recovery) and a metavariable match a node of any kind
        root_kinds=frozenset((root[1],)) if root[0] != META and root[1] != ERROR_KIND else frozenset(),
        depth=_nesting(root),
    )
