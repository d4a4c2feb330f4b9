"""The kernel template's own side: import a kernel's modules once, then fork kernels (stdlib only).

Embedded into a kernel's launch code (`kernel_bridge.launcher`), like `group_watch`'s watch: the
kernel's interpreter may not be able to import kernel_bridge. Run as `<launch file> --template <fd>`
(`kernel_bridge.kernel_template` starts it), the launch code calls `_template_serve(fd)`, which:

1. imports what a kernel's start imports (ipykernel, IPython, zmq, tornado, ...) -- most of a kernel's
   start-up CPU -- with debugpy hidden as the launch code hides it;
2. makes itself non-dumpable, so no process of the same user can ptrace code into what later
   kernels are forked from;
3. serves requests on `fd` (a SOCK_SEQPACKET socket to the server): one JSON message each, the
   kernel's stdout and stderr attached as descriptors. It forks; the child leads a new session,
   takes those descriptors and /dev/null as stdin, enters the working directory, takes the
   environment and argv, and *returns* from `_template_serve`, so the launch code goes on to run
   the kernel exactly as a launched one. The template replies `{"started": id, "pid": pid}` with a
   pidfd of the child attached once the child is set up (so the child's process group exists when
   the server learns its pid), `{"failed": id, "error": text}` otherwise, and `{"exited": pid,
   "code": code}` when it reaps a child (`subprocess` convention: -N for signal N).

It exits when the server's end closes (the server ended, even by SIGKILL); every kernel it forked
watches it (`ParentWatch`) and ends its group then, as a launched kernel does when the server goes.
"""

from __future__ import annotations  # dropped when embedded: the launch code starts with its own

import json
import os
import select
import socket
import sys
import threading
from collections.abc import Sequence
from typing import Any

# What a launched kernel has imported once it answers (measured: 21 of its 477 modules were missing
# from ipykernel's app alone), and no more: a cell sees the modules a launched kernel would have. A
# module missing here is imported by the kernel itself after the fork, as before.
_TEMPLATE_IMPORTS = (
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "ipykernel.iostream",
    "ipykernel.heartbeat",
    "ipykernel.parentpoller",
    "ipykernel.eventloops",
    "ipykernel.displayhook",
    "ipykernel.comm",
    "ipykernel.debugger",
    "IPython.core.completer",
    "IPython.core.completerlib",
    "IPython.core.debugger",
    "IPython.core.interactiveshell",
    "IPython.core.logger",
    "IPython.core.oinspect",
    "IPython.core.profiledir",
    "IPython.core.history",
    "IPython.extensions.storemagic",
    "IPython.utils.wildcard",
    "comm",
    "faulthandler",
    "tornado.gen",
    "tornado.ioloop",
    "tornado.locks",
    "tornado.platform.asyncio",
    "tornado.queues",
    "zmq.eventloop.zmqstream",
    "unicodedata",
)
_PR_SET_DUMPABLE = 4


def _set_dumpable(value: int) -> None:
    """PR_SET_DUMPABLE on Linux (a non-dumpable process cannot be ptraced by its user's processes)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _template_import() -> None:
    import importlib

    hidden = sys.modules.get("debugpy")
    sys.modules["debugpy"] = None  # type: ignore[assignment]  # as the launch code's initialize hides it: no debugger
    try:
        for name in _TEMPLATE_IMPORTS:
            try:
                importlib.import_module(name)
            except Exception:  # an interpreter without it: the kernel meets that itself
                pass
    finally:
        if hidden is None:
            del sys.modules["debugpy"]
        else:
            sys.modules["debugpy"] = hidden


def _template_send(channel: socket.socket, message: dict[str, object], fds: Sequence[int] = ()) -> None:
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(channel, [data], list(fds))
    else:
        channel.send(data)


def _template_child(request: dict[str, Any], fds: list[int], ready: int) -> None:
    """In the forked child: become the kernel `request` describes, or exit 1 saying why."""
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in {null, *fds}:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [sys.argv[0], *request["args"]]
        _set_dumpable(1)
        os.write(ready, b"ok")
        os.close(ready)
    except Exception as exc:
        try:
            os.write(ready, f"{type(exc).__name__}: {exc}".encode()[:4000])
        finally:
            os._exit(1)


def _template_fork(
    channel: socket.socket, request: dict[str, Any], fds: list[int], children: dict[int, int]
) -> dict[str, Any] | None:
    """Fork one kernel for `request`; in the parent, reply and remember the child's pidfd."""
    if threading.active_count() != 1:  # a fork copies only this thread: refuse rather than hang
        _template_send(channel, {"failed": request.get("id"), "error": "the template runs threads"})
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        channel.close()
        for pidfd in children:
            os.close(pidfd)
        os.close(read_end)
        _template_child(request, fds, write_end)
        return request
    os.close(write_end)
    for fd in fds:
        os.close(fd)
    said = b""
    while True:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        said += chunk
    os.close(read_end)
    pidfd = os.pidfd_open(pid)
    children[pidfd] = pid
    if said == b"ok":
        _template_send(channel, {"started": request.get("id"), "pid": pid}, [pidfd])
    else:
        _template_send(channel, {"failed": request.get("id"), "error": said.decode(errors="replace")})
    return None


def _template_serve(fd: int) -> None:
    """The template's loop; returns (in a forked child only) once that child is a kernel to run."""
    _template_import()
    _set_dumpable(0)
    channel = socket.socket(fileno=fd)
    children: dict[int, int] = {}
    while True:
        ready, _, _ = select.select([channel.fileno(), *children], [], [])
        for pidfd in ready:
            if pidfd in children:
                pid = children.pop(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                _template_send(channel, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})
        if channel.fileno() not in ready:
            continue
        try:
            data, fds, _flags, _address = socket.recv_fds(channel, 1 << 20, 2)
        except OSError:
            data, fds = b"", []
        if not data:
            os._exit(0)  # the server is gone: each forked kernel's parent watch ends it
        try:
            request = json.loads(data)
            if len(fds) != 2 or not isinstance(request.get("args"), list):
                raise ValueError("a request takes args, env, cwd and two descriptors")
        except ValueError as exc:
            for stray in fds:
                os.close(stray)
            _template_send(channel, {"failed": None, "error": str(exc)})
            continue
        if _template_fork(channel, request, fds, children) is not None:
            return
