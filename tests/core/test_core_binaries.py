"""One place that finds a project's own interpreter and tools (debug, eval and lsp use it)."""

from __future__ import annotations

from tether.binaries import find_project_binary, project_python, project_pythons


def executable(path, mode=0o755):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(mode)
    return path


def test_project_python_prefers_dot_venv_then_venv_and_skips_what_cannot_run(tmp_path):
    assert project_python(tmp_path) is None and project_pythons(tmp_path) == []
    executable(tmp_path / ".venv" / "bin" / "python", 0o644)  # not executable: not an interpreter
    only3 = executable(tmp_path / "venv" / "bin" / "python3")
    assert project_pythons(tmp_path) == [only3] and project_python(tmp_path) == str(only3)
    first = executable(tmp_path / ".venv" / "bin" / "python3")
    assert project_pythons(tmp_path) == [first, only3]


def test_find_project_binary_looks_in_the_venvs_then_node_modules(tmp_path):
    assert find_project_binary(tmp_path, "tsserver") is None
    node = executable(tmp_path / "node_modules" / ".bin" / "tsserver")
    assert find_project_binary(tmp_path, "tsserver") == str(node)
    venv = executable(tmp_path / ".venv" / "bin" / "tsserver")
    assert find_project_binary(tmp_path, "tsserver") == str(venv)
    (tmp_path / ".venv" / "bin" / "dir").mkdir()
    assert find_project_binary(tmp_path, "dir") is None
