"""Egress by name (sandbox_network as a list): the proxy's checks, and real clients through it on both backends.

No outside network exists here: `tether.sandbox.RESOLVER` maps the test names to local servers (an
HTTP one on loopback standing for port 80, an HTTPS one with a certificate made for the name
standing for 443), so every request is decided on the name the client asked for, as it would be.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar

import pytest
import tether
from support import IN_CI, require_binary
from tether import egress, sandbox

NAME = "pkgs.example.test"
ALLOWED = [NAME, "*.mirror.test"]


class Handler(http.server.BaseHTTPRequestHandler):
    files: ClassVar[dict[str, tuple[str, bytes]]] = {}

    def do_GET(self) -> None:
        kind, body = self.files.get(self.path.split("?")[0], ("text/plain", b""))
        if not body:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    require_binary("openssl")
    where = tmp_path_factory.mktemp("tls")
    key, cert = where / "key.pem", where / "cert.pem"
    subprocess.run(
        [
            *(
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                f"/CN={NAME}",
            ),
            *("-addext", f"subjectAltName=DNS:{NAME}", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return key, cert


@pytest.fixture
def servers(certificate, monkeypatch):
    """An HTTP and an HTTPS server on loopback, and the resolver that sends the test names to them."""
    started = []
    for tls in (False, True):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(certificate[1], certificate[0])
            server.socket = ctx.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
    http_port, https_port = (s.server_address[1] for s in started)

    def resolve(host: str, port: int) -> tuple[str, int]:
        return ("127.0.0.1", {80: http_port, 443: https_port}.get(port, port))

    monkeypatch.setattr(sandbox, "RESOLVER", resolve)
    Handler.files = {"/hello": ("text/plain", b"hello through the proxy\n")}
    yield {"http": http_port, "https": https_port, "resolve": resolve, "ca": certificate[1]}
    for server in started:
        server.shutdown()
        server.server_close()


# -- the proxy's parser, over a socket ------------------------------------------------------------


@pytest.fixture
def proxy(servers):
    p = egress.Egress(ALLOWED, resolve=servers["resolve"])
    yield p
    p.close()


def exchange(proxy, raw: bytes) -> str:
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
        s.sendall(raw)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got.decode("latin-1")


@pytest.mark.parametrize(
    ("raw", "status", "said", "counted"),
    [
        (
            b"CONNECT github.com:443 HTTP/1.1\r\nHost: github.com:443\r\n\r\n",
            403,
            "not in sandbox_network",
            True,
        ),
        (
            f"CONNECT {NAME}:8443 HTTP/1.1\r\n\r\n".encode(),
            403,
            "port 8443: CONNECT goes to port 443 only",
            True,
        ),
        (
            b"CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n",
            403,
            "an IP address, not listed in sandbox_network",
            True,
        ),
        (b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n", 403, "an IP address", True),
        (
            f"CONNECT {NAME}:443 HTTP/1.1\r\nHost: github.com:443\r\n\r\n".encode(),
            403,
            "the Host header names github.com:443, not the target",
            True,
        ),
        (
            f"GET http://{NAME}/hello HTTP/1.1\r\nHost: github.com\r\n\r\n".encode(),
            403,
            "the Host header names github.com",
            True,
        ),
        (
            b"GET http://evil.mirror.test.attacker.com/ HTTP/1.1\r\nHost: evil.mirror.test.attacker.com\r\n\r\n",
            403,
            "not in sandbox_network",
            True,
        ),
        # request smuggling: ambiguous framing is refused, never guessed
        (
            f"GET http://{NAME}/hello HTTP/1.1\r\nHost: {NAME}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n".encode(),
            400,
            "both Content-Length and Transfer-Encoding",
            False,
        ),
        (
            f"GET http://{NAME}/ HTTP/1.1\r\nHost: {NAME}\r\nContent-Length: 1\r\nContent-Length: 40\r\n\r\n".encode(),
            400,
            "more than one content-length header",
            False,
        ),
        (
            f"GET http://{NAME}/ HTTP/1.1\r\nHost: {NAME}\r\nHost: github.com\r\n\r\n".encode(),
            400,
            "more than one host header",
            False,
        ),
        (
            f"GET http://{NAME}/ HTTP/1.1\r\nHost: {NAME}\r\nTransfer-Encoding: chunked, identity\r\n\r\n".encode(),
            400,
            "the only Transfer-Encoding accepted is chunked",
            False,
        ),
        (
            f"GET http://{NAME}/ HTTP/1.1\r\nHost: {NAME}\r\n X-Folded: yes\r\n\r\n".encode(),
            400,
            "malformed (or folded)",
            False,
        ),
        (f"GET http://{NAME}/ HTTP/1.1\nHost: github.com\r\n\r\n".encode(), 400, "bare CR, LF or NUL", False),
        (b"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n", 400, "absolute http:// URL", False),
        (
            f"GET https://{NAME}/ HTTP/1.1\r\nHost: {NAME}\r\n\r\n".encode(),
            400,
            "HTTPS goes through CONNECT",
            False,
        ),
        (b"NOT A REQUEST\r\n\r\n", 400, "METHOD TARGET HTTP/1.x", False),
        (b"CONNECT nohost HTTP/1.1\r\n\r\n", 400, "has no port", False),
    ],
)
def test_the_proxy_refuses_with_one_paragraph_naming_the_option(proxy, raw, status, said, counted):
    answer = exchange(proxy, raw)
    assert answer.startswith(f"HTTP/1.1 {status} "), answer
    body = answer.split("\r\n\r\n", 1)[1]
    assert said in body and "sandbox_network" in body and body.count("\n") == 1, body
    assert bool(proxy.take_blocked()) == counted


def test_a_head_too_long_or_never_finished_is_refused_or_dropped(proxy):
    answer = exchange(
        proxy, b"GET http://" + NAME.encode() + b"/ HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n"
    )
    assert answer.startswith("HTTP/1.1 431 "), answer[:200]


def test_an_allowed_plain_http_request_is_forwarded_once_with_connection_close(proxy):
    answer = exchange(
        proxy, f"GET http://{NAME}/hello HTTP/1.1\r\nHost: {NAME}\r\nProxy-Authorization: x\r\n\r\n".encode()
    )
    assert answer.startswith("HTTP/1.0 200 ") and answer.endswith("hello through the proxy\n"), answer
    assert proxy.take_blocked() == []


# -- real clients inside the sandbox, both backends -----------------------------------------------

CLIENT = r"""
import json, socket, ssl, sys, urllib.error, urllib.request
spec = json.loads(sys.argv[1])
ctx = ssl.create_default_context(cafile=spec["ca"])
out = {}
def get(name, url):
    try:
        out[name] = urllib.request.urlopen(url, context=ctx, timeout=30).read().decode()
    except urllib.error.HTTPError as e:
        out[name] = f"{e.code} {e.read().decode()}"
    except OSError as e:
        out[name] = type(e).__name__ + ": " + str(e)
get("https", f"https://{spec['name']}/hello")
get("http", f"http://{spec['name']}/hello")
get("unlisted", "https://github.com/")
try:
    socket.create_connection(("127.0.0.1", spec["direct"]), timeout=5)
    out["direct"] = "connected"
except OSError as e:
    out["direct"] = type(e).__name__
print(json.dumps(out))
"""


@contextlib.contextmanager
def wrapped(confined, argv: list[str]):
    """(argv wrapped in a run's envelope with sandbox_network=ALLOWED, the run), the run closed after."""
    options = confined.options(sandbox_network=ALLOWED)
    with tether.open_run_sync(confined.root, load_entry_points=False, options=options) as run:
        envelope = sandbox.envelope(run, "kernel")
        assert envelope is not None and envelope.refusal is None, envelope
        yield list(envelope.wrap(argv)), run


def test_through_the_proxy_a_sandboxed_client_reaches_the_listed_name_and_nothing_else(confined, servers):
    ca = confined.root / "ca.pem"  # under the root: bubblewrap's /tmp is private
    ca.write_bytes(servers["ca"].read_bytes())
    spec = {"name": NAME, "ca": str(ca), "direct": servers["https"]}
    with wrapped(confined, [sys.executable, "-I", "-c", CLIENT, json.dumps(spec)]) as (argv, run):
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, cwd=confined.root, check=False
        )
        assert done.returncode == 0, done.stderr
        got = json.loads(done.stdout.splitlines()[-1])
        assert got["https"] == "hello through the proxy\n", got
        assert got["http"] == "hello through the proxy\n", got
        assert got["unlisted"].startswith("Tunnel connection failed: 403") or got["unlisted"].startswith(
            "URLError"
        ), got
        assert got["direct"] == confined.by_backend("ConnectionRefusedError", "PermissionError")
        assert sandbox.egress_notes(run) == [
            "[sandbox: blocked 1 connection: github.com:443 (not in sandbox_network); the run option "
            "sandbox_network lists what may be reached]"
        ]
        assert sandbox.egress_notes(run) == []  # said once
        assert (
            f"network only through tether's HTTP(S) proxy, to {NAME}, *.mirror.test"
            in sandbox.envelope(run, "kernel").policy
        )


# both backends reach the proxy in the test above; real package clients on Landlock only, for the CI budget
@pytest.mark.parametrize("confined", ["landlock"], indirect=True)
def test_pip_download_and_npm_view_go_through_the_proxy_to_a_local_index(confined, servers, tmp_path):
    # the interpreter this environment was made from has pip (the project's environment, made by uv, has none)
    python = shutil.which("python3", path=os.path.join(sys.base_prefix, "bin")) or shutil.which("python3")
    if (
        python is None
        or subprocess.run([python, "-m", "pip", "--version"], capture_output=True, check=False).returncode
    ):
        (pytest.fail if IN_CI else pytest.skip)("no python3 with pip (.ci/run installs uv with it)")
    npm = require_binary("npm")
    from support import build_wheel

    wheel = build_wheel(tmp_path / "wheels", "0.1.0")
    Handler.files = {
        "/simple/tinypkg/": ("text/html", f'<a href="/files/{wheel.name}">{wheel.name}</a>\n'.encode()),
        f"/files/{wheel.name}": ("application/octet-stream", wheel.read_bytes()),
        "/tinypkg": (
            "application/json",
            json.dumps(
                {
                    "name": "tinypkg",
                    "dist-tags": {"latest": "0.1.0"},
                    "versions": {
                        "0.1.0": {
                            "name": "tinypkg",
                            "version": "0.1.0",
                            "dist": {"tarball": f"http://{NAME}/t.tgz"},
                        }
                    },
                }
            ).encode(),
        ),
    }
    out = confined.root / "dl"
    pip = [python, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--disable-pip-version-check"]
    pip += ["--index-url", f"http://{NAME}/simple/", "--trusted-host", NAME, "-d", str(out), "tinypkg"]
    with wrapped(confined, pip) as (argv, run):
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=180, cwd=confined.root, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert (out / wheel.name).read_bytes() == wheel.read_bytes()
        view = [
            npm,
            "view",
            "tinypkg",
            "version",
            "--registry",
            f"http://{NAME}/",
            "--cache",
            str(confined.root / ".npm"),
        ]
        argv = list(sandbox.envelope(run, "kernel").wrap(view))
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=180, cwd=confined.root, check=False
        )
        assert done.returncode == 0 and done.stdout.strip() == "0.1.0", done.stdout + done.stderr
        assert sandbox.egress_notes(run) == []


@pytest.mark.parametrize(
    ("names", "said"),
    [
        (["https://pypi.org"], "'https://pypi.org' is not a host name"),
        (["pypi.org:443"], "is not a host name"),
        ([""], "is not a host name"),
    ],
)
def test_a_bad_name_in_sandbox_network_is_one_line_at_open(tmp_path, names, said):
    from tether.options import OptionsError

    with (
        pytest.raises(OptionsError) as caught,
        tether.open_run_sync(
            tmp_path, load_entry_points=False, options={"sandbox": True, "sandbox_network": names}
        ),
    ):
        pass
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_the_proxy_and_its_socket_are_gone_when_the_run_closes(confined, servers):
    with wrapped(confined, ["true"]) as (_, run):
        proxy = sandbox.run_egress(run)
        sock, port = proxy.unix_path, proxy.port
        assert sock is not None and os.path.exists(sock)
    assert not os.path.exists(sock)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5)
