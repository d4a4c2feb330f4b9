"""The suite's server zygote: imports what every server imports, then forks servers on request.

Test infrastructure only (tests/acp_server/server_zygote.py starts one per pytest worker). A server
costs ~2-3 s of CPU before it does anything a test looks at, almost all of it imports (`acp.schema`,
`openai`, agent_core, jupyter_client); the suite starts hundreds of servers on 2 cores. A server
forked from this process starts with those modules loaded and then runs exactly what `python -m
acp_server` runs (`runpy`, `__main__`), with the test's argv, environment, working directory and
standard streams, and exits through the interpreter's own shutdown.

What a forked server does not reproduce, so the tests of it launch with exec (server_zygote.py):
its own import cost and import stalls, `/proc/<pid>/environ` and `/proc/<pid>/cmdline` (the
zygote's), and a parent that is the test process.

Protocol, one Unix stream connection per server: the client sends one JSON line `{argv, env, cwd}`
with the server's stdin, stdout and stderr as SCM_RIGHTS; the zygote answers `pid <n>\\n` once the
child exists and `exit <returncode>\\n` (Popen's convention: -N for signal N) when it has reaped it.
A request with `"owned": true` (zygote_launch.py, a foreign client's server command) ties the server
to its connection: the client may send `signal <n>\\n` lines, which the zygote sends on to the server
(it holds the server's pidfd until it has reaped it, so a signal never reaches a reused pid), and when
the connection closes before the server exits (the launcher was killed), the zygote kills the server,
as a kill of an exec'd server's process group would have; so does the zygote's own exit. The zygote exits when its own stdin (a pipe from the pytest worker) closes.
"""

from __future__ import annotations

import gc
import json
import os
import selectors
import signal
import socket
import sys
from typing import Any

_MAX_REQUEST = 1 << 20


def _preload() -> None:
    # In the order the server itself imports them (acp_server/cli.py main, server.py, wire.py).
    from acp_server.process.import_costs import skip_unused_heavy_imports

    skip_unused_heavy_imports()
    import acp_server.cli
    import acp_server.harness.methods
    import acp_server.protocol.wire as wire
    import acp_server.server
    import acp_server.sessions.extensions
    import acp_server.sessions.methods

    wire._import_now()  # the dispatcher (jsonrpcserver) and acp.schema, as its import thread does
    import jupyter_client
    import openai

    import agent_core.agent
    import agent_core.autonomy.controller
    import agent_core.refinement.attach
    import agent_core.subagents
    import kernel_bridge.pool
    import skills.loader

    # Building a model client imports its HTTP stack (anyio, h11, httpcore, truststore); no request.
    openai.AsyncOpenAI(api_key="preload", base_url="http://127.0.0.1:9/v1")

    # What a forked server still imported on its first session and turn (measured: sys.modules after
    # fork against before): the start path's own modules, the session's and the v2 dialect's, the
    # trust checks, and the model client's HTTP stack (above). ~0.1 s of CPU per server, hundreds of
    # servers.
    import acp_server.process.bytecode_cache
    import acp_server.process.early_initialize
    import acp_server.process.early_session
    import acp_server.process.watchdog
    import acp_server.sessions.quiescence_publisher
    import acp_server.sessions.system_prompt_param
    import acp_server.v2.builders
    import acp_server.v2.lifecycle
    import acp_server.v2.switch
    import agent_core.control_plane.prompt_checks
    import agent_core.fresh_session
    import agent_core.history.ownership
    import agent_core.subagents.host_ops
    import agent_core.trust.entry_anchors
    import agent_core.trust.entry_counters
    import agent_core.trust.host_call_policy
    import agent_core.trust.project_scope
    import agent_core.trust.skill_check
    import agent_core.trust.skill_check_cell
    import kernel_bridge.hardening

    del acp_server, agent_core, jupyter_client, kernel_bridge, openai, skills


def _read_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, _MAX_REQUEST, 3)
    while not data.endswith(b"\n"):
        more = conn.recv(_MAX_REQUEST)
        if not more:
            raise EOFError("the request ended before its newline")
        data += more
    return json.loads(data), list(fds)


def _returncode(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _serve(listener: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """Fork servers until stdin closes (returns None), or return the request in a forked child."""
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, ("listen", None))
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, ("stdin", None))
    owned: dict[int, int] = {}  # pid -> pidfd of the live servers whose connection owns them
    watched: dict[int, socket.socket] = {}  # pid -> its owning connection, while the selector has it
    unread: dict[int, bytes] = {}  # pid -> the start of a line its connection has not finished
    while True:
        for key, _ in selector.select():
            kind, payload = key.data
            if kind == "stdin":
                if not os.read(sys.stdin.fileno(), 4096):
                    for pidfd in owned.values():
                        _kill(pidfd)
                    return None
            elif kind == "owner":
                pid = payload
                if pid not in watched:
                    continue  # reaped earlier in this batch
                chunk = _receive(watched[pid])
                if not chunk:
                    # The launcher is gone (killed): its server goes too, as in its process group.
                    selector.unregister(watched.pop(pid))
                    _kill(owned[pid])
                    continue
                *lines, unread[pid] = (unread.get(pid, b"") + chunk).split(b"\n")
                for line in lines:
                    word, _, number = line.decode(errors="replace").partition(" ")
                    if word == "signal" and number.isdigit():
                        _kill(owned[pid], int(number))
            elif kind == "listen":
                conn, _ = listener.accept()
                try:
                    request, fds = _read_request(conn)
                except (OSError, ValueError, EOFError) as exc:
                    conn.sendall(f"error {type(exc).__name__}: {exc}\n".encode())
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    return request, fds
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                selector.register(pidfd, selectors.EVENT_READ, ("child", (pid, conn)))
                conn.sendall(f"pid {pid}\n".encode())
                if request.get("owned"):
                    owned[pid] = pidfd
                    watched[pid] = conn
                    selector.register(conn, selectors.EVENT_READ, ("owner", pid))
            else:  # a child exited
                pid, conn = payload
                selector.unregister(key.fd)
                owned.pop(pid, None)
                unread.pop(pid, None)
                if pid in watched:
                    selector.unregister(watched.pop(pid))
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                try:
                    conn.sendall(f"exit {_returncode(status)}\n".encode())
                except OSError:
                    pass
                conn.close()


def _kill(pidfd: int, signum: int = signal.SIGKILL) -> None:
    try:
        signal.pidfd_send_signal(pidfd, signum)
    except (ProcessLookupError, ValueError):
        pass  # already gone (or no such signal)


def _receive(conn: socket.socket) -> bytes:
    """What the peer sent; b"" once it has closed (EOF or a reset)."""
    try:
        return conn.recv(4096)
    except OSError:
        return b""


def _become_server(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: take the test's streams, environment and cwd, then run the server."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)  # inheritable: a server's child gets 0-2 as from exec
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # close_range(2): the zygote's sockets, the rest
    # sys.stdin/stdout/stderr stay the interpreter's own objects: they wrap fds 0-2, which are now
    # the test's pipes (the zygote never read or buffered through them).
    os.environ.clear()
    os.environ.update(request["env"])
    if request.get("cwd"):
        os.chdir(request["cwd"])
    sys.path[0] = os.getcwd()  # `python -m` puts the working directory first
    argv = list(request["argv"])
    if argv[1:3] != ["-m", "acp_server"]:
        raise SystemExit(f"the zygote runs `python -m acp_server ...` only, not {argv!r}")
    sys.argv = ["-m", *argv[3:]]
    import runpy

    runpy.run_module("acp_server", run_name="__main__", alter_sys=True)


def main() -> None:
    path = sys.argv[1]
    _preload()
    # What the preload made lives as long as any server: frozen out of the cyclic collector's sight.
    # A forked server's full collections otherwise walk it, writing to every page of it, and each
    # write copies a page the fork shared: measured side by side on prompt-turn files, the forked
    # servers' CPU fell by about a quarter. (An exec'd server gains nothing measurable from a freeze:
    # its pages are its own.)
    gc.collect()
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    forked = _serve(listener)
    if forked is None:
        return
    listener.close()
    _become_server(*forked)


if __name__ == "__main__":
    main()
