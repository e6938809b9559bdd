"""Fixtures shared by every family's tests come from the core's test kit (`tether.testing`, a pytest
plugin: `tether_run`, `no_leftover_processes`); helpers live in tests/support.py."""

from __future__ import annotations

import pytest


@pytest.fixture
def confined(tmp_path, monkeypatch):
    """A fake HOME with a fake ~/.ssh/id_ed25519, a loopback listener on the host, a secret variable, a git root."""
    from support import Confined

    world = Confined(tmp_path, monkeypatch)
    yield world
    world.close()
