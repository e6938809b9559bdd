"""eval inside the built-in sandbox (real bubblewrap, real Landlock): what a cell, its shell idioms and %pip can and
cannot do, on each backend."""

from __future__ import annotations

import os
import site
import subprocess
import sys

import pytest
import tether
import tether_eval.plugin as eval_plugin
from support import build_wheel
from tether.testing import assert_model_error
from tether_eval.hookspecs import tether_eval_kernels

D = "probe what the sandbox lets a cell do"
pytestmark = pytest.mark.usefixtures("no_leftover_processes")


def probe(world) -> str:
    return (
        "import os, socket\n"
        "def attempt(f):\n"
        "    try:\n"
        "        return f()\n"
        "    except Exception as e:\n"
        "        return type(e).__name__\n"
        f"print('key', attempt(lambda: open({str(world.key)!r}).read()))\n"
        f"print('gitconfig', attempt(lambda: 'readable' in open({str(world.home / '.gitconfig')!r}).read()))\n"
        f"print('outside', attempt(lambda: open({str(world.outside)!r}, 'w').write('x')))\n"
        f"print('home', attempt(lambda: open({str(world.home / 'new.txt')!r}, 'w').write('x')))\n"
        "print('inside', attempt(lambda: open('made-inside.txt', 'w').write('ok')))\n"
        "print('hook', attempt(lambda: open('.git/hooks/pre-commit', 'w').write('#!/bin/sh\\necho owned\\n')))\n"
        "print('gitcfg', attempt(lambda: open('.git/config', 'a').write('[x]\\n')))\n"
        f"print('connect', attempt(lambda: socket.create_connection(('127.0.0.1', {world.port}), timeout=5)))\n"
        "print('secret', os.environ.get('FAKE_SERVICE_TOKEN'))\n"
    )


async def test_a_sandboxed_cell_and_its_shell_cannot_reach_what_the_policy_denies(confined):
    async with tether.open_run(
        confined.root, plugins=[eval_plugin], load_entry_points=False, options=confined.options()
    ) as run:
        r = await run.call("eval", {"code": probe(confined), "description": D})
        assert not r.is_error, r.plain
        name = confined.by_backend("bubblewrap", "landlock")
        assert f"on the envelope '{name}'" in r.plain and "root read-write" in r.plain, r.plain
        out = dict(
            line.split(" ", 1)
            for line in r.plain.splitlines()
            if line.split(" ")[0]
            in {"key", "gitconfig", "outside", "home", "inside", "hook", "gitcfg", "connect", "secret"}
        )
        # outside.txt is under the host's /tmp: bubblewrap's /tmp is private, so the write lands there, not on
        # the host; Landlock has no private /tmp (the host's is read-only inside) and cannot make .git's hooks
        # and config read-only inside the writable root (its policy line says so)
        denied = confined.by_backend("FileNotFoundError", "PermissionError")
        read_only = confined.by_backend("OSError", "PermissionError")
        assert out == {
            "key": denied,
            "gitconfig": "True",
            "outside": confined.by_backend("1", "PermissionError"),
            "home": read_only,
            "inside": "2",
            "hook": confined.by_backend("OSError", "21"),
            "gitcfg": confined.by_backend("OSError", "4"),
            "connect": confined.by_backend("ConnectionRefusedError", "PermissionError"),
            "secret": "None",
        }, r.plain
        shell = await run.call(
            "eval",
            {
                "code": f"!cat {confined.key}; echo token=$FAKE_SERVICE_TOKEN; touch {confined.outside}",
                "description": D,
            },
        )
        assert "BEGIN OPENSSH" not in shell.plain and "s3cret" not in shell.plain and "token=" in shell.plain
        assert confined.by_backend("No such file or directory", "Permission denied") in shell.plain
        assert (
            confined.by_backend("[sandbox: credentials and histories", "[sandbox (Landlock):") in shell.plain
        )
        bash = await run.call(
            "eval",
            {"code": f"%%bash\necho hi > {confined.home}/x.txt\necho made > in-root.txt", "description": D},
        )
        assert confined.by_backend("Read-only file system", "Permission denied") in bash.plain
        assert (
            confined.by_backend("[sandbox: only the root is writable", "[sandbox (Landlock):") in bash.plain
        )
        js = await run.call(
            "eval",
            {
                "code": (
                    f"try {{ await Deno.readTextFile({str(confined.key)!r}); 'read' }} catch (e) {{ e.name }}"
                ),
                "language": "javascript",
                "description": D,
            },
        )
        assert confined.by_backend("NotFound", "PermissionDenied") in js.plain, js.plain
        js_net = await run.call(
            "eval",
            {
                "code": (
                    f"try {{ await Deno.connect({{hostname: '127.0.0.1', port: {confined.port}}}); 'connected' }} "
                    "catch (e) { e.name }"
                ),
                "language": "javascript",
                "description": D,
            },
        )
        assert confined.by_backend("ConnectionRefused", "PermissionDenied") in js_net.plain, js_net.plain
    assert confined.accepted == 0
    assert (
        not confined.outside.exists()
        and not (confined.home / "new.txt").exists()
        and not (confined.home / "x.txt").exists()
    )
    assert (confined.root / "made-inside.txt").read_text() == "ok" and (
        confined.root / "in-root.txt"
    ).exists()
    assert (confined.root / ".git" / "hooks" / "pre-commit").exists() == confined.by_backend(False, True)


# the escapes run on both backends (above); this one on bubblewrap only, for the CI budget
@pytest.mark.parametrize("confined", ["bwrap"], indirect=True)
async def test_tool_calls_from_a_sandboxed_cell_still_write_through_the_run_with_diagnostics(
    confined, fake_tools
):
    async with tether.open_run(
        confined.root, plugins=[eval_plugin, fake_tools], load_entry_points=False, options=confined.options()
    ) as run:
        r = await run.call(
            "eval",
            {
                "code": (
                    "res = tool_result('write_file', {'path': 'pkg/mod.py', 'content': 'x = 1  # TODO\\n'})\n"
                    "print(res['text'])\n[d['message'] for d in res['data']['diagnostics']]"
                ),
                "description": D,
            },
        )
        assert not r.is_error, r.plain
        assert "wrote pkg/mod.py" in r.plain and "TODO left in the code" in r.plain
        js = await run.call(
            "eval",
            {
                "code": (
                    "const res = toolResult('write_file', {path: 'web/app.js', content: '// TODO\\n'});\n"
                    "res.data.diagnostics.length + ' ' + res.text"
                ),
                "language": "javascript",
                "description": D,
            },
        )
        assert "1 wrote web/app.js" in js.plain, js.plain
        # the `tools` object, typed stubs and gathered calls, in the same sandboxed kernels: over the
        # kernel's own channel, while the host's loopback stays out of reach of the cell
        r = await run.call(
            "eval",
            {
                "code": (
                    "import asyncio, contextlib, io, socket\n"
                    "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
                    "    tools.help()\n"
                    "print('listed', sorted(line.split()[0] for line in out.getvalue().splitlines()[:-1]))\n"
                    "w = tools.write_file(path='pkg/typed.py', content='y = 2  # TODO\\n')\n"
                    "print('typed', str(w).splitlines()[0], [d['message'] for d in w.data['diagnostics']])\n"
                    "async def both():\n"
                    "    return await asyncio.gather(tools.aio.echo(text='a'), tools.aio.echo(text='b'))\n"
                    "print('gathered', [str(x) for x in await both()])\n"
                    "try:\n"
                    f"    socket.create_connection(('127.0.0.1', {confined.port}), timeout=5)\n"
                    "    print('loopback reached')\n"
                    "except OSError as e:\n"
                    "    print('loopback', type(e).__name__)\n"
                ),
                "description": D,
            },
        )
        assert not r.is_error, r.plain
        assert "listed ['danger', 'echo', 'fail', 'slow', 'write_file']" in r.plain, r.plain
        assert "typed wrote pkg/typed.py ['TODO left in the code']" in r.plain, r.plain
        assert "gathered ['echo: a', 'echo: b']" in r.plain, r.plain
        assert "loopback ConnectionRefusedError" in r.plain, r.plain
        js = await run.call(
            "eval",
            {
                "code": (
                    "const [a, b] = await Promise.all([tools.echo({text: 'x'}), tools.echo({text: 'y'})]);\n"
                    "const w = await tools.write_file({path: 'web/typed.js', content: '// TODO typed\\n'});\n"
                    "[String(a), String(b), String(w).split('\\n')[0], w.data.diagnostics.length].join(' | ')"
                ),
                "language": "javascript",
                "description": D,
            },
        )
        assert "echo: x | echo: y | wrote web/typed.js | 1" in js.plain, js.plain
    assert (confined.root / "pkg" / "mod.py").read_text() == "x = 1  # TODO\n"
    assert (confined.root / "pkg" / "typed.py").read_text() == "y = 2  # TODO\n"
    assert (confined.root / "web" / "typed.js").read_text() == "// TODO typed\n"


# the escapes run on both backends (above); this one on bubblewrap only, for the CI budget
@pytest.mark.parametrize("confined", ["bwrap"], indirect=True)
async def test_a_sandboxed_cell_past_its_budget_is_interrupted_and_the_kernel_keeps_its_state(confined):
    # a SIGINT to the kernel's process group would kill bubblewrap, and the kernel with it
    async with tether.open_run(
        confined.root,
        plugins=[eval_plugin],
        load_entry_points=False,
        options=confined.options(eval_timeout=2),
    ) as run:
        r = await run.call("eval", {"code": "kept = 41\nimport time\ntime.sleep(300)", "description": D})
        assert r.is_error and r.data["status"] == "interrupted", r.plain
        assert "KeyboardInterrupt" in r.plain and "the kernel and its state survive" in r.plain
        after = await run.call("eval", {"code": "kept + 1", "description": D})
        assert not after.is_error and after.plain.strip().endswith("42"), after.plain
        assert after.data["kernel"]["started"] is False


# the escapes run on both backends (above); this one on bubblewrap only, for the CI budget
@pytest.mark.parametrize("confined", ["bwrap"], indirect=True)
async def test_pip_installs_a_local_wheel_into_the_projects_environment_inside_the_sandbox(confined):
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(confined.root / ".venv")], check=True, timeout=60
    )
    (site_dir,) = (confined.root / ".venv").glob("lib/python3*/site-packages")
    (site_dir / "tether_parent.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    wheel = build_wheel(confined.root / "wheels", "0.1.0")
    async with tether.open_run(
        confined.root, plugins=[eval_plugin], load_entry_points=False, options=confined.options()
    ) as run:
        r = await run.call("eval", {"code": f"%pip install {wheel}", "description": D})
        assert not r.is_error, r.plain
        r = await run.call("eval", {"code": "import tinypkg\ntinypkg.VERSION", "description": D})
        assert "'0.1.0'" in r.plain, r.plain
    assert list((confined.root / ".venv").glob("lib/python3*/site-packages/tinypkg/__init__.py"))


APPARMOR = (
    "bwrap: setting up uid map: Permission denied"  # what Ubuntu 24.04's userns restriction makes it say
)


def stub_bwrap(tmp_path, monkeypatch) -> None:
    """A `bwrap` first on PATH that fails the way it does under AppArmor's user namespace restriction."""
    from tether import sandbox

    stub = tmp_path / "stub-bin"
    stub.mkdir()
    (stub / "bwrap").write_text(f"#!/bin/sh\necho '{APPARMOR}' >&2\nexit 1\n")
    (stub / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{stub}{os.pathsep}{os.environ['PATH']}")
    sandbox.bwrap_problem.cache_clear()


@pytest.mark.parametrize("confined", ["landlock"], indirect=True)
async def test_where_bubblewrap_cannot_create_namespaces_the_sandbox_falls_back_to_landlock_and_says_so(
    confined, monkeypatch, tmp_path
):
    from tether import sandbox

    stub_bwrap(tmp_path, monkeypatch)
    try:
        async with tether.open_run(
            confined.root, plugins=[eval_plugin], load_entry_points=False, options={"sandbox": True}
        ) as run:
            line = run.tool_listing()["sandbox"]
            assert line.startswith("exec tools run sandboxed in landlock (bubblewrap could not start"), line
            assert APPARMOR in line and "Landlock ABI" in line and "no pid namespace" in line, line
            r = await run.call("eval", {"code": f"open({str(confined.key)!r}).read()", "description": D})
            assert "on the envelope 'landlock'" in r.plain and "PermissionError" in r.plain, r.plain
            assert "BEGIN OPENSSH" not in r.plain
    finally:
        sandbox.bwrap_problem.cache_clear()


@pytest.mark.parametrize("confined", ["bwrap"], indirect=True)
async def test_where_neither_backend_can_arm_the_sandboxed_eval_refuses_and_runs_nothing(
    confined, monkeypatch, tmp_path
):
    from tether import sandbox

    stub_bwrap(tmp_path, monkeypatch)
    # a kernel without Landlock cannot be had here (this one has it): its probe's answer stands in
    monkeypatch.setattr(sandbox, "landlock_probe", lambda: (0, "the kernel's Landlock ABI is absent"))
    try:
        async with tether.open_run(
            confined.root, plugins=[eval_plugin], load_entry_points=False, options={"sandbox": True}
        ) as run:
            assert run.tool_listing()["sandbox"].startswith("exec tools refuse to run: ")
            r = await run.call("eval", {"code": "open('ran.txt', 'w').write('x')", "description": D})
    finally:
        sandbox.bwrap_problem.cache_clear()
    assert r.is_error and r.data["error"] == "sandbox_unavailable"
    assert_model_error(r, APPARMOR, "Landlock ABI is absent", "Nothing was run")
    assert "\n" not in r.plain.strip()
    assert not (confined.root / "ran.txt").exists()


@pytest.mark.parametrize("confined", ["bwrap"], indirect=True)
async def test_without_bubblewrap_the_sandboxed_eval_on_bwrap_refuses_and_runs_nothing(
    confined, monkeypatch, tmp_path
):
    from tether import sandbox

    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    sandbox.bwrap_problem.cache_clear()
    try:
        async with tether.open_run(
            confined.root, plugins=[eval_plugin], load_entry_points=False, options=confined.options()
        ) as run:
            assert run.tool_listing()["sandbox"].startswith("exec tools refuse to run: ")
            r = await run.call("eval", {"code": "open('ran.txt', 'w').write('x')", "description": D})
            assert r.is_error and r.data["error"] == "sandbox_unavailable"
            assert_model_error(r, "bubblewrap (bwrap) is not on PATH", "apt-get install bubblewrap")
            assert run.resource(tether_eval_kernels).live("python") is None
    finally:
        sandbox.bwrap_problem.cache_clear()
    assert not (confined.root / "ran.txt").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"sandbox": True, "sandbox_netwrk": "on"},
            "unknown run option 'sandbox_netwrk' (did you mean 'sandbox_network'",
        ),
        ({"sandbox": True, "sandbox_deny": ["relative/dir"]}, "'relative/dir' is not an absolute path"),
        ({"sandbox": True, "sandbox_network": "maybe"}, "sandbox_network"),
    ],
)
def test_bad_sandbox_options_are_one_line_at_open(tmp_path, options, message):
    from tether.options import OptionsError

    with (
        pytest.raises(OptionsError) as caught,
        tether.open_run_sync(tmp_path, plugins=[eval_plugin], load_entry_points=False, options=options),
    ):
        pass
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_project_cannot_loosen_its_own_sandbox(tmp_path):
    from tether.options import OptionsError

    (tmp_path / "pyproject.toml").write_text('[tool.tether]\nsandbox_network = "on"\n')
    with (
        pytest.raises(OptionsError, match=r"sandbox_network .*the project cannot decide it for itself"),
        tether.open_run_sync(
            tmp_path, plugins=[eval_plugin], load_entry_points=False, options={"sandbox": True}
        ),
    ):
        pass
    assert os.environ.get("FAKE_SERVICE_TOKEN") is None


# the escapes run on both backends (above); this one on bubblewrap only, for the CI budget
@pytest.mark.parametrize("confined", ["bwrap"], indirect=True)
async def test_a_cell_whose_connection_the_egress_proxy_refused_says_so_once(confined):
    options = confined.options(sandbox_network=["pypi.org"])
    cell = (
        "import urllib.request, urllib.error\n"
        "try:\n"
        "    urllib.request.urlopen('https://github.com/', timeout=30)\n"
        "except (urllib.error.URLError, OSError) as e:\n"
        "    print('refused', e)\n"
    )
    async with tether.open_run(
        confined.root, plugins=[eval_plugin], load_entry_points=False, options=options
    ) as run:
        r = await run.call("eval", {"code": cell, "description": D})
        assert "Tunnel connection failed: 403 Forbidden" in r.plain, r.plain
        assert (
            "[sandbox: blocked 1 connection: github.com:443 (not in sandbox_network); the run option "
            "sandbox_network lists what may be reached]" in r.plain
        ), r.plain
        again = await run.call("eval", {"code": "1+1", "description": D})
        assert "blocked" not in again.plain, again.plain
