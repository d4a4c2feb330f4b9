"""`ProvisionerLauncher`: kernels from a kernelspec that names a jupyter_client kernel provisioner.

The kernelspec is launched unmodified through jupyter_client's provisioner machinery, so whatever
`metadata.kernel_provisioner` in its kernel.json names (gateway-provisioners' SSH "distributed",
Docker, Kubernetes or YARN provisioners, or the plain local one) decides where the kernel runs. Its
process may not be on this machine, so liveness is asked of the provisioner (`poll`), not of a pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from pathlib import Path

import zmq
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from jupyter_client.manager import AsyncKernelManager

from kernel_bridge import reaper
from kernel_bridge.errors import KernelStartError
from kernel_bridge.gateway import RemotePaths
from kernel_bridge.guarantees import KernelGuarantees
from kernel_bridge.launcher import LaunchSpec, RunningKernel
from kernel_bridge.output import private_dir
from kernel_bridge.snapshot import SnapshotPaths

log = logging.getLogger(__name__)

_POLL = 1.0


class ProvisionedKernel(RunningKernel):
    """A kernel whose provisioner answers `poll()` (it may run on another host)."""

    def __init__(self, km: AsyncKernelManager, pid: int, log_path: Path, paths: RemotePaths) -> None:
        client = km.client()
        client.allow_stdin = False
        client.context.setsockopt(zmq.RCVHWM, 0)
        super().__init__(km, client, pid, log_path)
        self._paths = paths
        self._exit: int | None = None
        self._monitor = asyncio.get_running_loop().create_task(self._watch(), name="provisioner-poll")

    @property
    def shares_filesystem(self) -> bool:  # type: ignore[override]
        return self._paths.snapshot_root is None

    def kernel_cwd(self, cwd: Path) -> str:
        return self._paths.cwd or str(cwd)

    def kernel_snapshot(self, paths: SnapshotPaths) -> SnapshotPaths:
        root = self._paths.snapshot_root
        return paths if root is None else SnapshotPaths.at(Path(root) / paths.directory.name)

    async def _watch(self) -> None:
        provisioner = self.km.provisioner
        while not self._closed and provisioner is not None:
            await asyncio.sleep(_POLL)
            try:
                code = await provisioner.poll()
            except Exception as exc:  # a provisioner that cannot tell: the heartbeat still can
                log.debug("provisioner poll failed: %s", exc)
                continue
            if code is not None:
                self._exit = int(code)
                return

    def exit_code(self) -> int | None:
        local = super().exit_code()
        return local if local is not None else self._exit

    async def kill(self) -> None:
        self._monitor.cancel()
        await super().kill()

    async def shutdown(self, timeout: float = 3.0) -> None:
        self._monitor.cancel()
        await super().shutdown(timeout)


class ProvisionerLauncher:
    """Starts kernels of one kernelspec through its provisioner; a `Launcher` for `KernelPool`."""

    remote = True  # the kernel may be elsewhere: host calls fall back to stdin when needed

    def __init__(
        self,
        kernel_name: str,
        *,
        kernel_dirs: list[str] | None = None,
        paths: RemotePaths | None = None,
    ) -> None:
        self.kernel_name = kernel_name
        self.kernel_dirs = kernel_dirs
        self.paths = paths or RemotePaths()
        self.guarantees = KernelGuarantees(
            "provisioner",
            where=f"kernelspec {kernel_name} through its jupyter_client provisioner",
            notes=("confinement is the provisioner's",),
        )

    def _spec_manager(self) -> KernelSpecManager:
        return KernelSpecManager(kernel_dirs=self.kernel_dirs) if self.kernel_dirs else KernelSpecManager()

    def provisioner_name(self) -> str:
        """The provisioner the kernelspec names (for doctor); raises KernelStartError if missing."""
        try:
            spec = self._spec_manager().get_kernel_spec(self.kernel_name)
        except NoSuchKernel as exc:
            # jupyter_client hides a spec whose provisioner is not installed: say which it is.
            missing = self._unavailable_provisioner()
            if missing is not None:
                raise KernelStartError(
                    f"kernelspec {self.kernel_name!r} names the provisioner {missing!r}, which is not "
                    "installed (pip install 'continual-acp[distributed]' for gateway-provisioners)"
                ) from exc
            raise KernelStartError(
                f"no kernelspec named {self.kernel_name!r} (see `jupyter kernelspec list`); fix `kernel_name`"
            ) from exc
        meta = spec.metadata.get("kernel_provisioner", {}) if isinstance(spec.metadata, dict) else {}
        return str(meta.get("provisioner_name", "local-provisioner"))

    def _unavailable_provisioner(self) -> str | None:
        for directory in self._spec_manager().kernel_dirs:
            try:
                spec = json.loads((Path(directory) / self.kernel_name / "kernel.json").read_text())
            except (OSError, ValueError):
                continue
            name = spec.get("metadata", {}).get("kernel_provisioner", {}).get("provisioner_name")
            return str(name) if name else None
        return None

    async def check(self) -> str:
        """The kernelspec exists and names an installed provisioner (for doctor and session/new)."""
        return f"kernelspec {self.kernel_name} uses the {self.provisioner_name()}"

    async def __call__(self, spec: LaunchSpec) -> RunningKernel:
        """Start the kernelspec's kernel and wait until it answers."""
        runtime = private_dir(spec.runtime_dir)
        name = self.provisioner_name()
        tag = secrets.token_hex(4)
        km = AsyncKernelManager(
            kernel_name=self.kernel_name,
            kernel_spec_manager=self._spec_manager(),
            connection_file=str(runtime / f"kernel-{tag}.json"),
        )
        log_path = runtime / f"kernel-{tag}.log"
        log_path.touch(mode=0o600)
        cwd = self.paths.cwd or str(spec.cwd)
        try:
            await km.start_kernel(env=spec.env, cwd=cwd)
        except Exception as exc:
            with contextlib.suppress(Exception):
                await km.shutdown_kernel(now=True)
            raise KernelStartError(
                f"the {name} provisioner of kernelspec {self.kernel_name!r} could not start a kernel: {exc}"
            ) from exc
        process = getattr(km.provisioner, "process", None)
        if name != "local-provisioner":
            # A remote provisioner that launched on this very host (gateway_provisioners does for a
            # local address) holds the launcher as a local process. Its group also holds the
            # launcher's signal listener, a forked child that outlives a launcher killed by signal:
            # killing the group at shutdown is what ends it.
            process = getattr(km.provisioner, "local_proc", None)
        pid = int(process.pid) if process is not None else -1
        if pid > 0:
            reaper.track(pid)
        kernel = ProvisionedKernel(km, pid, log_path, self.paths)
        kernel.client.start_channels()
        try:
            await kernel.client.wait_for_ready(timeout=spec.startup_timeout)
        except BaseException as exc:
            await kernel.kill()
            if not isinstance(exc, RuntimeError | TimeoutError):
                raise
            raise KernelStartError(
                f"the kernel of kernelspec {self.kernel_name!r} ({name}) did not become ready: {exc}"
            ) from exc
        return kernel
