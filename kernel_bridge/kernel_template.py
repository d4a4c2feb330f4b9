"""Local kernels forked from a template that imported ipykernel once (host side).

A kernel's start is mostly imports: ipykernel, IPython, zmq, tornado -- ~0.4 CPU-s of the ~0.5 a
launched kernel costs, paid again by every kernel. `KernelTemplates` keeps one template process per
(interpreter, runtime dir, environment): the kernel's own launch file run with `--template`
(`template_kernelside`), started exactly as a kernel would be (same interpreter, capabilities
dropped before it starts, same environment), which imports those modules and then forks each new
kernel. The child becomes the kernel the launch would have started -- same argv after the launch
file, environment, working directory, its own session and process group, stdout/stderr to the
kernel's log -- and the server holds it through `ForkedProcess` (a pidfd, the exit code from the
template). `TemplateProvisioner` is jupyter_client's local provisioner launching that way.

Only for kernels of this server's own interpreter with no wrapper (a sandbox wraps its kernels in
`bwrap`/landlock and keeps launching them); anything the template cannot do (no pidfd on this
kernel, a template that died or could not start) falls back to launching, so a template is a
speed-up and never a new way to fail. What differs from a launched kernel, by design: its
`/proc/<pid>/cmdline` is the template's (`<launch file> --template <fd>`), its hash seed is the
template's, and it watches the template, not the server (the template ends when the server does).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.provisioning.local_provisioner import LocalProvisioner

log = logging.getLogger(__name__)

_KERNELSIDE = Path(__file__).with_name("template_kernelside.py")
_FUTURE = "from __future__ import annotations"


def embeddable_source() -> str:
    """The template's kernel-side code, to embed after `group_watch`'s in a kernel's launch code."""
    source = _KERNELSIDE.read_text(encoding="utf-8")
    lines = [line for line in source.splitlines() if not line.startswith(_FUTURE)]
    return "\n".join(lines) + "\n"


def forking_supported() -> bool:
    """Whether this host can hold a forked kernel (Linux with pidfds: Python 3.9+, Linux 5.3+)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


class TemplateUnavailable(Exception):
    """The template cannot fork this kernel (the caller launches it instead); `ended`: nor any other."""

    def __init__(self, message: str, *, ended: bool = True) -> None:
        super().__init__(message)
        self.ended = ended


class ForkedProcess:
    """The `subprocess.Popen` surface jupyter_client's local provisioner uses, for a forked kernel."""

    stdin: BinaryIO | None = None
    stdout: BinaryIO | None = None
    stderr: BinaryIO | None = None

    def __init__(self, template: KernelTemplate, pid: int, pidfd: int) -> None:
        self._template = template
        self.pid = pid
        self._pidfd: int | None = pidfd
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._template.exit_code(self.pid, self._pidfd)
            if self.returncode is not None:
                self._close_pidfd()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is not None:
            return self.returncode
        code = self._template.wait_exit(self.pid, self._pidfd, timeout)
        if code is None:
            raise subprocess.TimeoutExpired([str(self.pid)], timeout or 0.0)
        self.returncode = code
        self._close_pidfd()
        return code

    def exit_fd(self) -> int | None:
        """The kernel's pidfd (readable once it has exited), None once its exit is known."""
        return self._pidfd

    def send_signal(self, signum: int) -> None:
        # By pidfd: the kernel's pid is the template's child, reaped there, and may be reused.
        if self.returncode is None and self._pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _close_pidfd(self) -> None:
        pidfd, self._pidfd = self._pidfd, None
        if pidfd is not None:
            os.close(pidfd)


class _Pending:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: dict[str, Any] = {}
        self.pidfd: int | None = None
        self.abandoned = False


class KernelTemplate:
    """One template process and the channel to it; thread-safe."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, log_path: Path) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self._process = subprocess.Popen(
                [*argv, "--template", str(theirs.fileno())],
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
            os.close(log_fd)
        self.pid = self._process.pid
        self._channel = ours
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._pending: dict[int, _Pending] = {}
        self._exits: dict[int, int] = {}
        self._next_id = 0
        self._open = True
        self._reader = threading.Thread(target=self._read, name=f"kernel-template-{self.pid}", daemon=True)
        self._reader.start()

    @property
    def open(self) -> bool:
        return self._open

    def fork(
        self, args: Sequence[str], env: Mapping[str, str], cwd: str, output: int, timeout: float
    ) -> ForkedProcess:
        """A kernel forked from the template (blocking: call it from a worker thread); `output` is
        the descriptor of the kernel's log (its stdout and stderr). Raises TemplateUnavailable."""
        with self._lock:
            if not self._open:
                raise TemplateUnavailable("the kernel template has ended")
            self._next_id += 1
            request_id = self._next_id
            pending = self._pending[request_id] = _Pending()
        message = {"id": request_id, "args": list(args), "env": dict(env), "cwd": cwd}
        try:
            socket.send_fds(self._channel, [json.dumps(message).encode()], [output, output])
        except OSError as exc:
            self._forget(request_id)
            raise TemplateUnavailable(f"the kernel template did not take the request: {exc}") from exc
        if not pending.done.wait(timeout):
            with self._lock:
                pending.abandoned = True  # the reader kills the kernel should it come later
            raise TemplateUnavailable(f"the kernel template did not fork within {timeout:.0f} s")
        reply, pidfd = pending.reply, pending.pidfd
        if pidfd is None or not isinstance(reply.get("pid"), int):
            # A child that could not take the request (its cwd went away) leaves the template sound.
            ended = "failed" not in reply
            raise TemplateUnavailable(
                f"the kernel template could not fork: {reply.get('error', 'it ended')}", ended=ended
            )
        return ForkedProcess(self, int(reply["pid"]), pidfd)

    def exit_code(self, pid: int, pidfd: int | None) -> int | None:
        with self._lock:
            if pid in self._exits:
                return self._exits.pop(pid)
            if not self._open and (pidfd is None or _exited(pidfd)):
                return -signal.SIGKILL  # the template ended first: its kernels were killed with it
        return None

    def wait_exit(self, pid: int, pidfd: int | None, timeout: float | None) -> int | None:
        with self._changed:
            self._changed.wait_for(
                lambda: pid in self._exits or (not self._open and (pidfd is None or _exited(pidfd))),
                timeout,
            )
        return self.exit_code(pid, pidfd)

    def close(self, timeout: float = 5.0) -> None:
        """End the template (its channel closes; it exits) and reap it. Kernels it forked that still
        run end too (they watch it): close it after them."""
        with contextlib.suppress(OSError):
            self._channel.shutdown(socket.SHUT_RDWR)
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._reader.join(timeout)
        self._channel.close()

    def _forget(self, request_id: int) -> None:
        with self._lock:
            self._pending.pop(request_id, None)

    def _read(self) -> None:
        """The reader thread: replies to fork requests and the exits of forked kernels."""
        while True:
            try:
                data, fds, _flags, _address = socket.recv_fds(self._channel, 1 << 16, 1)
            except OSError:
                data, fds = b"", []
            if not data:
                break
            self._take(data, fds)
        with self._changed:
            self._open = False
            pending, self._pending = list(self._pending.values()), {}
            self._changed.notify_all()
        for waiting in pending:
            waiting.done.set()
        log.debug("kernel template %d ended", self.pid)

    def _take(self, data: bytes, fds: list[int]) -> None:
        try:
            message = json.loads(data)
            if not isinstance(message, dict):
                raise ValueError("not an object")
        except ValueError:
            log.warning("kernel template %d sent an unreadable message", self.pid)
            for fd in fds:
                os.close(fd)
            return
        if isinstance(message.get("exited"), int) and isinstance(message.get("code"), int):
            with self._changed:
                self._exits[message["exited"]] = message["code"]
                self._changed.notify_all()
            return
        request_id = message.get("started", message.get("failed"))
        with self._lock:
            waiting = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        pidfd = fds[0] if fds and "started" in message else None
        for extra in fds[1:] if pidfd is not None else fds:
            os.close(extra)
        if waiting is None:
            if message.get("failed") is None and "failed" in message:
                log.warning("kernel template %d refused a request: %s", self.pid, message.get("error"))
            if pidfd is not None:
                os.close(pidfd)
            return
        if waiting.abandoned and pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            os.close(pidfd)
            return
        waiting.reply, waiting.pidfd = message, pidfd
        waiting.done.set()


def _exited(pidfd: int) -> bool:
    readable, _, _ = select.select([pidfd], [], [], 0)
    return bool(readable)


class KernelTemplates:
    """The templates of one kernel backend, by (interpreter, runtime dir, environment)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._templates: dict[tuple[str, str, tuple[tuple[str, str], ...]], KernelTemplate] = {}
        self._broken: set[tuple[str, str, tuple[tuple[str, str], ...]]] = set()
        self._closed = False

    def get(self, argv: Sequence[str], env: Mapping[str, str], runtime_dir: Path) -> KernelTemplate | None:
        """The template for kernels launched as `argv` (up to the launch file) with `env`; started on
        first use. None when there is none to be had (this host, or it failed before)."""
        key = (json.dumps(list(argv)), str(runtime_dir), tuple(sorted(env.items())))
        with self._lock:
            if self._closed or key in self._broken:
                return None
            template = self._templates.get(key)
            if template is not None and template.open:
                return template
            if template is not None:  # it ended under its kernels: launch from now on
                self._broken.add(key)
                del self._templates[key]
                return None
            try:
                template = KernelTemplate(argv, env, runtime_dir, runtime_dir / "kernel-template.log")
            except OSError as exc:
                log.warning("no kernel template (%s); kernels are launched", exc)
                self._broken.add(key)
                return None
            self._templates[key] = template
            return template

    def mark_broken(self, template: KernelTemplate) -> None:
        with self._lock:
            for key, known in list(self._templates.items()):
                if known is template:
                    self._broken.add(key)
                    del self._templates[key]
        template.close(timeout=1.0)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            templates, self._templates = list(self._templates.values()), {}
        for template in templates:
            template.close()


class TemplateProvisioner(LocalProvisioner):
    """jupyter_client's local provisioner, forking the kernel from a template when it can."""

    templates: KernelTemplates | None = None
    launch_file = ""
    runtime_dir: Path | None = None
    fork_timeout = 60.0

    def use_templates(
        self, templates: KernelTemplates, launch_file: str, runtime_dir: Path, timeout: float
    ) -> None:
        """Fork from `templates` a kernel whose command runs `launch_file` (plain attributes: what
        jupyter_client configures through traits stays its own)."""
        self.templates, self.launch_file = templates, launch_file
        self.runtime_dir, self.fork_timeout = runtime_dir, timeout

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        process = await self._fork(cmd, kwargs)
        if process is None:
            return await super().launch_kernel(cmd, **kwargs)
        self.process = process  # type: ignore[assignment]  # the Popen surface it uses
        self.pid = process.pid
        self.pgid = process.pid  # the child made its own session before the template answered
        self.cwd = kwargs.get("cwd", Path.cwd())
        return self.connection_info

    async def _fork(self, cmd: list[str], kwargs: dict[str, Any]) -> ForkedProcess | None:
        import anyio

        templates = self.templates
        if templates is None or self.launch_file not in cmd or self.runtime_dir is None:
            return None
        split = cmd.index(self.launch_file) + 1
        env = dict(kwargs.get("env") or os.environ)
        env["JPY_PARENT_PID"] = str(os.getpid())  # what jupyter_client's launch adds
        output = kwargs.get("stdout")  # the kernel's log, a file: its stdout and stderr
        fileno = getattr(output, "fileno", None)
        if fileno is None or output is not kwargs.get("stderr"):
            return None
        descriptor = int(fileno())
        template = templates.get(cmd[:split], env, self.runtime_dir)
        if template is None:
            return None
        cwd = str(kwargs.get("cwd") or Path.cwd())
        try:
            return await anyio.to_thread.run_sync(
                template.fork, cmd[split:], env, cwd, descriptor, self.fork_timeout
            )
        except TemplateUnavailable as exc:
            log.warning("forking a kernel failed (%s); launching it instead", exc)
            if exc.ended:  # a template that ended or stalls forks nothing more
                await anyio.to_thread.run_sync(templates.mark_broken, template)
            return None
