"""The run's kernel factory: at most one live kernel per language, started on first use.

Which Python: the root's own environment (``.venv`` or ``venv``) when it has ipykernel, where the
user's packages are; otherwise tether's own, with the project's code (the root, and ``src`` in a
src layout) first on ``sys.path`` so that ``import pkg`` finds the project's package, not a namesake
installed in tether's environment. Where: inside the conversation's envelope when the
harness provides one that is up, otherwise on the host. Everything a kernel writes for its plumbing
(kernelspec, connection file, ipc sockets, log) lives in a private temporary directory of the run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from tether import NO_RESOURCE, ToolError, sandbox
from tether.binaries import project_pythons
from tether.sandbox import RELAY

from tether_eval.bridge import Overlap
from tether_eval.options import EvalOptions

if TYPE_CHECKING:
    import asyncio

    from tether.run import Run
    from tether.sandbox import Envelope

    from tether_eval.kernel import Kernel, KernelSpec

HELPERS = Path(__file__).parent / "kernel_side"


@attrs.frozen
class PythonChoice:
    executable: str
    environment: str  # for the model
    project_paths: tuple[str, ...] = ()  # put first on the kernel's sys.path (outside the project's env)


def _has_ipykernel(python: Path) -> bool:
    env_dir = python.parent.parent
    if any(env_dir.glob("lib/python3*/site-packages/ipykernel/__init__.py")):
        return True
    try:  # a .pth or a system-site-packages venv: ask the interpreter (bounded)
        probe = subprocess.run(
            [str(python), "-c", "import ipykernel"], capture_output=True, timeout=20, check=False
        )
        return probe.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def choose_python(root: Path) -> tuple[PythonChoice, str]:
    """The interpreter for Python cells, and a note when the project's own environment was passed over."""
    note = ""
    for python in project_pythons(root):
        name = python.parent.parent.name
        if _has_ipykernel(python):
            return PythonChoice(str(python), f"the project's environment ({name})"), ""
        note = f"the project's {name} has no ipykernel, so its installed packages are not importable here (install ipykernel into it to use them)"
    return PythonChoice(sys.executable, "tether's own environment", project_paths(root)), note


def project_paths(root: Path) -> tuple[str, ...]:
    """The root, and before it ``src`` when the project keeps its packages there (a src layout)."""
    src = root / "src"
    layout = src.is_dir() and any(
        (p.is_dir() and (p / "__init__.py").is_file()) or p.suffix == ".py" for p in src.iterdir()
    )
    return (str(src), str(root)) if layout else (str(root),)


# Deno (the PyPI `deno` wheel, a 90 MB binary) is an extra: a Python-only user does without it
JAVASCRIPT_EXTRA = "tether-eval[javascript]"


class KernelFactory:
    """The `tether_eval_kernels` resource: one per run, so two runs never share a kernel."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._kernels: dict[str, Kernel] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._dir: Path | None = None
        self._envelope: Envelope | None = None
        self._envelope_asked = False
        self._serial = itertools.count(1)
        self.python_note = ""
        self.overlap = Overlap()  # which calls from cells may run at once (see Overlap)
        # a kernel died while no cell ran (killed from outside, OOM): True, or why it was given up
        self.lost_between_cells: bool | str = False

    def envelope(self) -> Envelope | None:
        """The envelope kernels may run in: the run's answer to the core's `tether_envelope` (purpose
        "kernel"; a harness's, or the built-in one when the run option ``sandbox`` is on), asked once; None: the host."""
        if not self._envelope_asked:
            answer = sandbox.envelope(self.run, "kernel")
            self._envelope = None if answer is NO_RESOURCE else answer
            self._envelope_asked = True
        return self._envelope

    def javascript_unavailable(self) -> str:
        """Why JavaScript cells cannot run in this run and what to install; "" when they can: the `deno`
        wheel is there, or the run's envelope brings its own Deno and exec tools never run on the host."""
        if importlib.util.find_spec("deno") is not None:
            return ""
        install = (
            f"install the extra with `pip install '{JAVASCRIPT_EXTRA}'` (`tether[eval]` and `tether[all]` include it) "
            "and start tether again"
        )
        envelope = self.envelope()
        if envelope is not None and envelope.deno:
            if envelope.required:
                return ""
            return (
                f"JavaScript cells run in the Deno of the envelope '{envelope.name}'; while it is down they run on the "
                f"host, whose tether installation lacks Deno: {install}."
            )
        return f"JavaScript cells need Deno, which this installation lacks: {install}. Python cells work without it."

    def _host_deno(self) -> str:
        """The host's deno (the envelope, if any, is down or brings none)."""
        if why := self.javascript_unavailable():
            raise ToolError(why, code="javascript_unavailable", install=JAVASCRIPT_EXTRA)
        import deno  # the PyPI wheel ships the binary

        return deno.find_deno_bin()

    def lock(self, language: str) -> asyncio.Lock:
        import asyncio

        return self._locks.setdefault(language, asyncio.Lock())

    def live(self, language: str) -> Kernel | None:
        kernel = self._kernels.get(language)
        return kernel if kernel is not None and kernel.check_alive() else None

    async def get(self, language: str) -> tuple[Kernel, bool]:
        """The live kernel for ``language`` and whether it was started just now."""
        kernel = self.live(language)
        if kernel is not None:
            return kernel, False
        if language in self._kernels:
            self.lost_between_cells = self._kernels[language].lost or True
        await self.discard(language)
        kernel = await self._start(language)
        self._kernels[language] = kernel
        return kernel, True

    async def discard(self, language: str, now: bool = False) -> None:
        kernel = self._kernels.pop(language, None)
        if kernel is not None:
            await kernel.shutdown(now=now)

    async def _spec(self, language: str) -> KernelSpec:
        import asyncio

        from tether_eval.kernel import KernelSpec

        envelope = self.envelope()
        # the envelope when it is up, else None: the host (check() raises a ToolError when the run may
        # not run on the host)
        inside = envelope if envelope is not None and await envelope.check() else None
        where = f"envelope '{inside.name}'" if inside is not None else "host"
        env = self.run.child_env({"PYDEVD_DISABLE_FILE_VALIDATION": "1"})
        uv = os.environ.get("UV") or shutil.which("uv")
        if uv:
            env["TETHER_EVAL_UV"] = uv  # %pip falls back to uv where the environment has no pip
        if language == "python":
            choice, self.python_note = await asyncio.to_thread(
                choose_python, self.run.root
            )  # may ask the venv's python
            python = (inside.python if inside is not None else None) or choice.executable
            argv = [
                python,
                "-m",
                "ipykernel_launcher",
                "-f",
                "{connection_file}",
                "--HistoryManager.enabled=False",
            ]
            env["IPYTHONDIR"] = str(self._private() / "ipython")  # no user startup files printing into cells
            spec = {
                "interpreter": python,
                "environment": choice.environment,
                "transport": "ipc",
                "project_paths": choice.project_paths,
                # in an envelope the process we start is its wrapper (bwrap, `docker exec`): a SIGINT to its
                # group kills bubblewrap and the kernel with it; an interrupt_request makes the kernel
                # signal only itself
                "interrupt_mode": "message" if inside is not None else "signal",
            }
        else:
            binary = (inside.deno if inside is not None else None) or self._host_deno()
            # --sloppy-imports: `./x.js` finds x.ts, the `module: nodenext` convention of TypeScript code
            argv = [binary, "jupyter", "--kernel", "--sloppy-imports", "--conn", "{connection_file}"]
            env["NO_COLOR"] = "1"
            # Deno's kernel listens on tcp only (it rejects ipc); loopback, ports chosen by jupyter_client.
            # An envelope with a loopback of its own gets a relay: ipc sockets in the shared private
            # directory on our side, Deno's tcp ports inside (tether.relay)
            relayed = inside is not None and not inside.shares_loopback
            if relayed:
                tcp = "{connection_file}.tcp"
                argv = [sys.executable, "-I", RELAY, "zmq", "{connection_file}", tcp, "--", *argv[:-1], tcp]
            spec = {
                "interpreter": binary,
                "environment": "Deno",
                "transport": "ipc" if relayed else "tcp",
                "drain": self.run.options.of(EvalOptions).eval_drain,
                "barrier": True,
                "interrupt_mode": "message",  # Deno dies on SIGINT; an interrupt_request stops a busy cell
            }
        if inside is not None:
            argv = list(inside.wrap(argv))
        policy = inside.policy if inside is not None else ""
        return KernelSpec(language=language, argv=tuple(argv), where=where, env=env, policy=policy, **spec)

    def _private(self) -> Path:
        if self._dir is None:
            self._dir = self.run.private_dir() / "eval"  # removed with the run's, even if tether is killed
            self._dir.mkdir()
        return self._dir

    async def _start(self, language: str) -> Kernel:
        from tether_eval.kernel import Kernel, KernelDied

        spec = await self._spec(language)
        workdir = self._private() / f"k{next(self._serial)}"
        workdir.mkdir()
        kernel = Kernel(spec, workdir, self.run.root, self.run.stop_process)
        timeout = self.run.options.of(EvalOptions).eval_start_timeout
        try:
            await kernel.start(timeout, self.run.track_process)
            helper = (HELPERS / ("python_helper.py" if language == "python" else "js_helper.js")).read_text()
            asks = {}
            if language == "python":
                code = (
                    "import sys as _s, types as _t\n"
                    "_m = _t.ModuleType('__tether__')\n"
                    f"exec(compile({helper!r}, '<tether-helper>', 'exec'), _m.__dict__)\n"
                    "_s.modules['__tether__'] = _m\n"
                    f"_m.installed = _m.install(get_ipython(), {list(spec.project_paths)!r})\n"
                    "del _s, _t, _m\n"
                )
                asks = {"installed": "__import__('json').dumps(__import__('__tether__').installed)"}
            else:
                code = helper
            end = await kernel.execute(code, timeout=timeout, silent=True, user_expressions=asks)
            if end.status != "ok" or (end.reply or {}).get("status") != "ok":
                why = (end.reply or {}).get("evalue") or end.status
                raise KernelDied(
                    f"the tether helper failed to install in the kernel: {why}\n{kernel.log_tail()}"
                )
            if asks:
                kernel.installed = _answer(end.reply or {}, "installed")
            await kernel.probe_stdin(
                "__import__('__tether__').ping()" if language == "python" else "__tether.ping();", timeout
            )
        except (KernelDied, TimeoutError, OSError) as exc:
            await kernel.shutdown()
            detail = str(exc).strip()
            raise ToolError(
                f"the {language} kernel ({spec.interpreter}) did not start on the {spec.where}: "
                f"{type(exc).__name__}{': ' + detail if detail else ''}. Check that the interpreter exists and has "
                "ipykernel (Python) or that Deno runs (JavaScript); the run option eval_start_timeout sets the start budget.",
                code="kernel_start_failed",
                language=language,
            ) from None
        return kernel

    def idle(self) -> bool:
        """Nothing to close: no kernel started, no directory made (see `tether.run.list_tools`)."""
        return not self._kernels and self._dir is None

    async def aclose(self) -> None:
        """The run closes: shut every kernel down and remove the private directory."""
        import asyncio

        kernels, self._kernels = list(self._kernels.values()), {}
        await asyncio.gather(*(k.shutdown() for k in kernels), return_exceptions=True)
        if self._dir is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self._dir)
            self._dir = None

    def __repr__(self) -> str:
        return f"KernelFactory(root={str(self.run.root)!r}, live={sorted(k for k in self._kernels if self.live(k))})"


def _answer(reply: dict[str, Any], name: str) -> dict[str, Any]:
    """A JSON user_expression of an execute_reply (its text/plain is the repr of the JSON string)."""
    import ast
    import json

    try:
        return json.loads(ast.literal_eval(reply["user_expressions"][name]["data"]["text/plain"]))
    except (KeyError, ValueError, SyntaxError, TypeError):
        return {}


def describe(kernel: Kernel) -> dict[str, Any]:
    spec = kernel.spec
    return {
        "language": spec.language,
        "interpreter": kernel.installed.get("executable") or spec.interpreter,
        "environment": spec.environment,
        "where": spec.where,
        "pid": kernel.pid,
    }
