"""Throwaway plugins installed for real: a dist-info with an entry point on a temporary sys.path entry."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from tether.plugins import discovered_entry_points

HERE = Path(__file__).parent
PLUGINS = HERE / "plugins"  # the modules of the test plugins


def install_plugin_dists(site: Path, plugins: dict[str, str]) -> Path:
    """Write one distribution per entry (entry-point name -> module name) into ``site``."""
    for ep_name, module in plugins.items():
        dist = site / f"tether_test_{ep_name}-0.0.0.dist-info"
        dist.mkdir(parents=True, exist_ok=True)
        (dist / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: tether-test-{ep_name}\nVersion: 0.0.0\n"
        )
        (dist / "entry_points.txt").write_text(f"[tether]\n{ep_name} = {module}\n")
    return site


@pytest.fixture
def plugin_site(tmp_path, monkeypatch):
    """Install the test plugins (procfam, broken, typo) as real distributions for this process and children."""
    site = install_plugin_dists(
        tmp_path / "site",
        {"procfam": "tether_test_procfam", "broken": "tether_test_broken", "typo": "tether_test_typo"},
    )
    paths = [str(site), str(PLUGINS)]
    monkeypatch.delenv("TETHER_PLUGINS", raising=False)
    monkeypatch.delenv("TETHER_BLOCK_PLUGINS", raising=False)
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    )
    discovered_entry_points.cache_clear()
    for mod in ("tether_test_procfam", "tether_test_broken", "tether_test_typo"):
        sys.modules.pop(mod, None)
    yield site
    discovered_entry_points.cache_clear()
    for mod in ("tether_test_procfam", "tether_test_broken", "tether_test_typo"):
        sys.modules.pop(mod, None)
