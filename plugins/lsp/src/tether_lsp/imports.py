"""An import index of a Python tree: who imports a module, read from the files, not asked of the server.

A server in open-files mode (`Connection.open_files`: basedpyright on a big program) checks only the
documents it has open, so before a write the files that can break are opened by tether: the files that
import the written module. They are found here with one read of the server's files (the watcher's list;
a file is read again only when its mtime or size changed, so the index follows writes and a shell's
edits), by a scan of their import statements (`import a.b`, `from a.b import c`, relative imports,
parenthesized lists; inside functions and `try` blocks too). A module's name is its path under the
server's root (or under its `src/`).

Importers are ranked by how directly they use the module (`ImportIndex.importers`): first the files
that import names from it (`from django.utils.encoding import force_str`), those using the imported
names most first; then the files that import the module itself (`from django.utils import encoding`);
then the files importing a package `__init__` that re-exports names from it. An import written in a
string or a comment counts too: one file opened too many costs a check and claims nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

READ_BYTES = 2_000_000  # a bigger file is not read: it is taken to import nothing
# matched at the start of a line holding "import" (found by str.find first: a regex anchored at every line
# start took 1.5 s over Django's 17 MB of Python)
FROM = re.compile(
    r"[ \t]*from[ \t]+(\.*)[ \t]*([\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^\n#;]*(?:\\\n[^\n#;]*)*)"
)
IMPORT = re.compile(r"[ \t]*import[ \t]+([^\n#;]+)")
WORD = re.compile(r"\w+")


@attrs.frozen
class Imports:
    """One file's imports: (module, names imported from it; () for ``import module``), and word counts."""

    stat: tuple[int, int]
    modules: tuple[tuple[str, tuple[str, ...]], ...]


def module_name(path: Path, root: Path) -> str | None:
    """``django/utils/encoding.py`` -> ``django.utils.encoding`` (a package's ``__init__`` -> the package);
    under ``root/src`` the name starts below it. None outside ``root`` or for a name Python cannot import."""
    if not path.is_relative_to(root) or path.suffix not in (".py", ".pyi"):
        return None
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts and parts[0] == "src" and len(parts) > 1:
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def _names(clause: str) -> tuple[str, ...]:
    """``(a as b,\\n c)`` -> ("a", "c"); ``*`` is kept."""
    out = []
    for item in clause.replace("\\\n", " ").strip().strip("()").split(","):
        words = item.split()
        if words and (words[0] == "*" or words[0].isidentifier()):
            out.append(words[0])
    return tuple(out)


def parse(text: str, module: str | None, is_package: bool) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The imports written in ``text``, relative ones resolved against ``module``."""
    out: list[tuple[str, tuple[str, ...]]] = []
    froms, plain = [], []
    last, at = -1, text.find("import")
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        at = text.find("import", at + 6)
        if start == last:
            continue  # a second "import" on the same line
        last = start
        if m := FROM.match(text, start):
            froms.append(m.groups())
        elif m := IMPORT.match(text, start):
            plain.append(m.group(1))
    for dots, name, clause in froms:
        if dots:
            if module is None:
                continue
            base = module.split(".") if is_package else module.split(".")[:-1]
            up = len(dots) - 1
            if up > len(base):
                continue
            base = base[: len(base) - up] if up else base
            name = ".".join([*base, name] if name else base)
        if name:
            out.append((name, _names(clause)))
    for clause in plain:
        for item in clause.replace("\\\n", " ").split(","):
            words = item.split()
            if words and all(p.isidentifier() for p in words[0].split(".")):
                out.append((words[0], ()))
    return tuple(out)


class ImportIndex:
    """Every file's imports under a server's root, read again only where a file's mtime or size changed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[Path, Imports] = {}

    def update(self, files: Mapping[Path, tuple[int, int]]) -> None:
        """Follow the watcher's list of files (path -> mtime and size): new and changed ones are read."""
        for gone in set(self.files) - set(files):
            del self.files[gone]
        for path, stat in files.items():
            old = self.files.get(path)
            if old is not None and old.stat == stat:
                continue
            module = module_name(path, self.root)
            try:
                if stat[1] > READ_BYTES:
                    raise OSError
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                self.files[path] = Imports(stat, ())
                continue
            self.files[path] = Imports(stat, parse(text, module, path.stem == "__init__"))

    def importers(self, targets: Iterable[Path]) -> list[Path]:
        """The files importing ``targets``, nearest first (see the module's docstring); ``targets`` left out."""
        targets = list(targets)
        wanted = {m for t in targets if (m := module_name(t, self.root)) is not None}
        ranked: dict[Path, tuple[int, int]] = {}  # path -> (rank, -uses)
        reexports: dict[str, set[str]] = {}  # package -> names it imports from a target
        for path, imports in self.files.items():
            if path in targets:
                continue
            best: tuple[int, int] | None = None
            for module, names in imports.modules:
                if module in wanted and names:
                    key = (0, -_uses(path, names))
                    if path.stem == "__init__" and (pkg := module_name(path, self.root)):
                        reexports.setdefault(pkg, set()).update(names)
                elif module in wanted or any(f"{module}.{n}" in wanted for n in names):
                    key = (1, 0)
                else:
                    continue
                best = key if best is None else min(best, key)
            if best is not None:
                ranked[path] = best
        if reexports:  # importers of a package __init__ that re-exports a target's names
            for path, imports in self.files.items():
                if path in ranked or path in targets:
                    continue
                for module, names in imports.modules:
                    if module in reexports and set(names) & reexports[module]:
                        ranked[path] = (2, 0)
                        break
        return sorted(ranked, key=lambda p: (*ranked[p], str(p)))


def _uses(path: Path, names: Iterable[str]) -> int:
    """How often the imported ``names`` are written in the file (its import line included)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0
    wanted = set(names) - {"*"}
    return sum(1 for w in WORD.findall(text) if w in wanted)
