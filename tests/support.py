"""Helpers shared by every family's tests: `from support import require_binary`."""

from __future__ import annotations

import os
import shutil

import pytest
from tether.testing import assert_no_new_children, children  # noqa: F401 - re-exported for the tests

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require_binary(name: str, *candidates: str) -> str:
    """The path of a binary a test needs: skipped locally when absent, a failure in CI (which installs it)."""
    for candidate in (name, *candidates):
        found = shutil.which(candidate) or (candidate if os.path.isabs(candidate) and os.access(candidate, os.X_OK) else None)
        if found:
            return found
    message = f"{name} is not installed (.ci/run installs it)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)
