"""Fixtures shared by every family's tests (helpers live in tests/support.py)."""

from __future__ import annotations

import pytest

from support import assert_no_new_children, children


@pytest.fixture
def no_leftover_processes():
    """Use in a test that opens a run: after it, no process the test started may be alive."""
    before = children()
    yield
    assert_no_new_children(before)


@pytest.fixture
def confined(tmp_path, monkeypatch):
    """A fake HOME with a fake ~/.ssh/id_ed25519, a loopback listener on the host, a secret variable, a git root."""
    from support import Confined

    world = Confined(tmp_path, monkeypatch)
    yield world
    world.close()
