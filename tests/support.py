"""Helpers shared by every family's tests: `from support import require_binary`."""

from __future__ import annotations

import os
import shutil

import pytest
from tether.testing import assert_no_new_children, children  # noqa: F401 - re-exported for the tests

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require_binary(name: str, *candidates: str) -> str:
    """The path of a binary a test needs: skipped locally when absent, a failure in CI (which installs it)."""
    for candidate in (name, *candidates):
        found = shutil.which(candidate) or (
            candidate if os.path.isabs(candidate) and os.access(candidate, os.X_OK) else None
        )
        if found:
            return found
    message = f"{name} is not installed (.ci/run installs it)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


class Confined:
    """A world to test the sandbox in: a fake HOME with a fake key, a listener on the host's loopback,
    a secret-looking variable, and a git root with a pyproject.toml (see the `confined` fixture), for one
    sandbox backend: `options` are the run options that open a run sandboxed on it."""

    def __init__(self, tmp_path, monkeypatch, backend: str = "bwrap") -> None:
        import socket
        import subprocess
        import threading

        from tether import sandbox

        self.backend = backend
        sandbox.bwrap_problem.cache_clear()
        sandbox.landlock_probe.cache_clear()
        if backend == "bwrap":
            require_binary("bwrap")
        else:
            _, why = sandbox.landlock_probe()
            if why is not None:
                (pytest.fail if IN_CI else pytest.skip)(f"Landlock cannot confine here: {why}")
        self.home = tmp_path / "home"
        (self.home / ".ssh").mkdir(parents=True)
        self.key = self.home / ".ssh" / "id_ed25519"
        self.key.write_text("-----BEGIN OPENSSH PRIVATE KEY----- fake\n")
        (self.home / ".gitconfig").write_text("[user]\n\tname = readable\n")
        monkeypatch.setenv("HOME", str(self.home))
        monkeypatch.setenv("FAKE_SERVICE_TOKEN", "s3cret")
        self.root = tmp_path / "root"
        self.root.mkdir()
        (self.root / "pyproject.toml").write_text("[project]\nname = 'confined'\nversion = '0'\n")
        subprocess.run(["git", "init", "-q", str(self.root)], check=True, timeout=30)
        self.outside = tmp_path / "outside.txt"  # a host path outside the root
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0

        def accept() -> None:
            while True:
                try:
                    conn, _ = self.listener.accept()
                except OSError:
                    return
                self.accepted += 1
                conn.close()

        threading.Thread(target=accept, daemon=True).start()

    def options(self, **more) -> dict:
        """Run options for a sandboxed run on this world's backend, with ``more``."""
        return {"sandbox": True, "sandbox_backend": self.backend, **more}

    def by_backend(self, bwrap, landlock):
        """What a check expects on this backend: Landlock cannot do all that bubblewrap does (a private
        /tmp, read-only .git hooks inside a writable root, a hidden file that looks absent)."""
        return bwrap if self.backend == "bwrap" else landlock

    def close(self) -> None:
        self.listener.close()


def build_wheel(out, version: str):
    """A tiny pure-Python wheel (tinypkg) written by hand (correct RECORD), so no build backend or network is needed."""
    import base64
    import hashlib
    import zipfile

    name = "tinypkg"
    dist_info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n".encode(),
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tether-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist_info}/top_level.txt": f"{name}\n".encode(),
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return wheel


def write_tree(root, files: dict[str, str]) -> None:
    """Write each ``files`` entry (a path relative to ``root``: its text), making the folders it needs."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


async def edit(run, path: str, old: str, new: str):
    """An `edit` call that must succeed; its result (with the write's diagnostics) is returned."""
    r = await run.call("edit", {"path": path, "old_string": old, "new_string": new})
    assert not r.is_error, r.plain
    return r


def introduced(r) -> list[tuple[str, int, str | None]]:
    """(file, line, code) of each diagnostic a write's result says it introduced."""
    return [(d["file"], d["line"], d["code"]) for d in (r.data or {}).get("diagnostics", [])]
