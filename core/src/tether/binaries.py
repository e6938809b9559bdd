"""A project's own binaries: its virtual environment's interpreter and its local tool directories.

The families that run a project's code look here (debug's debuggee interpreter, eval's kernel
interpreter, lsp's servers and checkers); what to do when the project has none (tether's own
environment, PATH) and whether the run trusts its root enough to use them is theirs to decide.
Here too is what a Go command (gopls, go vet, go build) is given in a run that does not trust its
root, so the families that run one say it once.
"""

from __future__ import annotations

import os
from pathlib import Path

# GOTOOLCHAIN=local: never fetch the toolchain a go.mod names; GOPROXY=off and GOVCS=*:off: no module
# download, from a proxy or straight from a repository (GOFLAGS=-mod=mod would allow them). A build runs
# no code of the project, but a download runs someone's server.
GO_UNTRUSTED_ENV = {"GOTOOLCHAIN": "local", "GOPROXY": "off", "GOVCS": "*:off"}
VENVS = (".venv", "venv")
LOCAL_BIN_DIRS = (
    ".venv/bin",
    "venv/bin",
    "node_modules/.bin",
)  # looked at before PATH: the project's version wins


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def project_pythons(root: Path) -> list[Path]:
    """The interpreter of each of the root's virtual environments (``.venv``, then ``venv``)."""
    out = []
    for venv in VENVS:
        found = next(
            (p for p in (root / venv / "bin" / n for n in ("python", "python3")) if _executable(p)), None
        )
        if found is not None:
            out.append(found)
    return out


def project_python(root: Path) -> str | None:
    """The project's own interpreter (its first virtual environment's), or None."""
    found = project_pythons(root)
    return str(found[0]) if found else None


def find_project_binary(root: Path, name: str) -> str | None:
    """``name`` from the root's own tool directories (``.venv/bin``, ``venv/bin``, ``node_modules/.bin``), or None."""
    for sub in LOCAL_BIN_DIRS:
        candidate = root / sub / name
        if _executable(candidate):
            return str(candidate)
    return None
