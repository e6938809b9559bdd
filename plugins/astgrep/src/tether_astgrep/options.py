"""Run options of the astgrep family."""

from __future__ import annotations

import attrs
from tether import arg


@attrs.frozen
class AstgrepOptions:
    astgrep_enabled: bool = arg("whether the run offers structural search and edits", default=True)
    astgrep_workers: int | None = arg(
        "parser worker processes (default: the machine's cores)", default=None, minimum=1
    )
    astgrep_timeout: float = arg("seconds one search over the worker pool may take", default=120.0, minimum=0)
