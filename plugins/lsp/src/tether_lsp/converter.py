"""pygls' converter (lsprotocol's cattrs hooks), with the one hook that cattrs >= 25 needs.

lsprotocol registers structure hooks for the unions of the protocol it cannot structure by itself,
e.g. ``Union[str, NotebookDocumentFilterNotebookType, ...]``, but not for their optional forms.
cattrs < 25 structured ``Optional[U]`` through ``U``'s hook; cattrs >= 25 does not, so a server that
announces ``notebookDocumentSync`` with a cell selector (ty does) gets an initialize reply pygls
cannot parse, and the request never completes. The hook below restores the old rule: ``None`` is
None, anything else is structured as ``U`` with the hook lsprotocol registered for it.

lsprotocol's hook for an item of a code action answer (``Command | CodeAction``) takes any item with a
``command`` field for a bare Command, so a CodeAction that carries a command (gopls' "Extract variable":
``{"title", "kind", "command": {...}}``) became a Command whose name was the text of that object. The item
is a Command only when its ``command`` is a string, as the protocol has it.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Union


def lsp_converter() -> Any:
    """The converter for pygls' `LanguageClient(converter_factory=...)`."""
    from cattrs.errors import StructureHandlerNotFoundError
    from pygls.protocol import default_converter

    conv = default_converter()

    def members(tp: Any) -> list[Any]:
        return [a for a in typing.get_args(tp) if a is not type(None)]

    def is_optional_registered_union(tp: Any) -> bool:
        if typing.get_origin(tp) not in (Union, types.UnionType):
            return False
        inner = members(tp)
        if len(inner) < 2 or len(inner) == len(typing.get_args(tp)):
            return False  # not optional, or Optional[X] of one type, which cattrs handles
        try:
            conv.get_structure_hook(Union[tuple(inner)])  # noqa: UP007 - a Union of a runtime tuple of types has no X | Y spelling
        except StructureHandlerNotFoundError:
            return False
        return True

    def structure(obj: Any, tp: Any) -> Any:
        # a Union of a runtime tuple of types: a special form, not a class, to a type checker
        union: Any = Union[tuple(members(tp))]  # noqa: UP007 - a Union of a runtime tuple of types has no X | Y spelling
        return None if obj is None else conv.structure(obj, union)

    conv.register_structure_hook_func(is_optional_registered_union, structure)

    from lsprotocol import types as lsp

    def code_action(obj: Any, _: Any) -> Any:
        bare = isinstance(obj.get("command"), str)
        return conv.structure(obj, lsp.Command if bare else lsp.CodeAction)

    conv.register_structure_hook(Union[lsp.Command, lsp.CodeAction], code_action)  # noqa: UP007 - as lsprotocol registers it
    return conv
