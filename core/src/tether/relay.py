"""Runs INSIDE the sandbox (stdlib only): carries TCP that cannot cross its network namespace.

    relay.py zmq HOST_CONN KERNEL_CONN -- ARGV...   a Jupyter kernel that speaks only TCP (Deno)
    relay.py stdio -- ARGV...                       a debug adapter that listens on TCP (delve)
    relay.py proxy SOCKET PORT -- ARGV...           the egress proxy's Unix socket served on PORT inside

zmq: the host's connection file (HOST_CONN) uses the ipc transport, whose Unix sockets live in the
run's private directory, shared with the host. The relay writes KERNEL_CONN, the same file with TCP
ports on the sandbox's own loopback, starts the kernel (ARGV names KERNEL_CONN), listens on each
ipc socket and carries every connection's bytes to the kernel's port (ZMTP is the same over both).

stdio: the adapter's first stdout line naming its port is passed on, then the relay connects and
carries our stdin/stdout to that connection; everything else the adapter prints goes to our stderr.

Either way the relay ends with the child (and with its exit code), so the host sees the kernel or
adapter die when it dies.
"""

import asyncio
import json
import os
import re
import signal
import socket
import sys

LISTEN = re.compile(rb"listening at:?\s*\[?([0-9a-fA-F.:]+?)\]?:(\d+)")
CONNECT_FOR = 60.0  # seconds a connection may wait for the child to listen
CHANNELS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


async def _pipe(reader, writer) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except (ConnectionError, OSError, RuntimeError):
            pass


async def _connect(port: int):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CONNECT_FOR
    while True:
        try:
            return await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.01)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _child(argv, **kw):
    proc = await asyncio.create_subprocess_exec(*argv, **kw)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, lambda s=sig: proc.returncode is None and proc.send_signal(s))
    return proc


async def zmq(host_conn: str, kernel_conn: str, argv) -> int:
    with open(host_conn) as fh:
        info = json.load(fh)
    # a Landlock envelope allows TCP only to the ports it names; a network namespace of our own, any
    pool = [int(p) for p in os.environ.get("TETHER_SANDBOX_PORTS", "").split(",") if p]
    ports = {c: pool[i] if i < len(pool) else _free_port() for i, c in enumerate(CHANNELS)}
    inside = {**info, "transport": "tcp", "ip": "127.0.0.1", **ports}
    with open(kernel_conn, "w") as fh:
        json.dump(inside, fh)
    servers = []
    for channel in CHANNELS:
        path = f"{info['ip']}-{info[channel]}"
        if os.path.exists(path):
            os.unlink(path)

        async def accepted(reader, writer, port=ports[channel]):
            try:
                up_reader, up_writer = await _connect(port)
            except OSError:
                writer.close()
                return
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

        servers.append(await asyncio.start_unix_server(accepted, path))
    proc = await _child(argv)
    return await proc.wait()


async def stdio(argv) -> int:
    loop = asyncio.get_running_loop()
    proc = await _child(argv, stdout=asyncio.subprocess.PIPE)
    out = proc.stdout
    assert out is not None  # piped just above
    err = sys.stderr.buffer
    while True:
        line = await out.readline()
        if not line:
            return await proc.wait()
        err.write(line)
        err.flush()
        if m := LISTEN.search(line):
            break
    reader, writer = await _connect(int(m.group(2)))
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    out_transport, out_protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    stdout = asyncio.StreamWriter(out_transport, out_protocol, None, loop)

    async def rest_to_stderr():
        while chunk := await out.read(65536):
            err.write(chunk)
            err.flush()

    tasks = [
        asyncio.ensure_future(t) for t in (_pipe(stdin, writer), _pipe(reader, stdout), rest_to_stderr())
    ]
    code = await proc.wait()
    await asyncio.wait(tasks, timeout=1.0)
    return code


async def proxy(sock: str, port: int, argv) -> int:
    async def accepted(reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(sock)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(accepted, "127.0.0.1", port)
    proc = await _child(argv)
    code = await proc.wait()
    server.close()
    return code


def main(args) -> int:
    split = args.index("--")
    mode, rest, argv = args[0], args[1:split], args[split + 1 :]
    if mode == "zmq":
        return asyncio.run(zmq(rest[0], rest[1], argv))
    if mode == "proxy":
        return asyncio.run(proxy(rest[0], int(rest[1]), argv))
    return asyncio.run(stdio(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
