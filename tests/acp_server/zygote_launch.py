"""A server command for clients the suite does not control: a forked server behind an exec'd stub.

    python -I -S zygote_launch.py ZYGOTE_SOCKET [ARGS...]

runs `python -m acp_server ARGS...` forked from the pytest worker's zygote (zygote_main.py) instead
of exec'ing a fresh interpreter that imports everything again: the eval's runner (`continual-acp eval
--server-command`) and the Node SDK's conformance clients start their servers themselves, so
server_zygote.py's `launch()` cannot reach them. Test infrastructure only; stdlib only, so the stub
itself costs an interpreter start and nothing more.

What a client sees is what an exec'd server gives it: the server reads this process's stdin and
writes its stdout (the descriptors themselves are handed to the zygote, not copied through here),
with this process's environment and working directory; this process exits with the server's status,
and a server killed by signal N kills this process with N too (so the client reads -N, as from
exec). SIGTERM and SIGINT sent here are forwarded to the server. When this process is killed (a
client's SIGKILL, or its process group's), the zygote kills the server (the connection owns it).

The server's stderr is the one stream copied through this process, so that nothing the server or
its kernels write reaches this process's stderr (the eval's `server.log`) once this process is dead:
an eval killed and resumed in the same output directory (tests/eval/test_eval_stream.py) must not get
late writes from the killed run's servers.

A missing or dead zygote is a one-line error on stderr and exit status 1.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import socket
import sys
from typing import NoReturn

_NAME = "zygote_launch"
_conn: socket.socket | None = None  # to the zygote, once it has said the server's pid
_pending: list[int] = []  # signals that arrived before it had


def _forward(signum: int, _frame: object) -> None:
    # The zygote sends it on: it holds the server's pidfd until it has reaped it (no reused pid).
    if _conn is None:
        _pending.append(signum)
        return
    try:
        _conn.sendall(f"signal {signum}\n".encode())
    except OSError:
        pass  # the zygote is gone: the loop below says so


def _fail(message: str) -> NoReturn:
    sys.stderr.write(f"{_NAME}: {message}\n")
    sys.stderr.flush()
    raise SystemExit(1)


def _connect(path: str, args: list[str], err_in: int) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError as exc:
        _fail(f"no server zygote at {path} ({exc.strerror or exc}); is the pytest worker that owns it gone?")
    request = {
        "argv": [sys.executable, "-m", "acp_server", *args],
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "owned": True,
    }
    try:
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, err_in])
    except OSError as exc:
        _fail(f"the server zygote at {path} refused the request ({exc})")
    return conn


def _copy(fd: int) -> bool:
    """Whatever `fd` (the server's stderr) holds now, to ours; False once it has ended."""
    try:
        chunk = os.read(fd, 65536)
    except BlockingIOError:
        return True
    if not chunk:
        return False
    try:
        while chunk:  # a signal handler can cut a write short
            chunk = chunk[os.write(2, chunk) :]
    except OSError:
        pass  # our stderr is gone: the server's output has nowhere to go, as with exec
    return True


def _run(path: str, args: list[str]) -> int:
    """The server's returncode (-N: killed by signal N)."""
    global _conn
    err_out, err_in = os.pipe()
    conn = _connect(path, args, err_in)
    os.close(err_in)
    # Only the server holds the client's stdin and stdout now: our copies would keep a pipe's far
    # end from seeing EOF after the server has gone.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    os.set_blocking(err_out, False)
    said = b""
    err_open = True
    while True:
        watch: list[socket.socket | int] = [conn, err_out] if err_open else [conn]
        ready, _, _ = select.select(watch, [], [])
        if err_out in ready:
            err_open = _copy(err_out)
        if conn not in ready:
            continue
        chunk = conn.recv(4096)
        if not chunk:
            _fail(f"the server zygote at {path} went away before the server exited")
        said += chunk
        while b"\n" in said:
            line, said = said.split(b"\n", 1)
            word, _, value = line.decode().partition(" ")
            if word == "pid":
                _conn = conn
                for signum in _pending:
                    _forward(signum, None)
            elif word == "exit":
                while err_open and select.select([err_out], [], [], 0)[0]:
                    err_open = _copy(err_out)  # what it wrote last (its kernels may keep the pipe)
                return int(value)
            else:
                _fail(f"the server zygote said {line!r}")


def main() -> None:
    if len(sys.argv) < 2:
        _fail("usage: zygote_launch.py ZYGOTE_SOCKET [ARGS...]")
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _forward)
    code = _run(sys.argv[1], sys.argv[2:])
    if code >= 0:
        raise SystemExit(code)
    # Killed by a signal: die of the same one, so our parent reads what exec would have shown it.
    if -code not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(-code, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the server's crash, not a core of this stub
    os.kill(os.getpid(), -code)
    raise SystemExit(128 - code)  # a signal that does not kill (ignored in the server only): a shell's


if __name__ == "__main__":
    main()
