"""Starting one local kernel process: the provisioner seam.

`start_local_kernel` is the only place that knows how a kernel process comes to exist; a gateway
launcher (Jupyter Kernel Gateway) would provide the same `RunningKernel` surface.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq
from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

from host_base.private_files import private_dir, write_atomic
from kernel_bridge import group_watch, kernel_template, reaper
from kernel_bridge.errors import KernelStartError
from kernel_bridge.kernel_manager import ExitAwareKernelManager
from kernel_bridge.snapshot import SnapshotPaths

log = logging.getLogger(__name__)

# Measured here: a cold start is 0.6 s on an idle 2-core machine; others may load it heavily.
DEFAULT_STARTUP_TIMEOUT = 60.0
_SPEC_NAME = "continual-acp-python"


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    python: Path
    cwd: Path
    env: dict[str, str]
    runtime_dir: Path
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT


class RunningKernel:
    """A started kernel process and a connected client."""

    def __init__(self, km: AsyncKernelManager, client: AsyncKernelClient, pid: int, log_path: Path) -> None:
        self.km = km
        self.client = client
        self.pid = pid
        self.log_path = log_path
        self._closed = False
        self._silent_since: float | None = None

    # A kernel elsewhere (a gateway's) sees other paths: the session asks these before using one.
    shares_filesystem = True
    # The only workspace this kernel can serve (a sandbox binds it at start); None: any.
    workspace: Path | None = None

    def kernel_cwd(self, cwd: Path) -> str:
        """The working directory to give the kernel for the session's `cwd`."""
        return str(cwd)

    def kernel_snapshot(self, paths: SnapshotPaths) -> SnapshotPaths:
        """Where the kernel reads and writes the session's snapshot (its own filesystem)."""
        return paths

    def before_restore(self, paths: SnapshotPaths) -> None:
        """Host side, before a restore: bring the session's snapshot to `kernel_snapshot(paths)`."""

    def after_snapshot(self, paths: SnapshotPaths) -> None:
        """Host side, after a snapshot: bring it from `kernel_snapshot(paths)` to the session's."""

    def describe_exit(self) -> str:
        """How the kernel ended, for the cell that was running ("exit code N")."""
        return f"exit code {self.exit_code()}"

    def exit_code(self) -> int | None:
        """The kernel process's exit code, or None while it runs (or when its process is not local)."""
        process = getattr(self.km.provisioner, "process", None)
        code = process.poll() if process is not None else None
        return int(code) if code is not None else None

    def heartbeat_silence(self) -> float:
        """Seconds the kernel has failed every heartbeat check in a row (0 while it answers).

        Catches a kernel that is alive as a process but gone as a kernel (stopped, wedged below
        Python: ipykernel answers heartbeats from a zmq thread that does not need the GIL), and a
        kernel whose process this host cannot see (a launcher that starts kernels elsewhere).
        """
        now = time.monotonic()
        try:
            channel = self.client.hb_channel
            beating = channel.is_beating() if channel.is_alive() else True
        except Exception as exc:  # a closed client: no verdict from the heartbeat
            log.debug("heartbeat check failed: %s", exc)
            beating = True
        if beating:
            self._silent_since = None
            return 0.0
        if self._silent_since is None:
            self._silent_since = now
        return now - self._silent_since

    async def interrupt(self) -> None:
        # Signal interrupt mode: SIGINT to the kernel's process group.
        await self.km.interrupt_kernel()

    def log_tail(self, chars: int = 2000) -> str:
        """The last `chars` characters of the kernel's stdout/stderr log (for error messages)."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return ""

    async def kill(self) -> None:
        """Kill now (process group included) and release the connection."""
        if self._closed:
            return
        self._closed = True
        reaper.kill_group(self.pid)
        reaper.forget(self.pid)
        try:
            self.client.stop_channels()
            # shutdown_kernel also removes the connection file and ipc sockets.
            await self.km.shutdown_kernel(now=True)
        except Exception as exc:  # the process is gone already; only file cleanup can fail here
            log.warning("cleaning up after killed kernel %s failed: %s", self.pid, exc)

    async def shutdown(self, timeout: float = 3.0) -> None:
        """Polite shutdown request, bounded by `timeout`, then kill."""
        if self._closed:
            return
        try:
            self.km.shutdown_wait_time = timeout
            self.client.stop_channels()
            await self.km.shutdown_kernel(now=False)
        except Exception as exc:  # the group kill below still ends it
            log.warning("polite shutdown of kernel %s failed (%s); killing it", self.pid, exc)
        self._closed = True
        reaper.kill_group(self.pid)
        reaper.forget(self.pid)


# The provisioner seam: how a kernel comes to exist for a LaunchSpec.
Launcher = Callable[[LaunchSpec], Awaitable[RunningKernel]]

# ipykernel's launcher with two changes.
# 1. The iopub socket never drops messages. With zmq's default send high-water mark (1,000
#    messages) a burst of flushed prints from the kernel overran the queue whenever this process was
#    slow to drain it (measured here under load: 1,750 of 3,000 lines lost), and a dropped `idle`
#    status left the cell hanging. Unsent output is held by the kernel instead.
# 2. When the server dies without running any cleanup (SIGKILL), ipykernel's parent watch ends the
#    kernel with os._exit, which orphans whatever the kernel started (`%%bash` jobs, test runners,
#    `subprocess.Popen`). The kernel leads its own process group, so it runs the shared group watch
#    instead (`group_watch.ParentWatch`, its source embedded: the kernel's interpreter may not be
#    able to import kernel_bridge), which kills the group -- or only exits, as ipykernel's did, when
#    the kernel does not lead its group (a sandbox wrapper does).
_KERNEL_APP_CODE = """\
import os
import sys

# Before anything else runs: a root server's kernel holds no capability (group_watch.drop_capabilities).
_problem = drop_capabilities()
if _problem is not None:
    sys.stderr.write("continual-acp kernel: " + _problem + "\\n")

import zmq
from ipykernel.ipkernel import IPythonKernel
from ipykernel.kernelapp import IPKernelApp
from traitlets import Type


class ContinualAcpKernel(IPythonKernel):
    def _process_children(self):
        # At shutdown ipykernel signals the children in the kernel's process group until none is
        # left, for up to ~15 s: the server kills the kernel after 1 s. A child that has ended but
        # that nothing waited for (a cell's `subprocess.Popen`) stays listed as a zombie, which no
        # signal ends, so every such kernel took the whole second to stop. Ours are reaped here and
        # zombies are not counted.
        children = []
        for child in super()._process_children():
            try:
                zombie = child.status() == "zombie"
            except Exception:  # ended and reaped meanwhile
                continue
            if not zombie:
                children.append(child)
                continue
            try:
                os.waitpid(child.pid, os.WNOHANG)
            except ChildProcessError:
                pass  # not our child: its own parent reaps it
        return children


class ContinualAcpKernelApp(IPKernelApp):
    kernel_class = Type(ContinualAcpKernel, klass="ipykernel.kernelbase.Kernel")

    def initialize(self, argv=None):
        # The Jupyter debug protocol is never served (no ACP client speaks it), yet ipykernel loads
        # the debugger's pydevd while it sets up when debugpy is installed: a quarter of a kernel's
        # start-up CPU. Hidden meanwhile, so the kernel reports no debugger; a cell can still
        # import debugpy.
        hidden = sys.modules.get("debugpy")
        sys.modules["debugpy"] = None
        try:
            super().initialize(argv)
        finally:
            if hidden is None:
                del sys.modules["debugpy"]
            else:
                sys.modules["debugpy"] = hidden

    def init_iopub(self, context):
        context.setsockopt(zmq.SNDHWM, 0)
        super().init_iopub(context)

    def init_poller(self):
        super().init_poller()
        parent = self.parent_handle
        if sys.platform != "win32" and parent and parent != 1:
            if os.getppid() == parent:
                self.poller = ParentWatch(parent)
            elif _TEMPLATE is not None and os.getppid() == _TEMPLATE:
                # Forked by the kernel template, which ends when the server does: watch the template.
                self.poller = ParentWatch(_TEMPLATE)


_TEMPLATE = None  # in a kernel forked from a template (kernel_bridge.kernel_template): its pid

# Not the launch's own directory on the import path: "" under `-c`, the spec directory when run as
# the file beside kernel.json (neither is the workspace's, and neither was ever importable from).
if sys.path and sys.path[0] in ("", os.path.dirname(os.path.abspath(sys.argv[0]))):
    del sys.path[0]
if len(sys.argv) == 3 and sys.argv[1] == "--template":
    _TEMPLATE = os.getpid()
    _template_serve(int(sys.argv[2]))  # returns only in a forked kernel, set up as a launch would be
ContinualAcpKernelApp.launch_instance()
"""
_LAUNCH_CODE = group_watch.embeddable_source() + kernel_template.embeddable_source() + _KERNEL_APP_CODE
# The launch code as a file beside its kernel.json, for a kernel outside any sandbox: one short
# path in `ps` instead of hundreds of lines of `-c` source. Written from `_LAUNCH_CODE` (read when
# this module loaded) at every kernel start, into the same private spec directory as kernel.json,
# so it is trusted exactly as kernel.json is. A sandboxed kernel (landlock, bubblewrap) keeps the
# code in `-c`: its spec directory is in the kernel's own directory, which the kernel may write
# (a restart would run what a cell left there), and a sandbox may not show other host paths.
_LAUNCH_FILE = "continual_acp_ipykernel.py"


def _write_spec(
    runtime_dir: Path,
    python: Path,
    name: str = _SPEC_NAME,
    argv_prefix: Sequence[str] = (),
    interrupt_mode: str = "signal",
) -> Path:
    spec_root = private_dir(runtime_dir / "kernelspecs")
    spec_dir = private_dir(spec_root / name)
    if argv_prefix:
        launch = ["-c", _LAUNCH_CODE]
    else:
        # Replaced whole, never rewritten in place: a kernel started a moment ago from the same spec
        # directory may be reading it now.
        launch_file = spec_dir / _LAUNCH_FILE
        write_atomic(launch_file, _LAUNCH_CODE, sync=False)  # rewritten at every start: no fsync
        launch = [str(launch_file)]
    spec = {
        "argv": [
            *argv_prefix,
            # The launch seam's capability drop before the interpreter starts: its start-up runs
            # site-packages code (`.pth`, `sitecustomize`) that a workspace venv controls, before the
            # launch code below could drop them. (bubblewrap drops them itself; harmless there.)
            *group_watch.exec_argv(embedded=bool(argv_prefix)),  # a sandbox may not show this file
            str(python),
            *launch,
            "-f",
            "{connection_file}",
            # No sqlite history file per kernel: faster start, nothing left behind.
            "--HistoryManager.enabled=False",
        ],
        "display_name": "continual-acp",
        "language": "python",
        "interrupt_mode": interrupt_mode,
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    return spec_root


async def start_local_kernel(
    spec: LaunchSpec,
    *,
    argv_prefix: Sequence[str] = (),
    interrupt_mode: str = "signal",
    templates: kernel_template.KernelTemplates | None = None,
) -> RunningKernel:
    """Start a kernel over ipc (tcp on 127.0.0.1 where ipc is missing) and wait until it answers.

    `argv_prefix` wraps the kernel command (a sandbox: `bwrap ... --`); a wrapped kernel that
    signals cannot reach is interrupted by message (`interrupt_mode="message"`). With `templates`,
    an unwrapped kernel of this server's own interpreter is forked from a template (`kernel_template`).
    """
    runtime = private_dir(spec.runtime_dir)
    if not spec.cwd.is_dir():
        raise KernelStartError(f"kernel working directory does not exist: {spec.cwd}")
    tag = secrets.token_hex(4)
    # A wrapped kernel gets a spec of its own: another kernel may be starting with another prefix.
    name = f"{_SPEC_NAME}-{tag}" if argv_prefix else _SPEC_NAME
    spec_root = _write_spec(runtime, spec.python, name, argv_prefix, interrupt_mode)
    ksm = KernelSpecManager(kernel_dirs=[str(spec_root)])
    options: dict[str, Any] = {
        "kernel_name": name,
        "kernel_spec_manager": ksm,
        "connection_file": str(runtime / f"kernel-{tag}.json"),
    }
    if sys.platform != "win32":
        # ipc sockets live beside the 0600 connection file in the 0700 runtime dir.
        options.update(transport="ipc", ip=str(runtime / f"k-{tag}"))
    else:
        options.update(transport="tcp", ip="127.0.0.1")
    km = ExitAwareKernelManager(**options)
    if (
        templates is not None
        and not argv_prefix
        and os.path.abspath(spec.python) == os.path.abspath(sys.executable)
    ):
        km.kernel_id = str(uuid.uuid4())
        provisioner = kernel_template.TemplateProvisioner(
            kernel_id=km.kernel_id, kernel_spec=km.kernel_spec, parent=km
        )
        provisioner.use_templates(
            templates, str(spec_root / name / _LAUNCH_FILE), runtime, spec.startup_timeout
        )
        km.provisioner = provisioner
    log_path = runtime / f"kernel-{tag}.log"
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    log_file = os.fdopen(log_fd, "ab")
    try:
        await km.start_kernel(env=spec.env, cwd=str(spec.cwd), stdout=log_file, stderr=log_file)
    except BaseException as exc:
        # Cancelled or failed after the process was spawned: nobody else knows its pid.
        started = getattr(km.provisioner, "process", None)
        if started is not None:
            reaper.kill_group(int(started.pid))
        if isinstance(exc, FileNotFoundError):
            raise KernelStartError(f"could not run kernel interpreter {spec.python}: {exc}") from exc
        if isinstance(exc, Exception):
            raise KernelStartError(f"could not start a kernel with {spec.python}: {exc}") from exc
        raise
    finally:
        log_file.close()
    process = getattr(km.provisioner, "process", None)
    pid = int(process.pid) if process is not None else -1
    if pid > 0:
        reaper.track(pid)
    client = km.client()
    client.allow_stdin = False
    # No receive high-water mark: with the default (1,000) a flood of output while our event loop
    # is busy made zmq drop iopub messages -- the idle status among them, which stalled the cell.
    # zmq's I/O thread drains the kernel's PUB socket into this process regardless of the loop.
    client.context.setsockopt(zmq.RCVHWM, 0)
    client.start_channels()
    kernel = RunningKernel(km, client, pid, log_path)
    try:
        await client.wait_for_ready(timeout=spec.startup_timeout)
    except BaseException as exc:
        tail = kernel.log_tail()
        await kernel.kill()
        if not isinstance(exc, RuntimeError | TimeoutError):
            raise  # cancelled: the half-started kernel is gone, nothing to report
        raise KernelStartError(
            f"kernel started with {spec.python} did not become ready ({exc}). "
            f"Is ipykernel installed for that interpreter? Kernel log tail:\n{tail}"
        ) from exc
    with contextlib.suppress(OSError):
        os.chmod(km.connection_file, 0o600)
    return kernel
