"""Adapter availability (root marker AND binary), definitions from third parties, and registration."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import tether
from tether import hookimpl
from tether.testing import assert_light_entry_point
from tether_debug import hookspecs
from tether_debug.adapters import BUILTIN, AdapterDef, Build, LaunchRequest, Located
from tether_debug.build import build_command

BUILTIN_BY_ID = {a.id: a for a in BUILTIN}


def _fake_binary(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\nexit 1\n")
    path.chmod(0o755)
    return path


async def test_adapters_action_names_marker_and_binary(debug):
    result = await debug.ok(action="adapters")
    rows = {r["id"]: r for r in result.data["adapters"]}
    assert set(rows) >= {"dart", "debugpy", "lldb", "delve"}
    assert rows["debugpy"]["usable"] is True and "pyproject.toml" in rows["debugpy"]["reason"]
    assert rows["delve"]["usable"] is False and "go.mod" in rows["delve"]["reason"]
    assert rows["dart"]["usable"] is False and "pubspec.yaml" in rows["dart"]["reason"]


def test_dart_needs_both_marker_and_binary(tmp_path, monkeypatch):
    dart = BUILTIN_BY_ID["dart"]
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    no_marker_no_binary = dart.availability(tmp_path)
    assert not no_marker_no_binary.usable
    assert "pubspec.yaml" in no_marker_no_binary.reason and "binary not found" in no_marker_no_binary.reason
    (tmp_path / "pubspec.yaml").write_text("name: demo\n")
    marker_only = dart.availability(tmp_path)
    assert not marker_only.usable and "binary not found (tried dart)" in marker_only.reason
    assert "marker pubspec.yaml is present" in marker_only.reason
    binary = _fake_binary(tmp_path / "bin", "dart")
    both = dart.availability(tmp_path)
    assert both.usable and both.located is not None
    assert both.located.argv == (str(binary), "debug_adapter")
    (tmp_path / "pubspec.yaml").unlink()
    binary_only = dart.availability(tmp_path)
    assert not binary_only.usable and "no root marker" in binary_only.reason


def test_dart_definition_launch_config_and_program_kind(tmp_path):
    dart = BUILTIN_BY_ID["dart"]
    program = tmp_path / "bin" / "main.dart"
    assert dart.handles(program) and not dart.handles(tmp_path / "main.py")
    config = dart.launch_config(LaunchRequest(program, ["--x"], tmp_path, Located(("dart",)), cwd=tmp_path))
    assert config["program"] == str(program) and config["args"] == ["--x"] and config["cwd"] == str(tmp_path)
    assert dart.transport == "stdio" and dart.command == ("dart", "debug_adapter")


def test_lldb_looks_for_the_debian_names(tmp_path, monkeypatch):
    lldb = BUILTIN_BY_ID["lldb"]
    assert lldb.binaries[:3] == ("lldb-dap", "lldb-dap-19", "/usr/lib/llvm-19/bin/lldb-dap")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    (tmp_path / "Cargo.toml").write_text("[package]\nname='x'\n")
    fake = _fake_binary(tmp_path / "bin", "lldb-dap-19")
    found = lldb.availability(tmp_path)
    assert found.usable and found.located is not None
    assert found.located.argv == (str(fake),)  # lldb-dap-19 on PATH, before the llvm dir


def test_delve_is_tcp_and_handles_go_packages(tmp_path):
    delve = BUILTIN_BY_ID["delve"]
    assert delve.transport == "tcp" and delve.command == ("dlv", "dap", "--listen=127.0.0.1:0")
    (tmp_path / "main.go").write_text("package main\n")
    assert delve.handles(tmp_path) and delve.handles(tmp_path / "main.go")

    out = tmp_path / "out"

    make = delve.build
    assert make is not None

    def build(program, **kw) -> Build | None:
        return make(LaunchRequest(program, [], tmp_path, Located(("dlv",)), cwd=tmp_path, **kw), out)

    def built(program, **kw) -> Build:
        made = build(program, **kw)
        assert made is not None
        return made

    # tether builds as delve would, then delve runs the binary (mode exec)
    package = built(tmp_path)
    flags = ("-gcflags", "all=-N -l", "-trimpath=false")  # the sources' full paths, whatever GOFLAGS says
    assert package.argv == ("go", "build", "-o", str(out / tmp_path.name), *flags, ".")
    # the command said in messages is what ran: its argv, the variables added, paths under the root relative
    shown = build_command(package, {"GOFLAGS": "-tags=a b"}, tmp_path)
    argv = "-gcflags 'all=-N -l' -trimpath=false ."
    assert shown == (f"GOFLAGS='-tags=a b' go build -o out/{tmp_path.name} {argv}", True)
    assert build_command(package, {}, tmp_path, os.devnull) == (f"go build -o /dev/null {argv}", True)
    nested = attrs.evolve(package, cwd=tmp_path / "tools")
    assert build_command(nested, {}, tmp_path)[0].startswith(
        f"cd tools && go build -o ../out/{tmp_path.name} "
    )
    # each long value is cut, then the variables as a whole; the argv is kept whole
    long, whole = build_command(package, {"GOFLAGS": "x" * 2000}, tmp_path)
    assert (
        not whole
        and long == f"GOFLAGS={'x' * 80}…[1,920 more characters cut] go build -o out/{tmp_path.name} {argv}"
    )
    many = {f"V{i}": "y" * 80 for i in range(20)}
    long, whole = build_command(nested, many, tmp_path)
    assert not whole and len(long) <= 600
    assert long.startswith("cd tools && V0=") and long.endswith(
        f"more characters of variables cut] go build -o ../out/{tmp_path.name} {argv}"
    )
    assert built(tmp_path, test=True).argv[:3] == ("go", "test", "-c")
    (tmp_path / "main_test.go").write_text("package main\n")
    in_test = built(tmp_path / "main_test.go")  # a test file: its package's tests
    assert in_test.argv[:3] == ("go", "test", "-c") and in_test.output == out / f"{tmp_path.name}.test"
    assert built(tmp_path / "main.go").argv[-1] == "./main.go"
    assert built(tmp_path, env={"GOFLAGS": "-mod=mod"}).env == {"GOFLAGS": "-mod=mod"}
    assert package.untrusted_env == {"GOTOOLCHAIN": "local", "GOPROXY": "off", "GOVCS": "*:off"}
    binary = tmp_path / "prog.test"
    binary.write_bytes(b"\x7fELF" + b"\0" * 100 + b"\xff Go buildinf:")
    assert build(binary) is None  # a binary is run as it is
    assert build(binary, test=True) is None  # a test binary too: not rebuilt as a package
    config = delve.launch_config(
        LaunchRequest(binary, ["-test.v"], tmp_path, Located(("dlv",)), cwd=tmp_path)
    )
    assert (config["mode"], config["program"], config["args"]) == ("exec", str(binary), ["-test.v"])


def test_debugpy_prefers_the_project_venv(tmp_path):
    debugpy = BUILTIN_BY_ID["debugpy"]
    (tmp_path / "requirements.txt").write_text("")
    from_path = debugpy.availability(tmp_path)
    assert from_path.usable and from_path.located is not None
    assert from_path.located.python != str(tmp_path / ".venv" / "bin" / "python")
    venv_python = tmp_path / "venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(sys.executable)
    in_venv = debugpy.availability(tmp_path).located
    assert in_venv is not None and in_venv.python == str(venv_python)
    dot_venv = tmp_path / ".venv" / "bin" / "python"
    dot_venv.parent.mkdir(parents=True)
    dot_venv.symlink_to(sys.executable)
    located = debugpy.availability(tmp_path).located
    assert located is not None and located.python == str(dot_venv)  # .venv first
    assert located.argv[1:] == ("-m", "debugpy.adapter")


async def test_the_debuggee_runs_under_the_project_venv_python(
    pyproject, open_debug, write_files, no_leftover_processes
):
    # a real venv without debugpy in it: the adapter (tether's interpreter) injects debugpy itself
    venv = [sys.executable, "-m", "venv", "--without-pip", str(pyproject / ".venv")]
    await asyncio.to_thread(subprocess.run, venv, check=True, timeout=60)
    write_files(pyproject, {"which.py": "import sys\nprint(sys.prefix)\n"})
    async with open_debug(pyproject) as debug:
        listing = await debug.ok(action="adapters")
        assert "programs run under .venv/bin/python" in listing.plain
        result = await debug.ok(action="launch", program="which.py")
    assert result.data["output"].strip() == str(pyproject / ".venv")


class ThirdParty:
    __name__ = "third_party_adapters"

    @hookimpl
    def tether_debug_adapters(self, run):
        return [
            AdapterDef(
                id="toy",
                command=("toy-dap",),
                markers=("toy.toml",),
                launch_config=lambda request: {"program": str(request.program)},
                handles=lambda p: p.suffix == ".toy",
            )
        ]


async def test_third_party_adapter_definitions(pyproject):
    (pyproject / "toy.toml").write_text("")
    (pyproject / "prog.toy").write_text("run\n")
    async with tether.open_run(pyproject, conversation_id="c", plugins=[ThirdParty()]) as run:
        listing = await run.call("debug", {"action": "adapters"})
        assert listing.data is not None
        toy = next(r for r in listing.data["adapters"] if r["id"] == "toy")
        assert toy["usable"] is False and "toy-dap" in toy["reason"]
        refused = await run.call("debug", {"action": "launch", "program": "prog.toy"})
        assert refused.is_error and "toy adapter cannot start here" in refused.plain


class OwnSupervisor:
    """A harness supplying its own supervisor (e.g. one shared across runs)."""

    __name__ = "own_debug_supervisor"

    def __init__(self):
        from tether_debug.supervisor import DebugSupervisor

        self.supervisor = DebugSupervisor()

    @hookimpl(tryfirst=True)
    def tether_debug_supervisor(self, run):
        return self.supervisor


async def test_registration_needs_a_conversation_and_a_supervisor(tmp_path):
    async with tether.open_run(tmp_path) as run:
        assert "debug" not in [t.name for t in run.tools()]
        assert any(u.family == "debug" and "conversation" in u.reason for u in run.unavailable)
    own = OwnSupervisor()
    async with tether.open_run(tmp_path, conversation_id="c", plugins=[own]) as run:
        assert run.resource(hookspecs.tether_debug_supervisor) is own.supervisor
        (tmp_path / "x.py").write_text("x = 1\n")
        await run.call("debug", {"action": "breakpoints", "file": "x.py", "lines": [1]})
        assert own.supervisor.plans["c"].lines == {str((tmp_path / "x.py").resolve()): [{"line": 1}]}
    async with tether.open_run(tmp_path, conversation_id="c") as run:
        (tool,) = [t for t in run.tools() if t.name == "debug"]
        assert tool.tier.value == "exec" and tool.parallel_safe is False
        assert "action" in tool.input_schema["required"]
    async with tether.open_run(tmp_path, conversation_id="c", surface="readonly") as run:
        assert "debug" not in [t.name for t in run.tools()]


HEAVY = ("debugpy", "tether_debug.session", "tether_debug.dap")


def test_entry_point_imports_nothing_heavy(tmp_path):
    assert_light_entry_point(
        "tether_debug.plugin", forbidden=(*HEAVY, "tether_debug.tools", "tether_debug.args", "psutil")
    )
    # registering the tool creates the supervisor: still nothing of a session before launch
    assert_light_entry_point(
        "tether_debug.plugin",
        forbidden=HEAVY,
        then=(
            "import tether\n"
            f"with tether.open_run_sync({str(tmp_path)!r}, conversation_id='c') as run:\n"
            "    assert 'debug' in [t.name for t in run.tools()]"
        ),
    )


class SecondPython:
    """A third party's adapter for .py files, registered after the built-in debugpy (the real debugpy adapter)."""

    __name__ = "second_python_adapter"

    @hookimpl
    def tether_debug_adapters(self, run):
        def launch_config(request):
            return {
                "type": "python",
                "program": str(request.program),
                "args": request.args,
                "cwd": str(request.cwd),
                "env": request.env,
                "python": [sys.executable],
                "console": "internalConsole",
                "subProcess": False,
            }

        return [
            AdapterDef(
                id="altpy",
                command=(sys.executable, "-m", "debugpy.adapter"),
                markers=("alt.toml",),
                launch_config=launch_config,
                handles=lambda p: p.suffix == ".py",
                takes="a .py file, the other way",
            )
        ]


async def test_the_first_usable_adapter_is_picked_and_gets_env_and_cwd(tmp_path, no_leftover_processes):
    (tmp_path / "alt.toml").write_text(
        ""
    )  # altpy's marker; none of debugpy's: the built-in is not usable here
    (tmp_path / "sub").mkdir()
    (tmp_path / "show.py").write_text("import os\nprint(os.getcwd(), os.environ['TETHER_DEMO'])\n")
    async with tether.open_run(tmp_path, conversation_id="c", plugins=[SecondPython()]) as run:
        ended = await run.call(
            "debug", {"action": "launch", "program": "show.py", "cwd": "sub", "env": {"TETHER_DEMO": "yes"}}
        )
        assert not ended.is_error and ended.data is not None, ended.plain
        assert ended.data["output"].split() == [str(tmp_path / "sub"), "yes"]
        bad_env = await run.call("debug", {"action": "launch", "program": "show.py", "env": {"A=B": "x"}})
        assert bad_env.is_error and "env: each variable needs a name without '='" in bad_env.plain
        (tmp_path / "notes.txt").write_text("hi\n")
        nobody = await run.call("debug", {"action": "launch", "program": "notes.txt"})
        assert nobody.is_error and "no debug adapter handles 'notes.txt'" in nobody.plain
        assert (
            "altpy (a .py file, the other way)" in nobody.plain
            and "delve (a Go package directory" in nobody.plain
        )
        assert nobody.data is not None
        assert nobody.data["adapters"] == ["dart", "debugpy", "lldb", "delve", "altpy"]


def test_marker_lists_agree_with_the_lsp_family(tmp_path):
    servers = pytest.importorskip("tether_lsp.servers")
    adapters = BUILTIN_BY_ID
    by_server = {s.id: set(s.root_markers) for s in servers.BUILTIN_SERVERS}
    assert set(adapters["debugpy"].markers) == by_server["basedpyright"]
    assert set(adapters["lldb"].markers) == by_server["clangd"] | by_server["rust-analyzer"]
    assert set(adapters["delve"].markers) == by_server["gopls"]
    for marker in ("setup.cfg", "pyrightconfig.json"):
        root = tmp_path / marker.replace(".", "_")
        root.mkdir()
        (root / marker).write_text("")
        assert adapters["debugpy"].availability(root).usable, marker
    for marker in ("Makefile", "compile_commands.json"):
        root = tmp_path / marker.replace(".", "_")
        root.mkdir()
        (root / marker).write_text("")
        reason = adapters["lldb"].availability(root).reason
        assert "no root marker" not in reason, reason


def test_a_go_binary_goes_to_delve_and_a_script_by_its_shebang_to_debugpy(tmp_path):
    adapters = BUILTIN_BY_ID
    go_binary = tmp_path / "prog.test"
    go_binary.write_bytes(b"\x7fELF" + b"\0" * 5000 + b"\xff Go buildinf:" + b"\0" * 100)
    c_binary = tmp_path / "prog"
    c_binary.write_bytes(b"\x7fELF" + b"\0" * 5000)
    assert adapters["delve"].handles(go_binary) and not adapters["lldb"].handles(go_binary)
    assert adapters["lldb"].handles(c_binary) and not adapters["delve"].handles(c_binary)
    script = tmp_path / "pytest"
    script.write_text("#!/usr/bin/env python3\nprint(1)\n")
    shell = tmp_path / "run"
    shell.write_text("#!/bin/sh\necho 1\n")
    assert adapters["debugpy"].handles(script) and not adapters["debugpy"].handles(shell)


class PythonWithoutModules:
    """A third party's debugpy definition that launches programs only: no adapter takes module= then."""

    __name__ = "python_without_modules"

    @hookimpl
    def tether_debug_adapters(self, run):
        return [
            AdapterDef(
                id="debugpy",
                command=(sys.executable, "-m", "debugpy.adapter"),
                markers=("pyproject.toml",),
                launch_config=lambda request: {"program": str(request.program)},
                handles=lambda p: p.suffix == ".py",
                takes="a .py file",
            )
        ]


async def test_a_module_launch_no_adapter_takes_is_refused_with_what_they_take(pyproject):
    async with tether.open_run(pyproject, conversation_id="c", plugins=[PythonWithoutModules()]) as run:
        refused = await run.call("debug", {"action": "launch", "module": "pytest"})
        assert refused.is_error and refused.data is not None
        assert "no debug adapter handles a module launch (module=)" in refused.plain
        assert "debugpy (a .py file)" in refused.plain and "adapter='<id>'" in refused.plain
        assert refused.data["error"] == "no_adapter" and "debugpy" in refused.data["adapters"]
        assert run.resource(hookspecs.tether_debug_supervisor).sessions == {}


async def test_the_launch_bound_says_the_time_spent_between_its_phases():
    """What runs outside a phase (the build folder, a stdio adapter's process) counts against the
    bound: the message says it, so the parts add up to the bound."""
    import asyncio
    import re

    from tether_debug.session import LaunchBound, SessionError

    bound = LaunchBound(1.0)
    async with bound.phase("the build"):
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.4)  # between the phases
    with pytest.raises(SessionError) as said:
        async with bound.phase("the launch's configuration"):
            await asyncio.sleep(30)
    took = re.search(
        r"\(time taken: the build ([\d.]+) s, the launch's configuration ([\d.]+) s, other ([\d.]+) s\)",
        str(said.value),
    )
    assert took, said.value
    build, configure, other = map(float, took.groups())
    assert other >= 0.4 and abs(build + configure + other - 1.0) <= 0.15, said.value


async def test_adapters_on_a_typescript_project_say_none_debugs_it_and_what_would(tmp_path):
    import shutil

    import real_projects
    from support import IN_CI

    npm = shutil.which("npm")
    if npm is None:
        (pytest.fail if IN_CI else pytest.skip)("npm is not installed (.ci/run installs it)")
    root = real_projects.rxjs_copy(real_projects.rxjs_pristine(npm), tmp_path / "rxjs")
    async with tether.open_run(root, conversation_id="c") as run:
        r = await run.call("debug", {"action": "adapters"})
    assert not r.is_error, r.plain
    assert r.data["no_adapter"] == ["JavaScript/TypeScript"], r.plain
    last = r.plain.splitlines()[-1]
    assert last.startswith("JavaScript/TypeScript: no debug adapter for it is installed or available"), last
    assert "vscode-js-debug" in last and "tether_debug_adapters" in last, last
    # a Python project says nothing of JavaScript
    (tmp_path / "py").mkdir()
    (tmp_path / "py" / "pyproject.toml").write_text("[project]\nname = 'demo'\nversion = '0'\n")
    async with tether.open_run(tmp_path / "py", conversation_id="c") as run:
        r = await run.call("debug", {"action": "adapters"})
    assert "no_adapter" not in r.data and "JavaScript" not in r.plain, r.plain
