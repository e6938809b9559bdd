"""The exec tier's envelope: where eval's kernels, debug's adapters and vibe's workers run.

A harness offers its own envelope (its container, its VM) through the ``tether_envelope`` hook. When
it offers none and the run asks for one (``sandbox=true``: `tether serve|call --sandbox`, or the run
option), the built-in one below confines every process an exec tool starts, with bubblewrap or, where
bubblewrap cannot create its namespaces (``sandbox_backend``: auto, bwrap, landlock), with Landlock
and seccomp (`tether.confine`). Under bubblewrap:

- filesystem: everything read-only; the root read-write, except its ``.git`` hooks and config (a
  written hook would run at the user's next commit); a private, empty ``/tmp``; a deny list that
  is not even readable (by default ``~/.ssh``, ``~/.aws``, ``~/.config/gcloud``, ``~/.gnupg``,
  ``~/.netrc``, ``~/.docker``, ``~/.kube``, shell histories, ...; ``sandbox_deny`` adds more). A
  process given a ``writable`` folder of its own (a vibe worker's git worktree) may write that
  folder instead of the root, and, when it is a linked worktree of the root's repository, what git
  needs to commit there (its own git dir, the repository's objects, refs and logs; never its hooks
  or config): the root is read-only to it;
- network: a network namespace of its own with only a loopback (``sandbox_network="on"`` shares
  the host's); vibe's workers follow ``sandbox_worker_network`` (an agent CLI needs its model's API);
- local sockets: none of the host's (``/run``, ``/tmp`` and ``/var/tmp`` are empty, abstract sockets
  stay in the host's network namespace) except those named in ``sandbox_sockets``;
- environment: secret-looking variables (``*_TOKEN``, ``*_KEY``, ``*_SECRET``, ``AWS_*``, ...) are
  not passed in (``sandbox_hide_env`` adds patterns, ``sandbox_pass_env`` names exceptions);
- processes: a pid namespace of their own, killed with the envelope (``--die-with-parent``); no
  capabilities, no new privileges, no nested user namespaces, even when tether runs as root.

Under Landlock the same deny list, root (or ``writable``) and environment rules hold, and the network
when off allows TCP only to a few ports chosen per process (the relay's), with UDP, raw and non-TCP
stream sockets refused by seccomp; what it cannot do (a private ``/tmp``, read-only ``.git`` hooks inside the root,
hidden host sockets, a pid namespace, debug without the network) is said in its policy line. A
harness's envelope says in `Envelope.writable` whether it narrowed writes to the folder asked for.

Fail closed: when the run asks for the sandbox and no backend can arm, the built-in envelope carries a
refusal that every exec tool returns instead of running anything.

TCP between the host and the inside (Deno's kernel, delve) does not cross a network namespace: it is
relayed through `tether.relay`, over Unix sockets in the run's private directory or over stdio.
"""

from __future__ import annotations

import fnmatch
import functools
import inspect
import json
import os
import shutil
import socket
import subprocess
import sys
import weakref
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs

from tether.args import arg
from tether.tools import ToolError

if TYPE_CHECKING:  # the proxy's module is imported when a run lists names to reach, not to list tools
    from tether import egress
    from tether.run import Run

RELAY = str(Path(__file__).with_name("relay.py"))  # run inside by the interpreter tether runs on
CONFINE = str(Path(__file__).with_name("confine.py"))  # the Landlock envelope's first process, likewise
PROXY_PORT = 3128  # where bubblewrap's inside reaches the egress proxy (a loopback of its own: never taken)
PORTS = 5  # TCP ports a Landlock envelope without network may bind and connect to: the relay's (one per zmq channel)

DEFAULT_DENY = (
    "~/.ssh",
    "~/.aws",
    "~/.config/gcloud",
    "~/.azure",
    "~/.gnupg",
    "~/.netrc",
    "~/.git-credentials",
    "~/.docker",
    "~/.kube",
    "~/.config/gh",
    "~/.pypirc",
    "~/.bash_history",
    "~/.zsh_history",
    "~/.sh_history",
    "~/.history",
    "~/.local/share/fish/fish_history",
    "~/.python_history",
    "~/.node_repl_history",
    "~/.psql_history",
    "~/.mysql_history",
    "~/.lesshst",
)
DEFAULT_HIDE_ENV = (
    "*_TOKEN",
    "*_TOKEN_*",
    "*_KEY",
    "*_KEY_*",
    "*_SECRET",
    "*_SECRET_*",
    "*_PASSWORD",
    "*_PASSWD",
    "*_CREDENTIALS",
    "*_AUTH",
    "AWS_*",
    "AZURE_*",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "DOCKER_HOST",
)
EMPTIED = ("/tmp", "/var/tmp", "/run", "/dev/shm")  # the host's sockets live here: none of them inside
LANDLOCK_FIX = (
    "run tether where unprivileged user namespaces are allowed (for bubblewrap) or on Linux 6.7+ with "
    "Landlock enabled (lsm= boot list) and libseccomp installed (Debian/Ubuntu: apt-get install libseccomp2). "
    "Nothing was run"
)
LANDLOCK_DEBUG = (
    'debug runs nothing under the Landlock sandbox with sandbox_network="off": debug adapters talk to '
    "their programs over loopback TCP on ports they choose, and Landlock cannot tell loopback from the "
    "network (it allows TCP by port only). Use bubblewrap (allow unprivileged user namespaces), or open "
    'the run with sandbox_network="on" if the program may reach the network. Nothing was run.'
)
INSTALL = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; "
    "Arch: pacman -S bubblewrap)"
)


def _absolute(instance, attribute, value) -> None:
    for p in value:
        if not os.path.isabs(os.path.expanduser(p)):
            raise ValueError(f"'{p}' is not an absolute path; give it as /abs/path or ~/path")


def _names(instance, attribute, value) -> None:
    if isinstance(value, str):
        return
    from tether import egress

    for name in value:
        bare = name[2:] if name.startswith("*.") else name
        if not bare or not (egress.NAME.match(bare.lower()) or egress.is_ip(bare)):
            raise ValueError(
                f'\'{name}\' is not a host name; list names like "pypi.org" or "*.example.com" (no scheme, port '
                "or path)"
            )


@attrs.frozen
class SandboxOptions:
    sandbox: bool = arg(
        "run the exec tools (eval kernels and their shell idioms, debug adapters and programs, vibe workers) "
        "inside the built-in envelope (see sandbox_backend), unless the harness offers its own; they refuse "
        "to run when it cannot be had",
        default=False,
    )
    sandbox_backend: Literal["auto", "bwrap", "landlock"] = arg(
        "what confines the built-in sandbox: bwrap (bubblewrap's namespaces), landlock (Landlock and seccomp, "
        "where user namespaces are not allowed) or auto (bubblewrap, else Landlock)",
        default="auto",
    )
    sandbox_network: Literal["off", "on"] | list[str] = arg(
        "network inside the sandbox: off (a loopback of its own), on (the host's network), or a list of "
        'host names (exact, or "*.example.com") reached only through tether\'s HTTP(S) proxy',
        default="off",
        validator=_names,
    )
    sandbox_worker_network: Literal["same", "off", "on"] = arg(
        "network of vibe workers inside the sandbox (an agent CLI needs its model's API): same as "
        "sandbox_network, off or on",
        default="same",
    )
    sandbox_deny: list[str] = arg(
        "absolute paths (or ~/...) not even readable inside, added to the defaults",
        factory=list,
        validator=_absolute,
    )
    sandbox_sockets: list[str] = arg(
        "host Unix sockets passed in (e.g. a docker.sock you mean to share)",
        factory=list,
        validator=_absolute,
    )
    sandbox_hide_env: list[str] = arg(
        "more environment variable name patterns (fnmatch) not passed in, added to the defaults", factory=list
    )
    sandbox_pass_env: list[str] = arg(
        "environment variables passed in although they look secret (e.g. an agent worker's API key)",
        factory=list,
    )


@attrs.frozen
class Envelope:
    """Where an exec tool's processes run: how to start one inside, and what that means.

    The inside must share the run's root, its private directory (`Run.private_dir`) and the
    interpreters' paths with the host.

    Attributes:
        name: the envelope's name, shown to the model (where a kernel or a debuggee runs).
        wrap: turns a host command line into one that runs inside (``["bwrap", ..., *argv]``,
            ``["docker", "exec", "-i", name, *argv]``).
        is_up: whether the envelope is up now (sync or async; a check that fails or hangs counts as
            down); tether never boots one.
        python: the interpreter with ipykernel inside; None: the same choice as on the host.
        deno: the deno binary inside; None: the one the `tether-eval[javascript]` extra brings.
        policy: what confines a process inside, in one line, for the model.
        shares_loopback: whether a TCP port opened inside is reachable from the host (False: tether
            relays).
        required: the run asked for confinement: when the envelope is down, exec tools refuse and
            never run on the host.
        refusal: when set, what an exec tool answers instead of running (the run asked for a sandbox
            it cannot have).
        writable: the folder a process inside may write as its root: the hook's ``writable`` when the
            envelope confines writes to it (the built-in one does), the run's root when it was not
            asked to; None: the envelope does not say (a harness's that knows nothing of ``writable``),
            and whoever asked says so rather than claiming the root is read-only.
    """

    name: str
    wrap: Callable[[Sequence[str]], Sequence[str]]
    is_up: Callable[[], bool | Awaitable[bool]] = lambda: True
    python: str | None = None
    deno: str | None = None
    policy: str = ""
    shares_loopback: bool = True
    required: bool = False
    refusal: str | None = None
    writable: Path | None = None

    async def up(self, timeout: float = 5.0) -> bool:
        """Whether the envelope is up; a check that fails or hangs counts as down."""
        import asyncio

        try:
            value = self.is_up()
            if inspect.isawaitable(value):
                value = await asyncio.wait_for(value, timeout)
            return bool(value)
        except Exception:  # noqa: BLE001 - a broken check means we cannot count on the envelope
            return False

    async def check(self) -> bool:
        """True to run inside, False to run on the host; a ToolError when neither is allowed."""
        if self.refusal:
            raise ToolError(self.refusal, code="sandbox_unavailable")
        if await self.up():
            return True
        if self.required:
            raise ToolError(
                f"the envelope '{self.name}' is not up, and this run runs exec tools only inside one; start it "
                "(or open the run without sandbox) and call again",
                code="sandbox_unavailable",
            )
        return False

    def describe(self) -> str:
        return f"sandboxed in {self.name}" + (f" ({self.policy})" if self.policy else "")


def envelope(
    run: Run, purpose: Literal["kernel", "debug", "worker"], writable: Path | None = None
) -> Envelope | None:
    """The envelope for ``purpose`` in this run: the harness's, else the built-in one when asked for.

    ``writable``: the folder the process is to write instead of the run's root (a vibe worker's git
    worktree), the root then read-only to it; `Envelope.writable` says whether the envelope did so.
    """
    return run.hook.tether_envelope(run=run, purpose=purpose, writable=writable)


def status(run: Run) -> str:
    """One line for `tether tools` and the eval banner: do exec tools run sandboxed, under what policy."""
    env = envelope(run, "kernel")
    if env is None:
        return "exec tools run unsandboxed on the host (turn the sandbox on with --sandbox or the run option sandbox=true)"
    if env.refusal:
        return f"exec tools refuse to run: {env.refusal}"
    return f"exec tools run {env.describe()}"


# -- the built-in envelope -------------------------------------------------------------------------


@functools.cache
def bwrap_problem() -> str | None:
    """None when bubblewrap can confine a process here; else what is missing and how to get it."""
    binary = shutil.which("bwrap")
    if binary is None:
        return f"the run asks for the sandbox, but bubblewrap (bwrap) is not on PATH: {INSTALL}. Nothing was run."
    try:
        probe = subprocess.run(
            [
                binary,
                "--unshare-user",
                "--unshare-pid",
                "--unshare-net",
                "--cap-drop",
                "ALL",
                "--ro-bind",
                "/",
                "/",
                "--proc",
                "/proc",
                "--dev",
                "/dev",
                "true",
            ],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return (
            f"the run asks for the sandbox, but bubblewrap does not run ({exc}): {INSTALL}. Nothing was run."
        )
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or ["no message"])[-1][:300]
        return (
            f"the run asks for the sandbox, but bubblewrap cannot create its namespaces here ({why}): allow "
            "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04+ also "
            "kernel.apparmor_restrict_unprivileged_userns=0) or run tether where they are allowed. Nothing was run."
        )
    return None


@functools.cache
def _bwrap_disables_userns() -> bool:
    """Whether this bubblewrap has --disable-userns (0.8 and later)."""
    try:
        shown = subprocess.run(
            [shutil.which("bwrap") or "bwrap", "--help"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return "--disable-userns" in shown.stdout


@functools.cache
def landlock_probe() -> tuple[int, str | None]:
    """(the Landlock ABI, None) when a process can be confined with Landlock and seccomp here; else (0, why)."""
    try:
        probe = subprocess.run(
            [sys.executable, "-I", "-S", CONFINE, "--probe"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return 0, f"the Landlock probe did not run ({exc})"
    if probe.returncode != 0 or not probe.stdout.strip().isdigit():
        why = (probe.stderr.strip().splitlines() or ["no message"])[-1][:300]
        return 0, f"Landlock and seccomp cannot confine a process here ({why})"
    return int(probe.stdout), None


@attrs.frozen
class Policy:
    root: Path
    private: Callable[[], Path]  # the run's private directory, created when a process is first wrapped
    network: bool
    deny: tuple[str, ...]
    sockets: tuple[str, ...]
    hide_env: tuple[str, ...]
    pass_env: tuple[str, ...]
    backend: Literal["bwrap", "landlock"] = "bwrap"
    abi: int = 0  # Landlock's, when it is the backend
    fallback: str = ""  # why bubblewrap was not used, when auto fell back to Landlock
    names: tuple[str, ...] = ()  # sandbox_network's list: the network is off but for the egress proxy
    egress: Callable[[], egress.Egress] | None = None  # the run's proxy, started when first needed
    writable: Path | None = None  # the folder written instead of the root (None: the root)
    git: tuple[str, ...] = ()  # with writable: what git needs to commit there (see `_worktree_git`)
    common: str | None = None  # with git: the repository's git dir, shown read-only when outside the root

    def _net(self) -> str:
        if self.names:
            return f"network only through tether's HTTP(S) proxy, to {', '.join(self.names)}"
        return ""

    def _writes(self) -> str:
        """What may be written, for the policy line (the run's private folder always; said when narrowed)."""
        if self.writable is None:
            if self.backend == "bwrap":
                return "root read-write except .git hooks and config, everything else read-only"
            return (
                "root read-write, its .git hooks and config included (Landlock cannot make them read-only "
                "inside it), everything else read-only (the host's /tmp too, readable: not private)"
            )
        where = os.path.relpath(self.writable, self.root)
        git = (
            ", the repository's git objects, refs and logs (to commit there; not the hooks or config)"
            if self.git
            else " (not a git worktree of the root's repository: git cannot commit there)"
        )
        tmp = "" if self.backend == "bwrap" else " (the host's /tmp too, readable: not private)"
        return (
            f"its working directory {where}{git} and the run's private folder read-write, the root and "
            f"everything else read-only{tmp}"
        )

    def describe(self) -> str:
        deny = ", ".join(_home_relative(p) for p in self.deny[:6]) + (", ..." if len(self.deny) > 6 else "")
        if self.backend == "bwrap":
            net = self._net() or ("network on" if self.network else "no network")
            sockets = f"sockets {', '.join(self.sockets)}" if self.sockets else "no host sockets"
            return f"{self._writes()}, unreadable {deny}; {net}; {sockets}; secret-looking variables hidden"
        net = (
            "network on"
            if self.network
            else (self._net() or "no network")
            + f" (TCP connect and bind only to its {PORTS} relay ports{' and the proxy' if self.names else ''}, "
            "no UDP or raw sockets)"
        )
        scopes = (
            "no signals to or abstract sockets of processes outside"
            if self.abi >= 6
            else f"signals to and abstract sockets of host processes not confined (Landlock ABI {self.abi} < 6)"
        )
        fell = f"bubblewrap could not start ({self.fallback}), so " if self.fallback else ""
        return (
            f"{fell}Landlock ABI {self.abi} and seccomp: {self._writes()}, unreadable {deny} (their names "
            f"can be listed); {net}; host Unix sockets reachable by path (Landlock cannot hide them); no pid "
            f"namespace: host processes are visible, not traceable; {scopes}; no new user namespaces or "
            "mounts; no capabilities; secret-looking variables hidden"
        )

    def _written(self) -> list[str]:
        """The folders written (besides the private one): the root, or the writable folder and git's."""
        return [str(self.root)] if self.writable is None else [str(self.writable), *self.git]

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return self.landlock_argv(argv) if self.backend == "landlock" else self.argv(argv)

    def landlock_argv(self, argv: Sequence[str]) -> list[str]:
        private = self.private()
        tmp = private / "tmp"
        tmp.mkdir(exist_ok=True)
        ports = [] if self.network else _free_ports(PORTS)
        setenv = {"TMPDIR": str(tmp), "XDG_CACHE_HOME": str(tmp / ".cache")}
        if ports:
            setenv["TETHER_SANDBOX_PORTS"] = ",".join(map(str, ports))
        proxy = []
        if self.egress is not None:
            port = self.egress().port  # the host's loopback: the one port out besides the relay's
            proxy = [port]
            from tether.egress import proxy_env

            setenv.update(proxy_env(port))
        spec = {
            "network": self.network,
            "deny": list(self.deny),
            "write": [*self._written(), str(private)],
            "ports": ports + proxy,
            "unset": [n for n in os.environ if _hidden(n, self.hide_env) and n not in self.pass_env],
            "setenv": setenv,
            "chdir": str(self.root),
        }
        # -S: confine.py needs the stdlib only, and an interpreter start without .pth files is faster
        return [sys.executable, "-I", "-S", CONFINE, json.dumps(spec), "--", *argv]

    def argv(self, argv: Sequence[str]) -> list[str]:
        out = [
            shutil.which("bwrap") or "bwrap",
            "--die-with-parent",
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--cap-drop",
            "ALL",
        ]
        if _bwrap_disables_userns():
            out.append(
                "--disable-userns"
            )  # no nested user namespace, where a process would hold capabilities
        if not self.network:
            out.append("--unshare-net")
        out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for d in EMPTIED:
            if os.path.isdir(d) and not os.path.islink(d):
                out += ["--tmpfs", d]
        for keep in _kept_readable():  # the home and interpreters, where an emptied directory hid them
            out += ["--ro-bind-try", keep, keep]
        private = str(self.private())
        if self.writable is None:
            out += ["--bind", str(self.root), str(self.root)]
            for path in _git_protected(self.root):
                out += ["--ro-bind", path, path]
        else:  # the root (and the repository's git dir) seen read-only, also where an emptied folder hid them
            for seen in (str(self.root), self.common):
                if seen is not None:
                    out += ["--ro-bind", seen, seen]
            for path in self._written():
                out += ["--bind", path, path]
        out += ["--bind", private, private]
        for path in self.deny:
            if os.path.isdir(path):
                out += ["--tmpfs", path, "--remount-ro", path]
            elif os.path.lexists(path):
                out += ["--ro-bind", "/dev/null", path]
        for sock in self.sockets:
            out += ["--bind-try", sock, sock]
        for name in os.environ:
            if _hidden(name, self.hide_env) and name not in self.pass_env:
                out += ["--unsetenv", name]
        if self.egress is not None:
            from tether.egress import proxy_env

            for name, value in proxy_env(PROXY_PORT).items():
                out += ["--setenv", name, value]
            # the proxy's Unix socket (in the private directory) served on the namespace's own loopback
            sock = self.egress().unix_path
            argv = [sys.executable, "-I", RELAY, "proxy", str(sock), str(PROXY_PORT), "--", *argv]
        # a host pid means nothing in a pid namespace (ipykernel would take its parent for gone)
        # and caches (pip, uv, deno) go to the private /tmp: the home is read-only
        out += [
            "--unsetenv",
            "JPY_PARENT_PID",
            "--setenv",
            "TMPDIR",
            "/tmp",
            "--setenv",
            "XDG_CACHE_HOME",
            "/tmp/.cache",
            "--chdir",
            str(self.root),
            "--",
        ]
        return out + list(argv)


def _free_ports(count: int) -> list[int]:
    """Ports free on the host's loopback now (a Landlock envelope shares it: no namespace of its own)."""
    socks = [socket.create_server(("127.0.0.1", 0)) for _ in range(count)]
    try:
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _hidden(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _home_relative(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if path.startswith(home + os.sep) else path


def _kept_readable() -> list[str]:
    # the import path too: an editable install's sources (the relay, a kernel's helpers) may live under /tmp
    keep = {
        os.path.expanduser("~"),
        sys.prefix,
        sys.base_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        *(os.path.abspath(p) for p in sys.path if p and os.path.isdir(p)),
    }
    return sorted(k for k in keep if any(k == d or k.startswith(d + os.sep) for d in EMPTIED))


def _git_protected(root: Path) -> list[str]:
    """The root's git hooks and config: bound read-only over the writable root."""
    git = root / ".git"
    if not git.is_dir():
        return []
    hooks = git / "hooks"
    hooks.mkdir(exist_ok=True)  # else a hook could be created under the writable .git
    out = [str(hooks)] + [str(p) for p in (git / "config",) if p.exists()]
    try:
        custom = subprocess.run(
            ["git", "config", "--file", str(git / "config"), "--get", "core.hooksPath"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        custom = ""
    if custom:
        path = (root / os.path.expanduser(custom)).resolve()
        if path.is_relative_to(root) and path.is_dir():
            out.append(str(path))
    return out


def _common_dir(root: Path) -> Path | None:
    """The git dir of the repository the root is in (its common dir, for a linked worktree), from the
    root's own ``.git`` (the user's: trusted) without running git; None outside a repository."""
    for folder in (root, *root.parents):
        dot = folder / ".git"
        if dot.is_dir():
            return Path(os.path.realpath(dot))
        if dot.is_file():
            own = _gitdir_of(folder)
            if own is None:
                return None
            try:
                common = (own / "commondir").read_text().strip()
            except OSError:
                return own
            return Path(os.path.realpath(own / common))
    return None


def _gitdir_of(work: Path) -> Path | None:
    """Where a linked worktree's ``.git`` file points (resolved), else None."""
    try:
        text = (work / ".git").read_text(errors="replace")
    except OSError:
        return None
    if not text.startswith("gitdir: "):
        return None
    return Path(os.path.realpath(work / text[len("gitdir: ") :].strip()))


def _worktree_git(root: Path, work: Path) -> tuple[Path | None, tuple[str, ...]]:
    """(the repository's git dir, what git needs to commit in ``work``) when ``work`` is a linked
    worktree of the root's repository: its own git dir (HEAD, index) and the repository's objects,
    refs and logs, never hooks or config; else (None, ()).

    ``work/.git`` is the process's to write (a worker may have rewritten it on an earlier run), so it
    is trusted only to name a git dir directly inside ``<the root's git dir>/worktrees`` whose own
    ``gitdir`` file (written by ``git worktree add``) names ``work``: it cannot make anything else
    writable, another worktree's git dir included."""
    common = _common_dir(root)
    own = _gitdir_of(work) if common is not None else None
    if common is None or own is None or own.parent != common / "worktrees" or not own.is_dir():
        return None, ()
    try:
        back = (own / "gitdir").read_text(errors="replace").strip()
    except OSError:
        return None, ()
    if os.path.realpath(own / back) != os.path.realpath(work / ".git"):
        return None, ()  # the git dir of another worktree
    shared = [common / name for name in ("objects", "refs", "logs", "reftable")]
    return common, (str(own), *(str(p) for p in shared if p.is_dir() and not p.is_symlink()))


def builtin_envelope(run: Run, purpose: str, writable: Path | None = None) -> Envelope | None:
    """The built-in envelope when the run asks for the sandbox (see the module docstring)."""
    opts = run.options.of(SandboxOptions)
    if not opts.sandbox:
        return None
    network = opts.sandbox_network == "on"
    if purpose == "worker" and opts.sandbox_worker_network != "same":
        network = opts.sandbox_worker_network == "on"
    backend, abi, fallback = "bwrap", 0, ""
    if opts.sandbox_backend != "landlock":
        problem = bwrap_problem()
        if problem is not None and opts.sandbox_backend == "bwrap":
            return Envelope("bubblewrap", wrap=list, required=True, refusal=problem)
        if problem is not None:
            fallback = _bwrap_why(problem)
    if opts.sandbox_backend == "landlock" or fallback:
        backend = "landlock"
        abi, why = landlock_probe()
        if why is not None:
            told = f"bubblewrap cannot start ({fallback}), and " if fallback else ""
            return Envelope(
                "landlock",
                wrap=list,
                required=True,
                refusal=(
                    f"the run asks for the sandbox, but {told}{why}: {LANDLOCK_FIX}"
                    if fallback
                    else f"the run asks for the Landlock sandbox, but {why}: {LANDLOCK_FIX}"
                ),
            )
        if purpose == "debug" and not network:
            return Envelope("landlock", wrap=list, required=True, refusal=LANDLOCK_DEBUG)
    names: tuple[str, ...] = ()
    if isinstance(opts.sandbox_network, list) and not (
        purpose == "worker" and opts.sandbox_worker_network != "same"
    ):
        names = tuple(opts.sandbox_network)
    deny = [os.path.expanduser(p) for p in (*DEFAULT_DENY, *opts.sandbox_deny)]
    common, git = None, ()
    if writable is not None and Path(writable) == run.root:
        writable = None  # the root itself: as when none is given
    if writable is not None:
        common, git = _worktree_git(run.root, Path(writable))
    policy = Policy(
        run.root,
        run.private_dir,
        network,
        tuple(os.path.normpath(p) for p in deny),
        tuple(opts.sandbox_sockets),
        (*DEFAULT_HIDE_ENV, *opts.sandbox_hide_env),
        tuple(opts.sandbox_pass_env),
        backend,
        abi,
        fallback,
        names,
        functools.partial(run_egress, run) if names else None,
        writable,
        git,
        str(common) if common is not None and not common.is_relative_to(run.root) else None,
    )
    return Envelope(
        "bubblewrap" if backend == "bwrap" else "landlock",
        wrap=policy.wrap,
        policy=policy.describe(),
        shares_loopback=network,
        required=True,
        writable=run.root if writable is None else writable,
    )


_EGRESS: weakref.WeakKeyDictionary[Run, egress.Egress] = weakref.WeakKeyDictionary()
RESOLVER: egress.Resolver | None = None  # where the proxy connects for a name (None: the name itself, by DNS)


def run_egress(run: Run) -> egress.Egress:
    """The run's egress proxy (``sandbox_network`` as a list of names), started on first use, closed with the run."""
    proxy = _EGRESS.get(run)
    if proxy is None:
        names = run.options.of(SandboxOptions).sandbox_network
        assert isinstance(names, list)
        from tether.egress import Egress

        proxy = Egress(names, str(run.private_dir() / "egress.sock"), RESOLVER)
        _EGRESS[run] = proxy
        run.on_close(proxy.close)
    return proxy


def egress_notes(run: Run) -> list[str]:
    """One line on the connections the run's proxy refused since the last answer that said so; else none."""
    proxy = _EGRESS.get(run)
    blocked = proxy.take_blocked() if proxy is not None else []
    if not blocked:
        return []
    shown = ", ".join(blocked[:5]) + (f", and {len(blocked) - 5} more" if len(blocked) > 5 else "")
    word = "connection" if len(blocked) == 1 else "connections"
    return [
        f"[sandbox: blocked {len(blocked)} {word}: {shown}; the run option sandbox_network lists what may be reached]"
    ]


def _bwrap_why(problem: str) -> str:
    """The short reason inside a bwrap_problem() paragraph (what bubblewrap said, or that it is missing)."""
    if "not on PATH" in problem:
        return "bwrap is not on PATH"
    start = problem.find("(")
    end = problem.find("): ", start)
    return problem[start + 1 : end] if start >= 0 and end > start else problem[:200]


def explain(text: str, policy: str) -> list[str]:
    """Notes for output that shows the sandbox refusing something, so the model learns the rule, not retries."""
    notes = []
    if "Landlock" in policy and any(
        m in text for m in ("Permission denied", "PermissionDenied", "PermissionError")
    ):
        net = "" if "network on" in policy else ", and TCP reaches only the sandbox's relay ports"
        notes.append(
            "[sandbox (Landlock): only the root and the run's private folder are writable, credentials and "
            f"histories (~/.ssh, ~/.aws, ...) are unreadable{net}: a permission denied here is the sandbox, "
            "on purpose; write under the root, and do not look for a way around it]"
        )
    if "Read-only file system" in text:
        notes.append(
            "[sandbox: only the root is writable (not its .git hooks or config); everything else is "
            "read-only here: write under the root instead]"
        )
    if "no network" in policy and any(
        m in text
        for m in (
            "Network is unreachable",
            "Connection refused",
            "name resolution",
            "Name or service not known",
            "nodename nor servname",
            "ConnectionRefused",
        )
    ):
        notes.append(
            "[sandbox: there is no network here, not even the host's loopback services; the run option "
            'sandbox_network="on" allows it: do not retry the connection unchanged]'
        )
    if "No such file or directory" in text and any(
        _home_relative(os.path.expanduser(p))[1:] in text or os.path.expanduser(p) in text
        for p in DEFAULT_DENY
    ):
        notes.append(
            "[sandbox: credentials and histories (~/.ssh, ~/.aws, ...) are hidden here on purpose; "
            "do not look for them elsewhere]"
        )
    return notes
