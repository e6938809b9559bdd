"""The import index that finds the files a write can break in an open-files server (no server needed)."""

from __future__ import annotations

import os
from pathlib import Path

from tether_lsp.imports import ImportIndex, module_name, parse
from tether_lsp.watching import file_stat


def tree(root: Path, files: dict[str, str]) -> dict[Path, tuple[int, int]]:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return {p: st for p in root.rglob("*.py") if (st := file_stat(p)) is not None}


def test_module_names_and_every_form_of_import_are_read():
    root = Path("/r")
    assert module_name(root / "pkg/sub/mod.py", root) == "pkg.sub.mod"
    assert module_name(root / "pkg/__init__.py", root) == "pkg"
    assert module_name(root / "src/pkg/mod.py", root) == "pkg.mod"
    assert module_name(root / "not-a-name/mod.py", root) is None
    text = (
        "import os, pkg.a as x\n"
        "from pkg.b import (\n    one,\n    two as deux,\n)\n"
        "from . import sibling\n"
        "from ..up import thing  # a comment\n"
        "def f():\n    from pkg.c import late\n"
        "try:\n    import pkg.d\nexcept ImportError:\n    pass\n"
        "x = 'no import here'\n"
    )
    got = parse(text, "pkg.sub.mod", False)
    assert ("os", ()) in got and ("pkg.a", ()) in got and ("pkg.d", ()) in got
    assert ("pkg.b", ("one", "two")) in got
    assert ("pkg.sub", ("sibling",)) in got
    assert ("pkg.up", ("thing",)) in got
    assert ("pkg.c", ("late",)) in got
    # a package's own relative import is of the package itself
    assert ("pkg.x", ("y",)) in parse("from .x import y\n", "pkg", True)


def test_importers_nearest_first_and_the_index_follows_changes(tmp_path):
    root = tmp_path
    files = tree(
        root,
        {
            "pkg/__init__.py": "from pkg.util import greet\n",
            "pkg/util.py": "def greet(): ...\ndef other(): ...\n",
            "pkg/heavy.py": "from pkg.util import greet\ngreet(); greet(); greet()\n",
            "pkg/light.py": "from .util import greet, other\ngreet()\n",
            "pkg/modular.py": "from pkg import util\nutil.greet()\n",
            "pkg/via_init.py": "from pkg import greet\ngreet()\n",
            "pkg/unrelated.py": "import os\n",
        },
    )
    index = ImportIndex(root)
    index.update(files)
    util = root / "pkg/util.py"
    got = [str(p.relative_to(root)) for p in index.importers([util])]
    # names imported from it, most used first; then the module itself; then through a re-exporting __init__
    assert got == ["pkg/heavy.py", "pkg/light.py", "pkg/__init__.py", "pkg/modular.py", "pkg/via_init.py"]
    # an edit is seen on the next update (a changed mtime or size), and a deleted file is dropped
    (root / "pkg/unrelated.py").write_text("from pkg.util import other\n")
    os.utime(root / "pkg/unrelated.py", ns=(1, 1))
    (root / "pkg/heavy.py").unlink()
    index.update({p: st for p in root.rglob("*.py") if (st := file_stat(p)) is not None})
    got = [str(p.relative_to(root)) for p in index.importers([util])]
    assert "pkg/unrelated.py" in got and "pkg/heavy.py" not in got
