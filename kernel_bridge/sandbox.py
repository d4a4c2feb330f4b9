"""`SandboxLauncher`: a local kernel that can write only its workspace, with no network by default.

Tiers, probed once at first use, best first:

1. **bubblewrap** (`bwrap`): the kernel runs in new mount, pid and (unless `network=True`) network
   namespaces. `/` is read-only; writable are the session's workspace (its cwd), the kernel's own
   directory in the pool's runtime dir (its ipc sockets, connection file and snapshot staging) and
   a private `/tmp`. Read-only again on top: the workspace's `.git`, the server's data dir (harness,
   sessions) and any `protected` path. The kernel writes its snapshot into its own directory and
   the host copies it to the session dir (and back before a restore), so the kernel never needs
   to write the data dir, and a kernel is bound only to its workspace: the pool warms kernels for
   the workspace of the last session. ZMQ runs over ipc sockets in the bound runtime dir; SIGINT
   from outside does not reach into the pid namespace, so the kernelspec says
   `interrupt_mode = "message"` and jupyter_client sends `interrupt_request` on the control channel;
   `JPY_PARENT_PID` (a pid of another namespace) is unset and `--die-with-parent` ends the sandbox
   with the server.
2. **landlock** (Landlock ABI >= 3 + seccomp, no namespaces needed; `landlock.py` restricts the
   process and execs the kernel): writes are allowed only beneath the kernel's own directory
   (ipc sockets, IPython dir, `TMPDIR`, snapshot staging), `/dev/null`, `/dev/shm`, and the
   workspace **split around** its `.git` and the protected paths (`landlock_writable`): Landlock
   rules grant whole subtrees and cannot subtract one, so the workspace root itself gets no rule
   and each entry beside `.git` gets its own. Consequence, said in the guarantees: a cell cannot
   create, delete or rename entries directly in the workspace root (subdirectories and existing
   files there are writable), entries added to the root after the kernel started stay read-only,
   and `/dev/pts` stays closed (writing another terminal could inject input), so `!cmd` runs
   through pipes (an IPython startup file in the kernel's own IPython dir) instead of a pty. No network: seccomp refuses IPv4/IPv6/packet
   sockets (UDP too, which Landlock does not cover) and io_uring. Signals cross (one pid namespace),
   so interrupts are signals.
3. **none**: no tier works here. The kernel is an ordinary local one and `guarantees` says so
   (`confined=False`, `approval_required=True`): agent_core must then ask approval for every cell,
   never run them silently unconfined.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import secrets
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from host_base.private_files import private_dir, write_atomic_with
from kernel_bridge import landlock
from kernel_bridge.backend import KernelBackend
from kernel_bridge.confinement import Confinement
from kernel_bridge.errors import KernelBridgeError, KernelStartError
from kernel_bridge.guarantees import KernelGuarantees
from kernel_bridge.launcher import LaunchSpec, RunningKernel, start_local_kernel
from kernel_bridge.snapshot import SnapshotPaths, untrusted_reason

log = logging.getLogger(__name__)

_STAGING = "snapshot"  # in the kernel's own directory: where it writes and reads its snapshot
# The workspace's control plane (gates, the project harness): the server's, never a cell's.
CONTROL_DIR = ".continual-acp"


def interpreter_paths() -> list[Path]:
    """Where this Python lives: its prefixes, the executable's real directory, every `sys.path`
    entry (resolved, existing, deduplicated, outermost first so a nested bind stays visible)."""
    raw = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), *sys.path]
    found: set[Path] = set()
    for item in raw:
        if not item:
            continue
        try:
            path = Path(item).resolve()
        except OSError:
            continue
        if path.exists():
            found.add(path if path.is_dir() else path.parent)
    return sorted(found, key=lambda p: (len(p.parts), str(p)))


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


def probe_landlock() -> Probe:
    """Whether this kernel has Landlock ABI >= 3 (and the seccomp filter knows the architecture)."""
    _, reason = landlock.abi_version()
    return Probe("landlock", not reason, reason)


def landlock_writable(directory: Path, excluded: Iterable[Path]) -> list[Path]:
    """The paths to grant so `directory` is writable except beneath `excluded`.

    A directory holding an excluded path gets no rule itself (a rule would cover the excluded
    path too); its other entries get one each, recursively. Symlinks get none: a write through
    one is checked where it points.
    """
    directory = directory.resolve()
    out = {Path(os.path.abspath(p)) for p in excluded}
    if directory in out:
        return []
    if not any(directory in p.parents for p in out):
        return [directory]
    granted: list[Path] = []
    for child in sorted(directory.iterdir()):
        if child.is_symlink() or child in out:
            continue
        granted += landlock_writable(child, out) if child.is_dir() else [child]
    return granted


# An IPython startup file for Landlock kernels: `!cmd` through pipes, its output written to the
# cell's stdout as it comes (ipykernel's own path needs a pty; `system_raw` writes to fd 1, whose
# forwarding can trail the cell's end and lose the output).
_NO_PTY = """\
def _continual_acp_piped(cmd):
    import subprocess, sys
    with subprocess.Popen(
        cmd, shell=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    ) as proc:
        try:
            for line in proc.stdout:
                sys.stdout.write(line.decode(errors="replace"))
        except BaseException:
            proc.kill()
            raise
        return proc.wait()


import ipykernel.zmqshell
ipykernel.zmqshell.system = _continual_acp_piped
del _continual_acp_piped
"""


def _landlock_fence(cwd: Path, *, network: bool, protected: tuple[Path, ...], own_dir: Path) -> list[str]:
    """`python landlock.py --write ... [--network]`: writes only beneath the workspace split around
    its `.git`, `.continual-acp/` and the protected paths, `own_dir`, `/dev/null` and `/dev/shm`."""
    cwd = cwd.resolve()
    excluded = [cwd / ".git", cwd / CONTROL_DIR, *(p.resolve() for p in protected)]
    writable = [*landlock_writable(cwd, excluded), own_dir]
    writable += [Path(p) for p in ("/dev/null", "/dev/shm") if os.path.exists(p)]
    argv = [sys.executable, "-I", "-S", landlock.__file__]
    for path in writable:
        argv += ["--write", str(path)]
    if network:
        argv.append("--network")
    return argv


def landlock_argv(
    spec: LaunchSpec, *, network: bool, protected: tuple[Path, ...], own_dir: Path
) -> list[str]:
    """The `python landlock.py ... --` prefix that confines one kernel (see `landlock.py`)."""
    tmp = private_dir(own_dir / "tmp")
    ipython_dir = private_dir(own_dir / "ipython")
    # `!cmd` runs through a pty by default, and /dev/pts stays closed (see the module docstring):
    # the kernel's IPython runs shell escapes with pipes instead (output still reaches the cell).
    startup = private_dir(private_dir(ipython_dir / "profile_default") / "startup")
    (startup / "00-continual-acp-no-pty.py").write_text(_NO_PTY, encoding="utf-8")
    argv = _landlock_fence(spec.cwd, network=network, protected=protected, own_dir=own_dir)
    argv += ["--setenv", f"TMPDIR={tmp}", "--setenv", f"IPYTHONDIR={ipython_dir}", "--"]
    return argv


def _bubblewrap_fence(
    cwd: Path, *, network: bool, protected: tuple[Path, ...], runtime: Path | None
) -> list[str]:
    """`bwrap ...`: `/` read-only, the workspace writable except its `.git`, `.continual-acp/` and
    the protected paths, a private `/tmp`, own pid/ipc/uts (and network) namespaces."""
    bwrap = shutil.which("bwrap") or "bwrap"
    cwd = cwd.resolve()
    argv = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if not network:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    # The private /tmp hides an interpreter (a venv, a clone) that lives under /tmp: bind its
    # prefixes back, read-only, on top of it.
    # (/tmp itself never: that would undo the private /tmp.)
    for prefix in interpreter_paths():
        if Path("/tmp") in prefix.parents:
            argv += ["--ro-bind", str(prefix), str(prefix)]
    if runtime is not None:
        # The pool's runtime dir read-only (the host bridge's socket is there: connecting needs no
        # write access), the kernel's own directory in it writable.
        argv += ["--ro-bind", str(runtime), str(runtime)]
    argv += ["--bind", str(cwd), str(cwd)]
    for path in (cwd / ".git", *protected):
        if path.exists():
            real = path.resolve()
            argv += ["--ro-bind", str(real), str(real)]
    control = cwd / CONTROL_DIR
    if control.is_dir() and not control.is_symlink():
        argv += ["--ro-bind", str(control), str(control)]
    else:
        # Not there yet: an empty read-only directory in its place, so a cell cannot create it
        # (bwrap makes the mount point; the server's own writes go to the real directory).
        argv += ["--tmpfs", str(control), "--remount-ro", str(control)]
    return argv


def bubblewrap_argv(
    spec: LaunchSpec, *, network: bool, protected: tuple[Path, ...], own_dir: Path, runtime: Path
) -> list[str]:
    """The `bwrap ... --` prefix that confines one kernel."""
    argv = _bubblewrap_fence(spec.cwd, network=network, protected=protected, runtime=runtime)
    argv += ["--bind", str(own_dir), str(own_dir)]  # last: it wins over a protected parent
    ipython_dir = private_dir(own_dir / "ipython")
    argv += ["--setenv", "IPYTHONDIR", str(ipython_dir), "--setenv", "TMPDIR", "/tmp"]
    argv += ["--unsetenv", "JPY_PARENT_PID", "--chdir", str(spec.cwd.resolve()), "--"]
    return argv


def command_confinement(
    tier: str, cwd: Path, *, network: bool, protected: tuple[Path, ...], own_dir: Path
) -> Confinement:
    """The prefix for `tier` ("bubblewrap" or "landlock"); `own_dir` is the command's own writable
    directory (its TMPDIR under Landlock, where `/tmp` is not private)."""
    if tier == "bubblewrap":
        argv = _bubblewrap_fence(cwd, network=network, protected=protected, runtime=None)
        argv += ["--setenv", "TMPDIR", "/tmp", "--unsetenv", "JPY_PARENT_PID"]
        argv += ["--chdir", str(cwd.resolve()), "--"]
        return Confinement(tier, tuple(argv), pid_namespace=True)
    if tier == "landlock":
        argv = _landlock_fence(cwd, network=network, protected=protected, own_dir=own_dir)
        argv += ["--setenv", f"TMPDIR={own_dir}", "--"]
        return Confinement(tier, tuple(argv), pid_namespace=False)
    raise ValueError(f"no confinement for sandbox tier {tier!r}")


def _copy_private(source: Path, target: Path) -> None:
    """Copy `source` over `target` atomically (temp file in the target's dir + rename), mode 0600.

    Streams the copy (`write_atomic` takes the bytes, and a snapshot can be as large as the cap);
    the temp name is the snapshot's, which `snapshot.remove_stale_temps` sweeps."""
    # The source is in the kernel's staging dir, which the sandboxed kernel writes: a symlink
    # planted there (to /proc/self/environ, to another session's state) must not be followed, and
    # a FIFO must not block the copy. Only a regular file, opened without following a link.
    src_fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(src_fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(source))
    except BaseException:
        os.close(src_fd)
        raise
    with os.fdopen(src_fd, "rb") as src:
        write_atomic_with(
            target,
            lambda out: shutil.copyfileobj(src, out),
            temp=target.with_name(f"{target.name}.tmp-{os.getpid()}"),
        )


class SandboxKernel(RunningKernel):
    """A bubblewrapped kernel: its snapshot is staged in its own directory, copied by the host."""

    staging: Path

    def kernel_snapshot(self, paths: SnapshotPaths) -> SnapshotPaths:
        return SnapshotPaths.at(self.staging)

    def after_snapshot(self, paths: SnapshotPaths) -> None:
        staged = SnapshotPaths.at(self.staging)
        private_dir(paths.directory)
        # The state first, then the manifest, like the kernel writes them: a crash in between
        # leaves the old manifest beside the new state, which restore does not depend on.
        try:
            for source, target in ((staged.state, paths.state), (staged.manifest, paths.manifest)):
                if source.is_file() or source.is_symlink():  # a link is refused by the copy
                    _copy_private(source, target)
        except OSError as exc:
            raise KernelBridgeError(
                f"copying the sandbox's snapshot to {paths.directory} failed: {exc}"
            ) from exc

    def before_restore(self, paths: SnapshotPaths) -> None:
        staged = SnapshotPaths.at(private_dir(self.staging))
        for source, target in ((paths.state, staged.state), (paths.manifest, staged.manifest)):
            if source.is_file() and untrusted_reason(source) is None:
                _copy_private(source, target)
            else:  # never restore a stale staged copy of an earlier session's state
                with contextlib.suppress(FileNotFoundError):
                    target.unlink()


def _landlock_tier(network: bool) -> Probe:
    return probe_landlock()  # the network setting changes the filter, not whether it works


_PROBES: dict[str, Callable[[bool], Probe]] = {"bubblewrap": probe_bubblewrap, "landlock": _landlock_tier}
_FIXES = {
    "bubblewrap": "install bubblewrap and allow unprivileged user namespaces",
    "landlock": "run on Linux >= 6.2 with Landlock enabled (lsm=...,landlock)",
}


class SandboxLauncher(KernelBackend):
    """Starts confined local kernels; a `Launcher` for `KernelPool(launcher=...)`.

    Each kernel is bound to one workspace at start (`binds_cwd`: the pool warms kernels for the
    workspace of the last session). `guarantees` reports the tier in force after the first probe.
    """

    binds_cwd = True
    local_interpreter = True  # the pool checks `python` has ipykernel (`KernelPool.check_backend`)

    def __init__(
        self, *, network: bool = False, protected: tuple[Path, ...] = (), tier: str = "auto"
    ) -> None:
        self.network = network
        self.protected = tuple(Path(p).expanduser() for p in protected)
        self.requested_tier = tier
        self._probe: Probe | None = None

    def probe(self) -> Probe:
        """The tier in force (probed once): bubblewrap, landlock, or "none" with the reasons.

        With `tier="bubblewrap"` or `"landlock"` a failed probe stays that tier's failed probe:
        kernels then do not start (`check` and the launch raise), never unconfined.
        """
        if self._probe is None:
            if self.requested_tier == "none":
                self._probe = Probe("none", False, "sandbox_tier = 'none' was configured")
            elif self.requested_tier in _PROBES:
                self._probe = _PROBES[self.requested_tier](self.network)
            else:
                reasons = []
                for probe in _PROBES.values():
                    found = probe(self.network)
                    if found.ok:
                        self._probe = found
                        break
                    reasons.append(f"{found.tier}: {found.reason}")
                else:
                    self._probe = Probe("none", False, "; ".join(reasons))
                    log.warning("no sandbox tier works here (%s): every cell needs approval", reasons)
        assert self._probe is not None
        return self._probe

    def _required_tier_missing(self) -> KernelStartError | None:
        probe = self.probe()
        if probe.ok or self.requested_tier not in _PROBES:
            return None
        return KernelStartError(
            f"kernel backend 'sandbox': sandbox_tier = '{self.requested_tier}' is configured but "
            f"{probe.reason}; {_FIXES[self.requested_tier]}, or set sandbox_tier = 'auto' "
            "(the best tier that works; with none, every cell needs approval)"
        )

    async def check(self) -> str:
        """Probe the tier off the event loop (once); raise `KernelStartError` when the configured
        tier cannot work. A failed explicit probe is forgotten, so the next check probes again."""
        if self._probe is None:
            await asyncio.to_thread(self.probe)
        error = self._required_tier_missing()
        if error is not None:
            self._probe = None
            raise error
        return self.guarantees.describe()

    def command_confinement(self, cwd: Path, own_dir: Path) -> Confinement | None:
        """The confinement this launcher's kernels get, for a workspace command in `cwd` (a gate, a
        skill check's process); None when no tier works (kernels are unconfined and every cell is
        approved). Raises `KernelStartError` when the configured tier cannot work: such a command
        does not run at all, as a kernel would not."""
        probe = self.probe()
        error = self._required_tier_missing()
        if error is not None:
            raise error
        if not probe.ok:
            return None
        protected = tuple(p if p.is_absolute() else cwd / p for p in self.protected)
        return command_confinement(
            probe.tier, cwd, network=self.network, protected=protected, own_dir=own_dir
        )

    @property
    def guarantees(self) -> KernelGuarantees:
        probe = self.probe()
        read_only = (
            "read-only: the rest of the system, the workspace's .git and .continual-acp (gates, project "
            "harness), the server's data dir and any protected_paths"
        )
        if probe.ok and probe.tier == "landlock":
            return KernelGuarantees(
                "sandbox",
                where="a local process confined by Landlock + seccomp",
                confined=True,
                tier=probe.tier,
                network=self.network,
                notes=(
                    read_only,
                    "entries directly in the workspace root cannot be created, removed or renamed "
                    "(subfolders and existing files can be written); `!cmd` runs without a pty",
                ),
            )
        if probe.ok:
            return KernelGuarantees(
                "sandbox",
                where="a local process in a bubblewrap sandbox",
                confined=True,
                tier=probe.tier,
                network=self.network,
                notes=(read_only,),
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
        error = self._required_tier_missing()
        if error is not None:
            raise error
        if not probe.ok:
            return await start_local_kernel(spec)
        runtime = private_dir(spec.runtime_dir).resolve()
        own_dir = private_dir(runtime / f"sbx-{secrets.token_hex(4)}")
        own_spec = replace(spec, runtime_dir=own_dir)
        # A relative protected path (`protected_paths = ["tests"]`) is one of this workspace's.
        protected = tuple(p if p.is_absolute() else spec.cwd / p for p in self.protected)
        if probe.tier == "landlock":
            prefix = landlock_argv(spec, network=self.network, protected=protected, own_dir=own_dir)
            kernel = await start_local_kernel(own_spec, argv_prefix=prefix)
        else:
            prefix = bubblewrap_argv(
                spec, network=self.network, protected=protected, own_dir=own_dir, runtime=runtime
            )
            kernel = await start_local_kernel(own_spec, argv_prefix=prefix, interrupt_mode="message")
        kernel.__class__ = SandboxKernel  # the same object, with the sandbox's snapshot staging
        assert isinstance(kernel, SandboxKernel)
        kernel.staging = own_dir / _STAGING
        kernel.workspace = spec.cwd
        return kernel
