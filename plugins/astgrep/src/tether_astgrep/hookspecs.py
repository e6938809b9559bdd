"""The astgrep family's own hooks: its per-run resource, and grammars from third parties."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tether.hookspecs import hookspec

if TYPE_CHECKING:
    from tether.run import Run

    from tether_astgrep.grammars import Grammar
    from tether_astgrep.parsers import ParserPool


@hookspec(firstresult=True)
def tether_astgrep_parsers(run: Run) -> ParserPool | None:
    """The run's parser pool handle (`tether_astgrep.parsers.ParserPool`), or None for no astgrep tools.

    The family's own implementation returns a cheap handle: no grammar is loaded and no worker process
    starts until a search needs it. A harness overrides it with ``@hookimpl(tryfirst=True)``.

    Stops at the first non-None result.
    """


@hookspec
def tether_astgrep_grammars(run: Run) -> Sequence[Grammar] | None:
    """Grammars to offer (`tether_astgrep.grammars.Grammar`): a new language, or a replacement by id.

    A grammar given here wins over the built-in one with the same id, and its file extensions win
    over other grammars' claims. Its ``language`` loader must be a module-level function (or a
    ``functools.partial`` of one) so the worker processes can load it too.
    """
