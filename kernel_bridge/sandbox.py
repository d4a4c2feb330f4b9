"""`SandboxLauncher`: a local kernel that can write only its workspace, with no network by default.

Tiers, probed once at first use, best first:

1. **bubblewrap** (`bwrap`): the kernel runs in new mount, pid and (unless `network=True`) network
   namespaces. `/` is read-only; writable are the session's workspace (its cwd), the pool's
   runtime dir (ipc sockets, connection file), a private `/tmp`, and a snapshot directory of the
   session. Read-only again on top: the workspace's `.git`, the server's data dir (harness,
   sessions) and any `protected` path. ZMQ runs over ipc sockets in the bound runtime dir; SIGINT
   from outside does not reach into the pid namespace, so the kernelspec says
   `interrupt_mode = "message"` and jupyter_client sends `interrupt_request` on the control channel;
   `JPY_PARENT_PID` (a pid of another namespace) is unset and `--die-with-parent` ends the sandbox
   with the server.
2. **none**: no tier works here. The kernel is an ordinary local one and `guarantees` says so
   (`confined=False`, `approval_required=True`): agent_core must then ask approval for every cell,
   never run them silently unconfined. (Landlock + seccomp is not implemented: see the README.)
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kernel_bridge.guarantees import KernelGuarantees
from kernel_bridge.launcher import LaunchSpec, RunningKernel, start_local_kernel
from kernel_bridge.output import private_dir
from kernel_bridge.snapshot import SnapshotPaths

log = logging.getLogger(__name__)

SANDBOX_SNAPSHOT_DIR = "sandbox-kernel"  # inside the session dir: the only part of it the kernel writes


@dataclass(frozen=True, slots=True)
class Probe:
    """Whether a tier works on this machine, and why not."""

    tier: str
    ok: bool
    reason: str = ""


def probe_bubblewrap(network: bool = False) -> Probe:
    """Run `bwrap` once with the namespaces the sandbox needs; the reason says why it cannot."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Probe("bubblewrap", False, "bubblewrap is not installed (apt-get install bubblewrap)")
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid"]
    if not network:
        argv.append("--unshare-net")
    argv += ["--die-with-parent", "--", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Probe("bubblewrap", False, f"bwrap could not run: {exc}")
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip()[:300]
        return Probe("bubblewrap", False, f"bwrap cannot create namespaces here: {detail}")
    return Probe("bubblewrap", True)


def bubblewrap_argv(
    spec: LaunchSpec, *, network: bool, protected: tuple[Path, ...], snapshot_dir: Path | None
) -> list[str]:
    """The `bwrap ... --` prefix that confines one kernel."""
    bwrap = shutil.which("bwrap") or "bwrap"
    cwd = spec.cwd.resolve()
    runtime = spec.runtime_dir.resolve()
    argv = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not network:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    argv += ["--bind", str(cwd), str(cwd)]
    read_only = [cwd / ".git", *protected]
    for path in read_only:
        if path.exists():
            real = path.resolve()
            argv += ["--ro-bind", str(real), str(real)]
    # Writable last, so they win over a protected parent (the snapshot dir is in the data dir).
    argv += ["--bind", str(runtime), str(runtime)]
    if snapshot_dir is not None:
        argv += ["--bind", str(snapshot_dir), str(snapshot_dir)]
    ipython_dir = private_dir(runtime / "ipython")
    argv += ["--setenv", "IPYTHONDIR", str(ipython_dir), "--setenv", "TMPDIR", "/tmp"]
    argv += ["--unsetenv", "JPY_PARENT_PID", "--chdir", str(cwd), "--"]
    return argv


class SandboxKernel(RunningKernel):
    """A bubblewrapped kernel: snapshots go to the one writable directory of the session dir."""

    def kernel_snapshot(self, paths: SnapshotPaths) -> SnapshotPaths:
        return SnapshotPaths.at(paths.directory / SANDBOX_SNAPSHOT_DIR)


class SandboxLauncher:
    """Starts confined local kernels; a `Launcher` for `KernelPool(launcher=...)`.

    Each kernel is bound to its session's workspace at start, so none are warmed ahead
    (`per_session`). `guarantees` reports the tier in force after the first probe.
    """

    per_session = True

    def __init__(
        self, *, network: bool = False, protected: tuple[Path, ...] = (), tier: str = "auto"
    ) -> None:
        self.network = network
        self.protected = tuple(Path(p).expanduser() for p in protected)
        self.requested_tier = tier
        self._probe: Probe | None = None

    def probe(self) -> Probe:
        """The tier in force (probed once): bubblewrap, or "none" with the reason."""
        if self._probe is None:
            if self.requested_tier == "none":
                self._probe = Probe("none", False, "sandbox_tier = 'none' was configured")
            else:
                found = probe_bubblewrap(self.network)
                self._probe = found if found.ok else Probe("none", False, found.reason)
                if not found.ok:
                    log.warning("no sandbox tier works here (%s): every cell needs approval", found.reason)
        return self._probe

    @property
    def guarantees(self) -> KernelGuarantees:
        probe = self.probe()
        if probe.ok:
            return KernelGuarantees(
                "sandbox",
                where="a local process in a bubblewrap sandbox",
                confined=True,
                tier=probe.tier,
                network=self.network,
                notes=("read-only: the rest of the system, the workspace's .git, the server's data dir",),
            )
        return KernelGuarantees(
            "sandbox",
            where="a local process, NOT confined",
            confined=False,
            network=True,
            approval_required=True,
            notes=(f"sandbox unavailable: {probe.reason}",),
        )

    async def __call__(self, spec: LaunchSpec) -> RunningKernel:
        """Start one kernel in the best tier this machine has."""
        probe = self.probe()
        if not probe.ok:
            return await start_local_kernel(spec)
        snapshot_dir: Path | None = None
        if spec.snapshot_dir is not None:
            snapshot_dir = private_dir(spec.snapshot_dir / SANDBOX_SNAPSHOT_DIR).resolve()
        prefix = bubblewrap_argv(
            spec, network=self.network, protected=self.protected, snapshot_dir=snapshot_dir
        )
        kernel = await start_local_kernel(spec, argv_prefix=prefix, interrupt_mode="message")
        kernel.__class__ = SandboxKernel  # the same object, with the sandbox's snapshot location
        return kernel
