"""A 2 GiB file (sparse: no disk is used) is refused from its size, before a byte of it is read: `lsp`,
`lsp_rename` and `lsp_fix` answer one line naming the limit, a rename whose edits reach it writes nothing, and
the process reads none of it (its peak memory does not grow by the file)."""

from __future__ import annotations

import resource

import pytest
import tether
from lsprotocol import types as lsp
from tether.testing import assert_model_error
from tether.tools import ToolError
from tether_lsp.edits import plan_workspace_edit

HUGE = 2 * 1024**3


def sparse(path, size: int = HUGE):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(b"x = 1\n")
        fh.truncate(size)
    return path


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def test_lsp_and_lsp_rename_refuse_a_2_gib_file_from_its_size(py_root):
    sparse(py_root / "data" / "huge.py")
    before = peak_mib()
    async with tether.open_run(py_root) as run:
        for args in (
            {"action": "symbols", "file": "data/huge.py"},
            {"action": "hover", "file": "data/huge.py", "line": 1, "symbol": "x"},
            {"action": "definition", "file": "data/huge.py", "line": 1, "symbol": "x"},
            {"action": "diagnostics", "file": "data/huge.py"},
        ):
            r = await run.call("lsp", args)
            assert_model_error(r, "'data/huge.py' is 2048.0 MiB, more than the 16 MiB")
            assert r.data["error"] == "too_large", r.plain
        r = await run.call("lsp_rename", {"file": "data/huge.py", "line": 1, "symbol": "x", "new_name": "y"})
        assert_model_error(r, "'data/huge.py' is 2048.0 MiB, more than the 16 MiB")
        r = await run.call("lsp_fix", {"file": "data/huge.py", "line": 1, "symbol": "x", "number": 1})
        assert_model_error(r, "'data/huge.py' is 2048.0 MiB, more than the 16 MiB")
    assert peak_mib() - before < 512, f"peak memory grew by {peak_mib() - before:.0f} MiB"
    assert (py_root / "data" / "huge.py").stat().st_size == HUGE


def test_a_rename_whose_edits_reach_a_2_gib_file_writes_nothing(tmp_path):
    root = tmp_path / "r"
    (root / "a.py").parent.mkdir(parents=True)
    (root / "a.py").write_text("x = 1\n")
    huge = sparse(root / "huge.py")
    run = tether.Run(root, load_entry_points=False)

    def change(uri: str) -> lsp.TextEdit:
        where = lsp.Range(start=lsp.Position(line=0, character=0), end=lsp.Position(line=0, character=1))
        return lsp.TextEdit(range=where, new_text="y")

    edit = lsp.WorkspaceEdit(changes={(root / "a.py").as_uri(): [change("a")], huge.as_uri(): [change("h")]})
    before = peak_mib()
    with pytest.raises(ToolError, match=r"'huge.py' is 2048.0 MiB.*nothing was written"):
        plan_workspace_edit(edit, run, "utf-16")
    assert peak_mib() - before < 512
    assert (root / "a.py").read_text() == "x = 1\n"
