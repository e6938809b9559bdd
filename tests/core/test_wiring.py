"""The one list of families is plugins/: each folder with its pyproject.toml is a family, and the root's
extras and uv sources must name exactly those.

noxfile.py, tests/core/test_packaging.py, tests/core/test_reference.py and scripts/reference.py derive the
families from the folders; the root's pyproject.toml spells them out (a package's metadata cannot be
derived), so here it is held to them, each failure naming the line to write.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
ROOT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def families() -> dict[str, dict[str, Any]]:
    """Each family's [project] table, by its folder's name."""
    return {
        p.parent.name: tomllib.loads(p.read_text(encoding="utf-8"))["project"]
        for p in sorted((REPO / "plugins").glob("*/pyproject.toml"))
    }


def test_each_family_is_named_after_its_folder():
    found = families()
    assert found, "no plugins/*/pyproject.toml"
    for family, project in found.items():
        assert project["name"] == f"tether-{family}", f"plugins/{family}: its distribution is tether-{family}"
        entry = project.get("entry-points", {}).get("tether", {})
        assert list(entry) == [family], (
            f"plugins/{family}/pyproject.toml: one entry point of group tether, named {family}: "
            f'[project.entry-points.tether] {family} = "tether_{family}.plugin"'
        )


def test_the_root_extras_name_every_family_and_all_of_them():
    extras = ROOT["project"]["optional-dependencies"]
    found = families()
    missing = sorted(set(found) - set(extras))
    assert not missing, "pyproject.toml [project.optional-dependencies] lacks " + ", ".join(
        f'{f} = ["tether-{f}>=X.Y,<X.Z"]' for f in missing
    )
    stray = sorted(set(extras) - set(found) - {"all"})
    assert not stray, f"pyproject.toml extras without a folder in plugins/: {stray}"
    for family, project in found.items():
        (needed,) = [Requirement(r) for r in extras[family]]
        assert needed.name == f"tether-{family}", f"extra {family}: {needed}"
        own = set(project.get("optional-dependencies", {}))
        assert needed.extras <= own, f"extra {family} asks tether-{family} for {needed.extras - own}"
    every = [r for f in sorted(found) for r in extras[f]]
    assert sorted(extras["all"]) == sorted(every), (
        f"pyproject.toml extra all = {extras['all']}; every family's extra: {every}"
    )


def test_the_root_uv_sources_are_the_workspace_members():
    sources = ROOT["tool"]["uv"]["sources"]
    wanted = {"tether", "tether-core", "tether-tests", *(f"tether-{f}" for f in families())}
    missing = sorted(wanted - set(sources))
    assert not missing, "pyproject.toml [tool.uv.sources] lacks " + ", ".join(
        f"{name} = {{ workspace = true }}" for name in missing
    )
    assert sorted(set(sources) - wanted) == [], "[tool.uv.sources] names what is not in the workspace"
    assert all(source == {"workspace": True} for source in sources.values()), sources
    assert "plugins/*" in ROOT["tool"]["uv"]["workspace"]["members"]
