"""Tool arguments: an attrs class per tool, the JSON Schema derived from it, strict structuring.

Declare arguments with `arg(...)`: its description and constraints go into the schema the model sees
and are checked at the edge. Structuring uses cattrs with strict primitive hooks: cattrs' defaults
would turn ``"false"`` into True and 3.7 into 3, and a string into a list of its characters. Every
problem becomes one line the model can act on, e.g. ``line: expected integer, got string 'ten'``.
"""

from __future__ import annotations

import enum
import functools
import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union

import attrs

if typing.TYPE_CHECKING:
    import cattrs

_META = "tether"
ENV_META = "tether_env"  # a run option's environment variable and its parser (see `arg`)
NOTHING = attrs.NOTHING


def arg(
    description: str,
    *,
    default: Any = NOTHING,
    factory: Any = None,
    minimum: float | None = None,
    maximum: float | None = None,
    min_length: int | None = None,
    max_length: int | None = None,
    min_items: int | None = None,
    max_items: int | None = None,
    examples: Sequence[Any] | None = None,
    validator: Any = None,
    env: str | None = None,
    env_parse: Callable[[str], Any] | None = None,
) -> Any:
    """An argument field: ``line: int = arg("1-based line number", minimum=1)``.

    ``validator`` is an attrs validator for what the schema cannot say; its ValueError is the problem's line.

    For a run option only (`tether.options`): ``env`` names the environment variable that gives its
    value when no other source does (or one gives null), and ``env_parse(text)`` turns the variable's
    text into a value to structure (default: the text read as JSON, else the text itself).
    """
    meta = {
        "description": description,
        "minimum": minimum,
        "maximum": maximum,
        "minLength": min_length,
        "maxLength": max_length,
        "minItems": min_items,
        "maxItems": max_items,
        "examples": list(examples) if examples else None,
    }
    meta = {k: v for k, v in meta.items() if v is not None}
    metadata: dict[str, Any] = {_META: meta}
    if env is not None:
        metadata[ENV_META] = (env, env_parse or env_text)
    if factory is not None:
        return attrs.field(factory=factory, metadata=metadata, kw_only=True, validator=validator)
    return attrs.field(default=default, metadata=metadata, kw_only=True, validator=validator)


def env_text(text: str) -> Any:
    """An environment variable's text as an option's raw value: JSON when it parses (``30``, ``true``,
    ``["a", "b"]``), else the text itself (a string, checked against the option's type like any other)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


class ArgumentsError(Exception):
    """The arguments do not fit the tool; ``problems`` holds one line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


# -- schema ---------------------------------------------------------------------------------------


def _is_optional(tp: Any) -> tuple[bool, Any]:
    if typing.get_origin(tp) in (Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(members) < len(typing.get_args(tp)):
            return True, (members[0] if len(members) == 1 else Union[tuple(members)])  # noqa: UP007 - a Union of a runtime tuple of types has no X | Y spelling
    return False, tp


def _type_schema(tp: Any) -> dict[str, Any]:
    optional, inner = _is_optional(tp)
    if optional:
        return _type_schema(inner)
    origin = typing.get_origin(inner)
    if inner is str:
        return {"type": "string"}
    if inner is bool:
        return {"type": "boolean"}
    if inner is int:
        return {"type": "integer"}
    if inner is float:
        return {"type": "number"}
    if inner is Any:
        return {}
    if origin is Literal:
        values = list(typing.get_args(inner))
        return {"type": "string" if all(isinstance(v, str) for v in values) else "integer", "enum": values}
    if isinstance(inner, type) and issubclass(inner, enum.Enum):
        return {"type": "string", "enum": [m.value for m in inner]}
    if origin in (list, tuple, Sequence, typing.Sequence) or inner in (list, tuple):
        item_args = typing.get_args(inner)
        return {"type": "array", "items": _type_schema(item_args[0]) if item_args else {}}
    if origin in (dict, Mapping) or inner is dict:
        return {"type": "object"}
    if attrs.has(inner):
        return schema_for(inner)
    if origin in (Union, types.UnionType):
        return {"anyOf": [_type_schema(a) for a in typing.get_args(inner)]}
    raise TypeError(f"tether cannot describe argument type {inner!r} in a schema")


@functools.cache
def schema_for(cls: type) -> dict[str, Any]:
    """The JSON Schema of an attrs argument class (cached: the class is frozen in practice)."""
    attrs.resolve_types(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for f in attrs.fields(cls):
        prop = _type_schema(f.type)
        meta = dict(f.metadata.get(_META, {}))
        if "description" in meta:
            prop = {"description": meta.pop("description"), **prop}
        prop.update(meta)
        if f.default is NOTHING:
            required.append(f.name)
        elif not isinstance(f.default, attrs.Factory) and f.default is not None:  # pyright: ignore[reportArgumentType] - a class at run time
            default = f.default.value if isinstance(f.default, enum.Enum) else f.default
            prop["default"] = default
        properties[f.name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


# -- strict structuring ---------------------------------------------------------------------------


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {json.dumps(value)}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"number {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"string {shown!r}"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


class _Mismatch(TypeError):
    def __init__(self, expected: str, value: Any) -> None:
        super().__init__(f"expected {expected}, got {_describe(value)}")


def _strict_str(value: Any, tp: Any) -> str:
    if isinstance(tp, type) and issubclass(tp, enum.Enum):  # a str enum dispatches here as a str subclass
        return _structure_enum(value, tp)
    if isinstance(value, str):
        return value
    raise _Mismatch("string", value)


def _structure_enum(value: Any, tp: Any) -> Any:
    try:
        return tp(value)
    except ValueError:
        allowed = ", ".join(json.dumps(m.value) for m in tp)
        raise TypeError(f"expected one of {allowed}, got {_describe(value)}") from None


def _strict_int(value: Any, _: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)  # JSON has one number type: 3.0 is the integer 3, 3.7 is not
    raise _Mismatch("integer", value)


def _strict_float(value: Any, _: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise _Mismatch("number", value)


def _strict_bool(value: Any, _: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise _Mismatch("boolean (true or false)", value)


@functools.cache
def _converter() -> cattrs.Converter:
    """The strict converter, built on the first call (cattrs stays out of `tether tools` start-up)."""
    import cattrs
    from cattrs.errors import IterableValidationError

    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, _strict_str)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook(bool, _strict_bool)
    conv.register_structure_hook(Any, lambda v, _: v)

    def is_seq(tp: Any) -> bool:
        return typing.get_origin(tp) in (list, tuple, Sequence, typing.Sequence)

    def structure_seq(value: Any, tp: Any) -> Any:
        if not isinstance(value, list):
            raise _Mismatch("array", value)
        (item,) = typing.get_args(tp)[:1] or (Any,)
        out, errors = [], []
        for i, v in enumerate(value):
            try:
                out.append(conv.structure(v, item))
            except Exception as exc:  # noqa: BLE001 - collected and reported per item
                exc.__notes__ = [*getattr(exc, "__notes__", []), f"@index {i}"]
                errors.append(exc)
        if errors:
            # cattrs' validation errors take the class too (ExceptionGroup's stub knows only two arguments)
            raise IterableValidationError("item errors", errors, tp)  # pyright: ignore[reportCallIssue]
        return tuple(out) if typing.get_origin(tp) is tuple else out

    conv.register_structure_hook_func(is_seq, structure_seq)

    def is_dict(tp: Any) -> bool:
        return typing.get_origin(tp) in (dict, Mapping) or tp is dict

    def structure_dict(value: Any, tp: Any) -> Any:
        if not isinstance(value, dict):
            raise _Mismatch("object", value)
        return dict(value)

    conv.register_structure_hook_func(is_dict, structure_dict)

    def is_literal(tp: Any) -> bool:
        return typing.get_origin(tp) is Literal

    def structure_literal(value: Any, tp: Any) -> Any:
        allowed = typing.get_args(tp)
        if value in allowed and type(value) in {type(a) for a in allowed}:
            return value
        raise TypeError(
            f"expected one of {', '.join(json.dumps(a) for a in allowed)}, got {_describe(value)}"
        )

    conv.register_structure_hook_func(is_literal, structure_literal)

    def is_enum(tp: Any) -> bool:
        return isinstance(tp, type) and issubclass(tp, enum.Enum)

    conv.register_structure_hook_func(is_enum, _structure_enum)

    def is_union(tp: Any) -> bool:
        return typing.get_origin(tp) in (Union, types.UnionType)

    def structure_union(value: Any, tp: Any) -> Any:
        members = [m for m in typing.get_args(tp) if m is not type(None)]
        if value is None and len(members) < len(typing.get_args(tp)):
            return None
        if len(members) == 1:  # Optional[X]: X's own error says more than "expected X or null"
            return conv.structure(value, members[0])
        for member in members:  # in declared order: the first that takes the value strictly
            try:
                return conv.structure(value, member)
            except Exception:  # noqa: BLE001 - try the next member
                continue
        kind = _describe(value).split()[0]
        same = [m for m in members if _type_schema(m).get("type") == kind]
        if len(same) == 1:  # the value has the right shape: what is wrong inside it says more
            return conv.structure(value, same[0])
        kinds = [
            "null" if m is type(None) else _type_schema(m).get("type", "value") for m in typing.get_args(tp)
        ]
        raise TypeError(f"expected {' or '.join(dict.fromkeys(kinds))}, got {_describe(value)}")

    conv.register_structure_hook_func(is_union, structure_union)
    return conv


def _walk(exc: BaseException, path: str, out: list[str]) -> None:
    """Flatten a cattrs error tree into `path: problem` lines."""
    from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

    if isinstance(exc, ClassValidationError):
        for sub in exc.exceptions:
            note = next((n for n in getattr(sub, "__notes__", []) if " @ attribute " in str(n)), None)
            name = str(note).rsplit(" @ attribute ", 1)[1] if note else "?"
            sub_path = f"{path}.{name}" if path else name
            if isinstance(sub, ForbiddenExtraKeysError):
                _walk(sub, path, out)
            elif isinstance(sub, KeyError):
                out.append(f"missing required argument '{sub_path}'")
            else:
                _walk(sub, sub_path, out)
        return
    if isinstance(exc, IterableValidationError):
        for sub in exc.exceptions:
            note = next((n for n in getattr(sub, "__notes__", []) if str(n).startswith("@index ")), None)
            idx = str(note).split(" ", 1)[1] if note else "?"
            _walk(sub, f"{path}[{idx}]", out)
        return
    if isinstance(exc, ForbiddenExtraKeysError):
        allowed = ", ".join(f.name for f in attrs.fields(exc.cl))
        for key in sorted(exc.extra_fields):
            out.append(f"{path}: unknown key '{key}'; allowed: {allowed}")
        return
    if isinstance(exc, (_Mismatch, TypeError, ValueError)):
        out.append(f"{path}: {exc}")
        return
    out.append(f"{path}: {type(exc).__name__}: {exc}")


def _may_nest(tp: Any) -> bool:
    """Whether a field of this type can hold attrs instances whose own constraints need checking."""
    if attrs.has(tp):
        return True
    return any(_may_nest(a) for a in typing.get_args(tp))


@functools.cache
def _plan(cls: type) -> tuple[tuple[tuple[str, dict[str, Any]], ...], tuple[str, ...], tuple[str, ...]]:
    """Per class, once: constrained fields with their limits, field names, fields that may nest."""
    attrs.resolve_types(cls)
    fields = attrs.fields(cls)
    limits = {
        f.name: {k: v for k, v in f.metadata.get(_META, {}).items() if k not in ("description", "examples")}
        for f in fields
    }
    constrained = tuple((name, m) for name, m in limits.items() if m)
    return constrained, tuple(f.name for f in fields), tuple(f.name for f in fields if _may_nest(f.type))


def _check_constraints(cls: type, obj: Any, out: list[str], prefix: str = "") -> None:
    constrained, _, nesting = _plan(cls)
    for fname in nesting:
        value = getattr(obj, fname)
        if attrs.has(type(value)):
            _check_constraints(type(value), value, out, f"{prefix}{fname}.")
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if attrs.has(type(item)):
                    _check_constraints(type(item), item, out, f"{prefix}{fname}[{i}].")
    for fname, meta in constrained:
        value = getattr(obj, fname)
        if value is None:
            continue
        name = prefix + fname
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in meta and value < meta["minimum"]:
                out.append(f"{name}: must be at least {meta['minimum']}, got {value}")
            if "maximum" in meta and value > meta["maximum"]:
                out.append(f"{name}: must be at most {meta['maximum']}, got {value}")
        if isinstance(value, str):
            if "minLength" in meta and len(value) < meta["minLength"]:
                what = (
                    "must not be empty"
                    if meta["minLength"] == 1
                    else f"must be at least {meta['minLength']} characters"
                )
                out.append(f"{name}: {what}")
            if "maxLength" in meta and len(value) > meta["maxLength"]:
                out.append(f"{name}: must be at most {meta['maxLength']} characters, got {len(value)}")
        if isinstance(value, (list, tuple)):
            if "minItems" in meta and len(value) < meta["minItems"]:
                out.append(f"{name}: needs at least {meta['minItems']} item(s), got {len(value)}")
            if "maxItems" in meta and len(value) > meta["maxItems"]:
                out.append(f"{name}: takes at most {meta['maxItems']} items, got {len(value)}")


def _without_nulls(cls: type, raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` without the nulls of arguments that have a default: "not given", at every depth.

    Strict-mode clients (the OpenAI Agents SDK's default) make every optional property required and
    send null for the ones they leave out. A required argument's null is kept, and refused."""
    _, _, nesting = _plan(cls)
    if not nesting and None not in raw.values():  # the common case, on every call: nothing to drop
        return raw
    fields = {f.name: f for f in attrs.fields(cls)}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        field = fields.get(key)
        if field is None:
            out[key] = value
        elif value is None and field.default is not NOTHING:
            continue
        elif key in nesting:
            out[key] = _nested_without_nulls(_is_optional(field.type)[1], value)
        else:
            out[key] = value
    return out


def _nested_without_nulls(tp: Any, value: Any) -> Any:
    if attrs.has(tp) and isinstance(value, dict):
        return _without_nulls(tp, value)
    item = typing.get_args(tp)[:1]
    if item and isinstance(value, list):
        inner = _is_optional(item[0])[1]
        return [_nested_without_nulls(inner, v) for v in value]
    return value


def structure_arguments(cls: type, raw: Any) -> Any:
    """Turn the model's JSON arguments into an instance of ``cls``, or raise ArgumentsError."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ArgumentsError([f"arguments must be a JSON object, got {_describe(raw)}"])
    _, names, _ = _plan(cls)
    problems: list[str] = []
    for key in raw:
        if key not in names:
            import difflib  # only on a mistake

            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            problems.append(f"unknown argument '{key}'{hint}; allowed: {', '.join(names) or 'none'}")
    if problems:
        raise ArgumentsError(problems)
    raw = _without_nulls(cls, raw)
    try:
        obj = _converter().structure(raw, cls)
    except Exception as exc:  # noqa: BLE001 - every structuring problem becomes a line for the model
        _walk(exc, "", problems)
        raise ArgumentsError(problems or [f"{type(exc).__name__}: {exc}"]) from None
    _check_constraints(cls, obj, problems)
    if problems:
        raise ArgumentsError(problems)
    return obj
