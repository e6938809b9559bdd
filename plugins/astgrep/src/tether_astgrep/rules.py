"""ast-grep's rule objects: a `rule` instead of a `pattern`, with the same keys and meaning as ast-grep's.

A rule is a JSON object whose keys all have to hold for a node (ast-grep's rule schema):

- atomic: ``pattern`` (a pattern string, or ``{"context", "selector", "strictness"}``), ``kind`` (a node
  kind of the grammar), ``regex`` (searched in the node's text);
- relational: ``inside`` (an ancestor), ``has`` (a descendant), ``follows`` (an earlier sibling),
  ``precedes`` (a later sibling), each a rule with ``stopBy`` (``"neighbor"``, the default: only the
  parent, the children, the adjacent sibling; ``"end"``: all the way; or a rule: up to and including the
  first node that matches it) and, for ``inside`` and ``has``, ``field`` (the node must be in that field);
- composite: ``all`` (a list, in order), ``any`` (a list), ``not`` (a rule), ``matches`` (the name of a
  utility rule in ``utils``).

Metavariables bound by one part are seen by the parts after it (atomic, then relational, then
composite keys, as ast-grep orders them). ``constraints`` (metavariable -> rule) must hold for what each
captured, and ``utils`` (name -> rule) names rules for ``matches``. The argument is either the rule itself
or an object with ``rule`` and optionally ``constraints`` and ``utils`` (ast-grep's rule-file layout).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from tether_astgrep.matcher import _END, MATCHED, _Ctx, _match_node
from tether_astgrep.pattern import INNER, META, STRICTNESS, TERM, Pattern, PatternError, with_strictness

_TOP = "__top_end__"  # env key: where the matched node's own pattern ended (the rewrite replaces up to it)
ATOMIC = ("pattern", "kind", "regex")
RELATIONAL = ("inside", "has", "precedes", "follows")
COMPOSITE = ("all", "any", "not", "matches")
_RELATION_KEYS = ("stopBy", "field")


class RuleError(PatternError):
    """The rule cannot be used; the message names the key (``rule.has.stopBy``) and the fix."""


@attrs.frozen
class Relation:
    rule: Node
    stop: str | Node  # "neighbor", "end", or a rule
    field: str | None


@attrs.frozen
class Node:
    """One rule object, compiled."""

    pattern: Pattern | None = None
    kind: str | None = None
    kind_named: bool = True
    regex: Any = None  # re.Pattern
    relations: tuple[tuple[str, Relation], ...] = ()
    all: tuple[Node, ...] | None = None
    any: tuple[Node, ...] | None = None
    not_: Node | None = None
    matches: str | None = None


@attrs.frozen
class Rule:
    """A compiled rule: searched like a `Pattern` (the engine and the tools use the same attributes)."""

    source: str  # the rule as canonical JSON
    grammar_id: str
    lang_key: str
    top: Node
    utils: tuple[tuple[str, Node], ...]
    constraints: tuple[tuple[str, Node], ...]
    kinds: tuple[tuple[str, bool], ...]  # (kind, named) a matching node may have
    needles: tuple[bytes, ...]
    names: frozenset[str]
    depth: int
    rung: str = "rule"
    also: tuple = ()

    @property
    def key(self) -> tuple:
        return ("rule", self.lang_key, self.source)

    @property
    def readings(self) -> tuple[Rule, ...]:
        return (self,)

    def query_source(self) -> str:
        return "[" + " ".join(_query_term(k, named) for k, named in self.kinds) + "] @c"

    def iter_matches(self, tree: Any, src: bytes, query: Any) -> Iterator[tuple[Any, int, dict]]:
        """(node, end of its pattern, env) for every node the rule matches, in source order."""
        from tree_sitter import QueryCursor

        state = _State(src, dict(self.utils))
        found = QueryCursor(query).captures(tree.root_node).get("c", [])
        found.sort(key=lambda n: (n.start_byte, -n.end_byte))
        for node in found:
            env: dict = {_END: node.start_byte}
            if not _eval(self.top, node, env, state, True):
                continue
            if not all(_constraint(name, rule, env, state) for name, rule in self.constraints):
                continue
            end = min(env.pop(_TOP, node.end_byte), node.end_byte)
            env.pop(_END, None)
            yield node, end, env


def _query_term(kind: str, named: bool) -> str:
    return f"({kind})" if named else '"' + kind.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _State:
    __slots__ = ("ctxs", "src", "utils")

    def __init__(self, src: bytes, utils: dict[str, Node]) -> None:
        self.src = src
        self.utils = utils
        self.ctxs: dict[int, _Ctx] = {}

    def ctx(self, pattern: Pattern) -> _Ctx:
        ctx = self.ctxs.get(id(pattern))
        if ctx is None:
            ctx = self.ctxs[id(pattern)] = _Ctx(self.src, pattern)
        return ctx


# -- matching -----------------------------------------------------------------------------------------


def _match_pattern(pattern: Pattern, node: Any, env: dict, state: _State, top: bool) -> bool:
    for reading in pattern.readings:
        trial = dict(env)
        trial[_END] = node.start_byte
        if _match_node(reading.root, node, trial, state.ctx(reading)) == MATCHED:
            if top:
                trial[_TOP] = trial[_END]
            env.clear()
            env.update(trial)
            return True
    return False


def _eval(rule: Node, node: Any, env: dict, state: _State, top: bool = False) -> bool:
    if rule.pattern is not None and not _match_pattern(rule.pattern, node, env, state, top):
        return False
    if rule.kind is not None and node.type != rule.kind:
        return False
    if rule.regex is not None and not rule.regex.search(
        state.src[node.start_byte : node.end_byte].decode("utf-8", "replace")
    ):
        return False
    for name, relation in rule.relations:
        if not _relate(name, relation, node, env, state):
            return False
    if rule.all is not None:
        for sub in rule.all:
            if not _eval(sub, node, env, state, top):
                return False
    if rule.any is not None:
        for sub in rule.any:
            trial = dict(env)
            if _eval(sub, node, trial, state, top):
                env.clear()
                env.update(trial)
                break
        else:
            return False
    if rule.not_ is not None and _eval(rule.not_, node, dict(env), state):
        return False
    return rule.matches is None or _eval(state.utils[rule.matches], node, env, state, top)


def _stops(relation: Relation, node: Any, env: dict, state: _State) -> bool:
    """After testing ``node``, whether the search goes no further (stopBy)."""
    stop = relation.stop
    if isinstance(stop, str):  # "neighbor" or "end"
        return stop == "neighbor"
    return _eval(stop, node, dict(env), state)


def _same_node(a: Any, b: Any) -> bool:
    return a is not None and b is not None and a.id == b.id


def _reach(name: str, relation: Relation, node: Any, env: dict, state: _State) -> Iterator[Any]:
    """The nodes a relation tests, nearest first, as far as stopBy lets it go."""
    if name == "inside":
        prev, up = node, node.parent
        while up is not None:
            if relation.field is None or _same_node(up.child_by_field_name(relation.field), prev):
                yield up
            if _stops(relation, up, env, state):
                return
            prev, up = up, up.parent
    elif name == "has":
        first = node.children_by_field_name(relation.field) if relation.field else node.children
        stack = list(reversed(first))
        while stack:
            child = stack.pop()
            yield child
            if not _stops(relation, child, env, state):
                stack.extend(reversed(child.children))
    else:
        step = "prev_sibling" if name == "follows" else "next_sibling"
        sib = getattr(node, step)
        while sib is not None:
            yield sib
            if _stops(relation, sib, env, state):
                return
            sib = getattr(sib, step)


def _relate(name: str, relation: Relation, node: Any, env: dict, state: _State) -> bool:
    for other in _reach(name, relation, node, env, state):
        trial = dict(env)
        if _eval(relation.rule, other, trial, state):
            trial.pop(_TOP, None)
            if _TOP in env:
                trial[_TOP] = env[_TOP]
            env.clear()
            env.update(trial)
            return True
    return False


def _constraint(name: str, rule: Node, env: dict, state: _State) -> bool:
    value = env.get(name)
    if value is None:
        return True
    if isinstance(value, list):  # ast-grep constrains single metavariables only
        return True
    return _eval(rule, value, dict(env), state)


# -- compiling ----------------------------------------------------------------------------------------


def parse_text(text: str) -> Any:
    """A rule given as text: JSON, or YAML (ast-grep's rule files); raises `RuleError` naming the problem."""
    import yaml

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        json_error = f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        yaml_error = where + str(getattr(exc, "problem", None) or exc).splitlines()[0]
    as_json = text.lstrip().startswith(("{", "[")) and '"' in text
    raise RuleError(
        f"rule: the text is not valid {'JSON' if as_json else 'YAML'} ({json_error if as_json else yaml_error}); "
        'give a rule object, as JSON (e.g. {"pattern": "open($F)"}) or YAML (e.g. "pattern: open($F)")'
    )


def parse_argument(value: Any) -> tuple[dict, dict, dict]:
    """(rule, constraints, utils) from the tool argument: the rule object, or a rule file's layout.

    The argument may be the object itself or its text (JSON or YAML, as an ast-grep rule file).
    """
    if isinstance(value, str):
        value = parse_text(value)
        if not isinstance(value, dict):
            raise RuleError(
                f"rule: the text is {_describe(value)}, not an object; give a rule object, e.g. "
                '"pattern: open($F)" (YAML) or {"pattern": "open($F)"} (JSON), or pass the code as pattern'
            )
    if not isinstance(value, dict) or not value:
        raise RuleError(
            'rule: give a JSON object, e.g. {"pattern": "open($F)", "not": {"inside": {"kind": "with_statement", "stopBy": "end"}}}'
        )
    if "rule" in value:
        extra = set(value) - {"rule", "constraints", "utils", "id", "language", "message", "severity"}
        if extra:
            raise RuleError(
                f"rule: unknown key(s) {', '.join(sorted(extra))} beside 'rule'; allowed: rule, constraints, utils"
            )
        rule, constraints, utils = value["rule"], value.get("constraints") or {}, value.get("utils") or {}
    else:
        rule, constraints, utils = value, {}, {}
    for what, obj in (("constraints", constraints), ("utils", utils)):
        if not isinstance(obj, dict):
            raise RuleError(f"rule.{what}: give an object of name -> rule")
    return rule, constraints, utils


# ast-grep's names of languages, where they are not tether's grammar ids (a rule file's `language:`)
_AST_GREP_NAMES = {
    "py": "python",
    "js": "javascript",
    "jsx": "javascript",
    "ts": "typescript",
    "rs": "rust",
    "golang": "go",
    "cs": "csharp",
    "c#": "csharp",
    "cc": "cpp",
    "c++": "cpp",
    "cxx": "cpp",
    "rb": "ruby",
    "kt": "kotlin",
    "ex": "elixir",
    "hs": "haskell",
    "yml": "yaml",
    "sh": "bash",
}


def rule_language(value: Any) -> str | None:
    """The grammar id a rule file's `language:` names (ast-grep's names taken too); None if it names none.

    Only the rule file's layout (``rule:`` beside it) has one; a bad rule is left to `compile_rule`.
    """
    if isinstance(value, str):
        value = parse_text(value)
    if not isinstance(value, dict) or "rule" not in value or value.get("language") is None:
        return None
    said = value["language"]
    if not isinstance(said, str) or not said.strip():
        raise RuleError(f"rule: language is {_describe(said)}; give a grammar id, e.g. language: python")
    key = said.strip().lower()
    return _AST_GREP_NAMES.get(key, key)


def _describe(value: Any) -> str:
    if value is None:
        return "empty"
    kind = {str: "a string", list: "a list", bool: "a boolean", int: "a number", float: "a number"}
    return kind.get(type(value), "a " + type(value).__name__)


@attrs.define
class _Compiler:
    grammar_id: str
    language: Any
    compile_pattern: Callable[[str], Pattern]
    util_names: frozenset[str]
    names: set[str] = attrs.Factory(set)
    depth: int = 1

    def kind_name(self, kind: Any, where: str) -> str:
        if not isinstance(kind, str) or not kind:
            raise RuleError(f'{where}: give a node kind as a string, e.g. "call"')
        lang = self.language
        if lang.id_for_node_kind(kind, True) is None and lang.id_for_node_kind(kind, False) is None:
            kinds = {
                lang.node_kind_for_id(i) for i in range(lang.node_kind_count) if lang.node_kind_is_named(i)
            }
            close = difflib.get_close_matches(kind, sorted(k for k in kinds if k), n=3)
            hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
            raise RuleError(f"{where}: {kind!r} is no node kind of the {self.grammar_id} grammar{hint}")
        return kind

    def pattern(self, value: Any, where: str) -> Pattern:
        if isinstance(value, str):
            return self.compiled(value, where)
        if not isinstance(value, dict) or "context" not in value:
            raise RuleError(
                f"{where}: give a pattern string, or an object with context (and selector, strictness)"
            )
        unknown = set(value) - {"context", "selector", "strictness"}
        if unknown:
            raise RuleError(
                f"{where}: unknown key(s) {', '.join(sorted(unknown))}; allowed: context, selector, strictness"
            )
        pattern = self.compiled(value["context"], where + ".context")
        if value.get("selector") is not None:
            kind = self.kind_name(value["selector"], where + ".selector")
            pattern = _select(pattern, kind, self.language, where)
        level = value.get("strictness")
        if level is not None:
            if level not in STRICTNESS:
                raise RuleError(f"{where}.strictness: {level!r} is none of {', '.join(STRICTNESS)}")
            pattern = with_strictness(pattern, level)
        return pattern

    def compiled(self, source: Any, where: str) -> Pattern:
        if not isinstance(source, str):
            raise RuleError(f"{where}: give the pattern as a string")
        try:
            pattern = self.compile_pattern(source)
        except PatternError as exc:
            raise RuleError(f"{where}: {exc}") from None
        self.names |= pattern.names
        self.depth = max(self.depth, pattern.depth)
        return pattern

    def rule(self, obj: Any, where: str) -> Node:
        if not isinstance(obj, dict) or not obj:
            raise RuleError(
                f"{where}: give a rule object with at least one of: {', '.join(ATOMIC + RELATIONAL + COMPOSITE)}"
            )
        unknown = set(obj) - set(ATOMIC + RELATIONAL + COMPOSITE)
        if unknown:
            bad = sorted(unknown)[0]
            close = difflib.get_close_matches(bad, ATOMIC + RELATIONAL + COMPOSITE + _RELATION_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            place = " (stopBy and field belong inside a relational rule)" if bad in _RELATION_KEYS else ""
            raise RuleError(
                f"{where}: unknown key {bad!r}{hint}{place}; a rule has: {', '.join(ATOMIC + RELATIONAL + COMPOSITE)}"
            )
        out: dict[str, Any] = {}
        if "pattern" in obj:
            out["pattern"] = self.pattern(obj["pattern"], where + ".pattern")
        if "kind" in obj:
            out["kind"] = self.kind_name(obj["kind"], where + ".kind")
            out["kind_named"] = self.language.id_for_node_kind(out["kind"], True) is not None
        if "regex" in obj:
            try:
                out["regex"] = re.compile(obj["regex"])
            except (re.error, TypeError) as exc:
                raise RuleError(f"{where}.regex: not a regular expression ({exc})") from None
        out["relations"] = tuple(
            (name, self.relation(obj[name], f"{where}.{name}", name)) for name in RELATIONAL if name in obj
        )
        for name in ("all", "any"):
            if name in obj:
                items = obj[name]
                if not isinstance(items, list) or not items:
                    raise RuleError(f"{where}.{name}: give a non-empty list of rules")
                out[name] = tuple(self.rule(r, f"{where}.{name}[{i}]") for i, r in enumerate(items))
        if "not" in obj:
            out["not_"] = self.rule(obj["not"], where + ".not")
        if "matches" in obj:
            if obj["matches"] not in self.util_names:
                known = ", ".join(sorted(self.util_names)) or "none are defined"
                raise RuleError(f"{where}.matches: no utility rule {obj['matches']!r} in utils ({known})")
            out["matches"] = obj["matches"]
        return Node(**out)

    def relation(self, obj: Any, where: str, name: str) -> Relation:
        if not isinstance(obj, dict):
            raise RuleError(f"{where}: give a rule object (with optional stopBy and field)")
        body = {k: v for k, v in obj.items() if k not in _RELATION_KEYS}
        stop_value = obj.get("stopBy", "neighbor")
        if stop_value in ("neighbor", "end"):
            stop: str | Node = stop_value
        elif isinstance(stop_value, dict):
            stop = self.rule(stop_value, where + ".stopBy")
        else:
            raise RuleError(f'{where}.stopBy: give "neighbor", "end" or a rule object')
        field = obj.get("field")
        if field is not None:
            if name not in ("inside", "has"):
                raise RuleError(f"{where}.field: only inside and has take a field")
            if not isinstance(field, str) or self.language.field_id_for_name(field) is None:
                raise RuleError(f"{where}.field: {field!r} is no field of the {self.grammar_id} grammar")
        return Relation(self.rule(body, where), stop, field)


def _select(pattern: Pattern, kind: str, language: Any, where: str) -> Pattern:
    """The part of a context pattern that has the selector's kind (the first, pre-order)."""
    from tether_astgrep.pattern import _nesting, _walk

    ids = {language.id_for_node_kind(kind, True), language.id_for_node_kind(kind, False)} - {None}
    stack = [pattern.root]
    while stack:
        node = stack.pop()
        if node[0] != META and node[1] in ids:
            names: set[str] = set()
            needles: list[bytes] = []
            _walk(node, names, needles, False)
            return attrs.evolve(
                pattern,
                root=node,
                root_kind=kind,
                root_named=node[0] == INNER or bool(node[0] == TERM and node[3]),
                root_kinds=frozenset((node[1],)),
                needles=tuple(dict.fromkeys(needles)),
                names=frozenset(names),
                depth=_nesting(node),
                also=(),
            )
        if node[0] == INNER:
            stack.extend(reversed(node[2]))
    raise RuleError(
        f"{where}.selector: the context has no {kind!r} node; the selector names a node kind inside the context"
    )


def _kinds(
    rule: Node, utils: dict[str, Node], seen: frozenset[str] = frozenset()
) -> frozenset[tuple[str, bool]] | None:
    """The kinds a node matching the rule can have, or None when the rule does not say."""
    if rule.pattern is not None and rule.pattern.root[0] != META:
        kinds = set()
        for p in rule.pattern.readings:
            if p.root_kind is None:  # a reading that is a bare metavariable: any node
                return None
            kinds.add((p.root_kind, p.root_named))
        return frozenset(kinds)
    if rule.kind is not None:
        return frozenset({(rule.kind, rule.kind_named)})
    for sub in rule.all or ():
        found = _kinds(sub, utils, seen)
        if found is not None:
            return found
    if rule.any is not None:
        union: set = set()
        for sub in rule.any:
            found = _kinds(sub, utils, seen)
            if found is None:
                return None
            union |= found
        return frozenset(union)
    if rule.matches is not None and rule.matches not in seen:
        return _kinds(utils[rule.matches], utils, seen | {rule.matches})
    return None


def _required_needles(rule: Node) -> list[bytes]:
    """Literals every match contains: those of patterns the node itself must match."""
    out: list[bytes] = []
    if rule.pattern is not None and not rule.pattern.also:
        out.extend(rule.pattern.needles)
    for sub in rule.all or ():
        out.extend(_required_needles(sub))
    return out


def compile_rule(
    value: Any, grammar_id: str, lang_key: str, language: Any, compile_pattern: Callable[[str], Pattern]
) -> Rule:
    rule_obj, constraints, utils = parse_argument(value)
    compiler = _Compiler(grammar_id, language, compile_pattern, frozenset(utils))
    compiled_utils = {name: compiler.rule(obj, f"rule.utils.{name}") for name, obj in utils.items()}
    top = compiler.rule(rule_obj, "rule")
    compiled_constraints = tuple(
        (name, compiler.rule(obj, f"rule.constraints.{name}")) for name, obj in constraints.items()
    )
    kinds = _kinds(top, compiled_utils)
    if kinds is None:
        raise RuleError(
            "rule: it does not say which kind of node it matches (only regex, not, relations); add a kind or a "
            'pattern beside them, e.g. {"kind": "call", "regex": "^open"} (ast-grep requires it too)'
        )
    return Rule(
        source=json.dumps({"rule": rule_obj, "constraints": constraints, "utils": utils}, sort_keys=True),
        grammar_id=grammar_id,
        lang_key=lang_key,
        top=top,
        utils=tuple(compiled_utils.items()),
        constraints=compiled_constraints,
        kinds=tuple(sorted(kinds)),
        needles=tuple(dict.fromkeys(_required_needles(top))),
        names=frozenset(compiler.names),
        depth=compiler.depth,
    )
