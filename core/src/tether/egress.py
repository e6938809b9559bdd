"""The sandbox's egress by name: an HTTP(S) proxy outside the sandbox, its only way out.

With ``sandbox_network = ["pypi.org", "*.example.com", ...]`` a sandboxed process reaches the network
only through this proxy (bubblewrap: relayed into its empty network namespace over a Unix socket;
Landlock: the only TCP port it may connect to besides its relay's). It allows ``CONNECT name:443``
and plain HTTP (absolute-form, port 80) to the listed names, an exact name or a ``*.`` suffix; an IP
literal only when listed as such. The name checked is the one the client asked for; the proxy
resolves it itself. Everything else gets a 403 whose body names the target and the option, and is
counted: `Egress.take_blocked` gives the refusals since the last call, for the next tool answer.

The request head is parsed strictly (one request per connection, CRLF line ends, no folded or
duplicate framing headers, no Content-Length beside Transfer-Encoding, a Host header that names
the target): what is ambiguous is refused with a 400 rather than guessed.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import re
import socket
import threading
from collections.abc import Callable, Sequence

MAX_HEAD = 16384
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 30.0
F_SETPIPE_SZ = 1031
CHUNK = 1 << 20  # bytes read at once while piping: fewer turns of the loop on a large download
REQUEST_LINE = re.compile(rb"^([A-Z]{3,12}) (\S+) HTTP/1\.[01]$")
HEADER = re.compile(rb"^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*$")
ABSOLUTE = re.compile(r"^http://([^/?#@\s]+)(/[^\s#]*)?$", re.IGNORECASE)
NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,62}\.)*[a-z0-9-]{1,63}\.?$")

Resolver = Callable[[str, int], tuple[str, int]]


class Refused(Exception):
    def __init__(self, status: int, target: str, why: str) -> None:
        super().__init__(why)
        self.status, self.target, self.why = status, target, why


def split_authority(authority: str, default_port: int) -> tuple[str, int]:
    """(host, port) of ``host[:port]`` or ``[v6]:port``; ValueError when it is not one."""
    if authority.startswith("["):
        host, sep, rest = authority[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(authority)
        port = rest[1:]
    else:
        host, _, port = authority.rpartition(":") if ":" in authority else (authority, "", "")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(authority)
    if not host:
        raise ValueError(authority)
    return host.lower().rstrip("."), int(port) if port else default_port


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class Egress:
    """The proxy of one run: listens on a loopback TCP port and a Unix socket; a thread per connection,
    whose bytes, once the request is allowed, are spliced between the sockets by the kernel."""

    def __init__(self, allowed: Sequence[str], unix_path: str | None = None, resolve: Resolver | None = None):
        self.allowed = tuple(a.lower().rstrip(".") for a in allowed)
        self.resolve: Resolver = resolve or (lambda host, port: (host, port))
        self._blocked: list[str] = []
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()  # every connection's sockets, shut down at close
        self._closed = False
        tcp = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port: int = tcp.getsockname()[1]
        self._listeners = [tcp]
        self.unix_path = unix_path
        if unix_path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(unix_path)
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            unix.bind(unix_path)
            unix.listen(128)
            self._listeners.append(unix)
        for listener in self._listeners:
            threading.Thread(target=self._accept, args=(listener,), name="tether-egress", daemon=True).start()

    def allows(self, host: str) -> bool:
        for name in self.allowed:
            if name.startswith("*."):
                if host.endswith(name[1:]) and not is_ip(host):
                    return True
            elif host == name:
                return True
        return False

    def take_blocked(self) -> list[str]:
        """The connections refused since the last call ("github.com:443 (not in sandbox_network)")."""
        with self._lock:
            out, self._blocked = self._blocked, []
        return out

    def close(self) -> None:
        """Stop listening and cut every connection (the Unix socket's file goes too)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            live = list(self._open)
        for sock in self._listeners:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self.unix_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.unix_path)

    # -- one connection --------------------------------------------------------------------------

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed
            threading.Thread(
                target=self._handle, args=(conn,), name="tether-egress-conn", daemon=True
            ).start()

    def _track(self, sock: socket.socket) -> bool:
        with self._lock:
            if self._closed:
                return False
            self._open.add(sock)
            return True

    def _handle(self, conn: socket.socket) -> None:
        up: socket.socket | None = None
        if not self._track(conn):
            conn.close()
            return
        try:
            conn.settimeout(HEAD_TIMEOUT)
            got = b""
            while b"\r\n\r\n" not in got:
                if len(got) > MAX_HEAD:
                    raise Refused(431, "?", f"the request head is over {MAX_HEAD} bytes")
                chunk = conn.recv(65536)
                if not chunk:
                    return
                got += chunk
            end = got.index(b"\r\n\r\n") + 4
            if end > MAX_HEAD:
                raise Refused(431, "?", f"the request head is over {MAX_HEAD} bytes")
            method, host, port, forward = self.check(got[:end])
            try:
                up = socket.create_connection(self.resolve(host, port), timeout=CONNECT_TIMEOUT)
            except OSError as exc:
                _answer(conn, 502, f"tether sandbox proxy: cannot reach {host}:{port}: {exc}\n")
                return
            if not self._track(up):
                return
            conn.settimeout(None)
            up.settimeout(None)
            if method == "CONNECT":
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up.sendall(forward)
            if got[end:]:
                up.sendall(got[end:])  # what the client sent after the head (a request body)
            back = threading.Thread(target=_pipe, args=(up, conn), name="tether-egress-pipe", daemon=True)
            back.start()
            _pipe(conn, up)
            back.join()
        except Refused as refused:
            if refused.status == 403:
                with self._lock:
                    self._blocked.append(f"{refused.target} ({refused.why})")
            body = (
                f"tether sandbox proxy: {refused.target} refused: {refused.why}. The run option sandbox_network "
                f"lists the names a sandboxed process may reach ({', '.join(self.allowed)}); add the name there "
                "to allow it\n"
            )
            with contextlib.suppress(OSError):
                _answer(conn, refused.status, body)
        except OSError:
            pass  # a client or server gone mid-way: nothing to tell anyone
        finally:
            for sock in (conn, up):
                if sock is not None:
                    with self._lock:
                        self._open.discard(sock)
                    sock.close()

    def check(self, head: bytes) -> tuple[str, str, int, bytes]:
        """(method, host, port, the head to send upstream) of an allowed request, else Refused."""
        lines = head[:-4].split(b"\r\n")
        if any(b"\n" in line or b"\r" in line or b"\0" in line for line in lines):
            raise Refused(400, "?", "the request head has a bare CR, LF or NUL")
        m = REQUEST_LINE.match(lines[0])
        if not m:
            raise Refused(400, "?", "the request line is not METHOD TARGET HTTP/1.x")
        method, target = m.group(1).decode(), m.group(2).decode("latin-1")
        headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            h = HEADER.match(line)
            if not h:
                raise Refused(400, "?", "a header line is malformed (or folded)")
            headers.append((h.group(1).decode().lower(), h.group(2).decode("latin-1")))
        names = [n for n, _ in headers]
        for single in ("host", "content-length", "transfer-encoding"):
            if names.count(single) > 1:
                raise Refused(400, "?", f"the request has more than one {single} header")
        given = dict(headers)
        if "content-length" in given and "transfer-encoding" in given:
            raise Refused(400, "?", "the request has both Content-Length and Transfer-Encoding")
        if "transfer-encoding" in given and given["transfer-encoding"].lower() != "chunked":
            raise Refused(400, "?", "the only Transfer-Encoding accepted is chunked")
        if "content-length" in given and not given["content-length"].isdigit():
            raise Refused(400, "?", "Content-Length is not a number")
        if method == "CONNECT":
            try:
                host, port = split_authority(target, 0)
            except ValueError:
                raise Refused(400, target, "the CONNECT target is not host:port") from None
            if port == 0:
                raise Refused(400, target, "the CONNECT target has no port")
            path = b""
        else:
            a = ABSOLUTE.match(target)
            if not a:
                why = (
                    "HTTPS goes through CONNECT, not an https:// request"
                    if target.lower().startswith("https://")
                    else "a request through the proxy names an absolute http:// URL"
                )
                raise Refused(400, target[:100], why)
            try:
                host, port = split_authority(a.group(1), 80)
            except ValueError:
                raise Refused(400, target[:100], "the URL's host is not host[:port]") from None
            path = (a.group(2) or "/").encode("latin-1")
        shown = f"{host}:{port}"
        if "host" in given:
            try:
                named = split_authority(given["host"], port)
            except ValueError:
                raise Refused(400, shown, "the Host header is not host[:port]") from None
            if named != (host, port):
                raise Refused(403, shown, f"the Host header names {given['host']}, not the target")
        elif method != "CONNECT":
            raise Refused(400, shown, "the request has no Host header")
        if not (NAME.match(host) or is_ip(host)):
            raise Refused(400, shown, "the target is not a host name")
        if not self.allows(host):
            why = "an IP address, not listed in sandbox_network" if is_ip(host) else "not in sandbox_network"
            raise Refused(403, shown, why)
        wanted = 443 if method == "CONNECT" else 80
        if port != wanted:
            raise Refused(
                403,
                shown,
                f"port {port}: {method if method == 'CONNECT' else 'plain HTTP'} goes to port {wanted} only",
            )
        if method == "CONNECT":
            return method, host, port, b""
        kept = [(n, v) for n, v in headers if not n.startswith("proxy-") and n != "connection"]
        forward = b"%s %s HTTP/1.1\r\n" % (method.encode(), path)
        forward += b"".join(b"%s: %s\r\n" % (n.encode(), v.encode("latin-1")) for n, v in kept)
        forward += b"Connection: close\r\n\r\n"
        return method, host, port, forward


def _answer(conn: socket.socket, status: int, body: str) -> None:
    reason = {
        400: "Bad Request",
        403: "Forbidden",
        431: "Request Header Fields Too Large",
        502: "Bad Gateway",
    }
    data = body.encode()
    conn.sendall(
        f"HTTP/1.1 {status} {reason.get(status, 'Error')}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
        + data
    )
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(5)
        while conn.recv(65536):  # let the client read the answer before the close resets it
            pass


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    """Carry src's bytes to dst until src ends, through a kernel pipe (splice: no copy through Python)."""
    try:
        if hasattr(os, "splice"):
            r, w = os.pipe()
            with contextlib.suppress(OSError):
                fcntl.fcntl(w, F_SETPIPE_SZ, CHUNK)  # up to 1 MiB a turn (the default pipe holds 64 KiB)
            try:
                while n := os.splice(src.fileno(), w, CHUNK):
                    while n:
                        n -= os.splice(r, dst.fileno(), n)
            finally:
                os.close(r)
                os.close(w)
        else:
            while data := src.recv(CHUNK):
                dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def proxy_env(port: int) -> dict[str, str]:
    """The variables that point ordinary tools (curl, pip, npm, git, Python, Node) at the proxy inside."""
    url = f"http://127.0.0.1:{port}"
    env = {}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"
    env["PIP_PROXY"] = url
    env["npm_config_proxy"] = env["npm_config_https_proxy"] = url
    env["GIT_CONFIG_COUNT"] = "1"
    env["GIT_CONFIG_KEY_0"], env["GIT_CONFIG_VALUE_0"] = "http.proxy", url
    return env
