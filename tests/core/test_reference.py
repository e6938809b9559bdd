"""docs/reference.md, the generated reference of every hook and definition type, is current.

scripts/reference.py writes it from the docstrings; here it must produce the file as it is, with an
entry for every field of every definition type. A docstring changed without regenerating, or a field
added without its ``Attributes:`` entry, fails here, naming the fix.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

import attrs
import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "reference.py"


@pytest.fixture(scope="module")
def reference():
    """The generator as a module; it documents every family, so every family must be installed."""
    for pyproject in sorted((REPO / "plugins").glob("*/pyproject.toml")):
        pytest.importorskip(f"tether_{pyproject.parent.name}", reason="the reference covers every family")
    spec = importlib.util.spec_from_file_location("tether_reference_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_is_current_and_documents_every_field(reference):
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_reference_names_every_hook_and_definition_type(reference):
    text = (REPO / "docs" / "reference.md").read_text()
    for name in (
        "tether_register_tools",
        "tether_lsp_servers",
        "tether_debug_adapters",
        "tether_astgrep_grammars",
    ):
        assert f"#### `{name}`" in text, name
    for name in (
        "tether_lsp.servers.ServerDef",
        "tether_debug.adapters.AdapterDef",
        "tether_astgrep.grammars.Rung",
    ):
        assert f"#### `{name}`" in text, name
    # a field's meaning comes from its docstring, its default from attrs
    assert (
        "| `checker_format` | `Literal['pyright-json', 'tsc', 'gnu', 'cargo-json'] \\| None` | `None` | how"
        in text
    )


def test_a_field_without_an_entry_is_named(reference, monkeypatch):
    @attrs.frozen
    class Thing:
        """A thing.

        Attributes:
            size: how big,
                in metres.
        """

        size: int
        colour: str = "red"

    module = types.ModuleType("reference_test_defs")
    module.Thing = Thing  # pyright: ignore[reportAttributeAccessIssue] - a module built here
    Thing.__module__ = module.__name__
    monkeypatch.setitem(sys.modules, module.__name__, module)
    missing: list[str] = []
    lines = reference.type_entry("reference_test_defs:Thing", missing)
    assert missing == ["reference_test_defs:Thing.colour"]
    assert "| `size` | `int` | required | how big, in metres. |" in lines
    assert "| `colour` | `str` | `'red'` |  |" in lines


def test_a_stale_reference_fails_the_check_and_names_the_command(reference, monkeypatch, tmp_path, capsys):
    stale = tmp_path / "reference.md"
    stale.write_text("# an old reference\n")
    monkeypatch.setattr(reference, "OUT", stale)
    monkeypatch.setattr(reference, "ROOT", tmp_path)
    monkeypatch.setattr(sys, "argv", ["reference.py", "--check"])
    assert reference.main() == 1
    assert "reference.md is stale: run `uv run python scripts/reference.py`" in capsys.readouterr().err
    assert stale.read_text() == "# an old reference\n"  # --check writes nothing
