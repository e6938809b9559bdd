"""An untrusted root (the default on plan and readonly surfaces) never runs the checkout's own code."""

from __future__ import annotations

import pytest
import tether

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


@pytest.fixture
def checkout(tmp_path):
    """A TypeScript checkout whose own language server would leave a mark."""
    root = tmp_path / "checkout"
    marks = tmp_path / "marks"
    marks.mkdir()
    (root / "node_modules" / ".bin").mkdir(parents=True)
    fake = root / "node_modules" / ".bin" / "typescript-language-server"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> '{marks / 'tsls'}'\nexit 0\n")
    fake.chmod(0o755)
    (root / "tsconfig.json").write_text("{}\n")
    (root / "a.ts").write_text("export const x: number = 1;\n")
    return root, marks


@pytest.fixture
def crate(tmp_path):
    """A Rust checkout whose build script would leave a mark."""
    root = tmp_path / "crate"
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    root.mkdir()
    (root / "Cargo.toml").write_text("[package]\nname = 'c'\nversion = '0.1.0'\nedition = '2021'\n")
    (root / "build.rs").write_text(f'fn main() {{ std::fs::write("{marks / "build"}", "ran").unwrap(); }}\n')
    (root / "src").mkdir()
    (root / "src" / "main.rs").write_text("fn main() {}\n")
    return root, marks


@pytest.mark.parametrize("surface, options", [("plan", {}), ("readonly", {}), ("full", {"trust": False})])
async def test_an_untrusted_root_runs_none_of_its_own_binaries_and_says_why(checkout, surface, options):
    root, marks = checkout
    async with tether.open_run(root, surface=surface, options=options) as run:
        assert not run.trusted
        status = await run.call("lsp", {"action": "status"})
        hover = await run.call("lsp", {"action": "hover", "file": "a.ts", "line": 1, "symbol": "x"})
    assert not (marks / "tsls").exists(), "the checkout's typescript-language-server was run"
    (ts,) = [s for s in status.data["servers"] if s["id"] == "typescript-language-server"]
    assert (
        "the project's own node_modules/.bin/typescript-language-server is not run: this run does not trust "
        "its root (run option trust; tether --trust)" in (ts["note"] or ts["reason"])
    )
    assert ts["binary"] is None or "node_modules" not in ts["binary"]
    assert "node_modules" not in hover.plain or "is not run" in hover.plain


async def test_an_untrusted_root_runs_no_checker_that_runs_its_code(crate):
    root, marks = crate
    async with tether.open_run(root, surface="plan") as run:
        project = await run.call("lsp", {"action": "diagnostics", "file": "*"})
    # cargo check would run build.rs: it is passed over, saying why, whether or not cargo is installed
    assert not (marks / "build").exists()
    assert project.is_error, project.plain
    assert (
        "rust-analyzer: `cargo` runs the project's own code (build scripts), and this run does not trust its "
        "root (run option trust; tether --trust)"
    ) in project.plain


async def test_a_trusted_root_uses_the_projects_own_binary(checkout):
    root, marks = checkout
    async with tether.open_run(root, surface="plan", options={"trust": True}) as run:
        status = await run.call("lsp", {"action": "status"})
    (ts,) = [s for s in status.data["servers"] if s["id"] == "typescript-language-server"]
    assert ts["binary"] == str(root / "node_modules" / ".bin" / "typescript-language-server")
    assert ts["note"] is None
    assert (marks / "tsls").read_text().strip() == "--version"  # the version probe ran the project's binary
