"""Root markers: the files or directories that make a directory one of a language's projects.

One definition for every family that looks for projects (the lsp family's servers, the debug family's
adapters), so a project one family takes, the other takes too::

    from tether.markers import ROOT_MARKERS

    ServerDef(id="gopls", languages=("go",), root_markers=ROOT_MARKERS["go"], ...)

Keyed by language; each value is a tuple in the order a family looks for them (and names them when
none is found). ``"c"`` covers C and C++ alike (clangd's compilation databases and build files). A
family whose tool covers more than one language joins the tuples it needs (an adapter for C and Rust:
``(*ROOT_MARKERS["rust"], *ROOT_MARKERS["c"])``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

ROOT_MARKERS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "python": ("pyproject.toml", "setup.py", "requirements.txt", "setup.cfg", "pyrightconfig.json"),
        "c": ("compile_commands.json", "compile_flags.txt", ".clangd", "CMakeLists.txt", "Makefile"),
        "go": ("go.mod", "go.work"),
        "rust": ("Cargo.toml",),
        "dart": ("pubspec.yaml",),
        "typescript": ("tsconfig.json", "jsconfig.json", "package.json"),
    }
)
