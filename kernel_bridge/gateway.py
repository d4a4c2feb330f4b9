"""`GatewayLauncher`: kernels started by a Jupyter Kernel Gateway / Enterprise Gateway.

The kernel lives wherever the gateway puts it (another host, a container, a cluster). Its REST
API starts, interrupts and deletes it (`gateway_rest`); its websocket carries the Jupyter channels
(`gateway_channels`). The resulting `GatewayKernel` has the `RunningKernel` surface, so a
`KernelSession` drives it exactly like a local kernel. Each kernel is tagged with this server's
identity (env `KERNEL_CONTINUAL_ACP_OWNER`) and written to a ledger, so kernels left behind by a
server that crashed are deleted by the next start (`sweep`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from host_base.private_files import private_dir
from kernel_bridge._tasks import spawn
from kernel_bridge.backend import KernelBackend
from kernel_bridge.errors import KernelStartError
from kernel_bridge.gateway_channels import GatewayChannels
from kernel_bridge.gateway_rest import GatewayError, GatewayRest, GatewaySettings
from kernel_bridge.guarantees import KernelGuarantees
from kernel_bridge.kernel_ledger import KernelLedger, owner_tag
from kernel_bridge.launcher import LaunchSpec, RunningKernel
from kernel_bridge.snapshot import SnapshotPaths

log = logging.getLogger(__name__)

OWNER_ENV = "KERNEL_CONTINUAL_ACP_OWNER"
_MONITOR_INTERVAL = 2.0
_MONITOR_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class RemotePaths:
    """Paths on the kernel's side when its filesystem is not this machine's."""

    cwd: str | None = None  # the kernel's working directory (None: the session's own path)
    snapshot_root: str | None = None  # kernel-side directory for snapshots (None: shared filesystem)


class GatewayKernel(RunningKernel):
    """A kernel on a gateway: REST for its lifecycle, the websocket for its channels."""

    def __init__(
        self,
        launcher: GatewayLauncher,
        kernel_id: str,
        channels: GatewayChannels,
        log_path: Path,
    ) -> None:
        # Not RunningKernel.__init__: there is no local kernel manager or process here.
        self.km = None  # type: ignore[assignment]
        self.client = channels  # type: ignore[assignment]
        self.pid = -1
        self.log_path = log_path
        self._closed = False
        self._silent_since: float | None = None
        self._asked_at: float | None = None  # when the check in flight was sent
        self.kernel_id = kernel_id
        self.channels = channels
        self._launcher = launcher
        self._gone: str | None = None
        self._monitor = asyncio.get_running_loop().create_task(self._watch(), name=f"gateway-{kernel_id}")

    @property
    def shares_filesystem(self) -> bool:  # type: ignore[override]
        return self._launcher.paths.snapshot_root is None

    def kernel_cwd(self, cwd: Path) -> str:
        return self._launcher.paths.cwd or str(cwd)

    def kernel_snapshot(self, paths: SnapshotPaths) -> SnapshotPaths:
        root = self._launcher.paths.snapshot_root
        if root is None:
            return paths
        # One kernel-side directory per session directory (named like it), files named alike.
        return SnapshotPaths.at(Path(root) / paths.directory.name)

    async def _watch(self) -> None:
        """Poll the gateway for the kernel: gone (404) or dead means died; no answer means silence."""
        rest = self._launcher.rest
        while not self._closed:
            await asyncio.sleep(_MONITOR_INTERVAL)
            asked = self._asked_at = time.monotonic()
            try:
                # Bounded: a gateway that stopped answering must count as silence, not hang here.
                model = await asyncio.wait_for(rest.kernel(self.kernel_id), _MONITOR_TIMEOUT)
            except (GatewayError, TimeoutError) as exc:
                log.debug("gateway check of kernel %s failed: %s", self.kernel_id, exc)
                if self._silent_since is None:
                    self._silent_since = asked  # silent since we asked, not since we gave up
                continue
            finally:
                self._asked_at = None
            self._silent_since = None
            if model is None:
                self._gone = "the gateway no longer has this kernel"
                return
            if model.get("execution_state") == "dead":
                self._gone = "the gateway reports the kernel dead"
                return

    def _death(self) -> str | None:
        channels = self.channels
        return self._gone or channels.dead_reason or (None if self._closed else channels.closed_reason)

    def exit_code(self) -> int | None:
        """1 once the kernel is known dead (no exit code crosses a gateway), else None."""
        if self._closed:
            return 1
        return 1 if self._death() is not None else None

    def describe_exit(self) -> str:
        return self._death() or "the kernel was stopped"

    def heartbeat_silence(self) -> float:
        """Seconds since the oldest check of this kernel the gateway has not answered: the first of
        the checks failed in a row, or the one in flight. Counted from when it was asked, so a frozen
        gateway is found `heartbeat_timeout` after the first unanswered check began, not after that
        check's own timeout and another `heartbeat_timeout` on top."""
        since = self._silent_since if self._silent_since is not None else self._asked_at
        return 0.0 if since is None else time.monotonic() - since

    async def interrupt(self) -> None:
        await self._launcher.rest.interrupt(self.kernel_id)

    def log_tail(self, chars: int = 2000) -> str:
        return ""  # the kernel's log is on the gateway's side

    async def kill(self) -> None:
        """Delete the kernel on the gateway and close its channels."""
        if self._closed:
            return
        self._closed = True
        # Read before the cancel: the watch clears `_asked_at` as its check ends.
        unanswered = self._silent_since is not None or self._asked_at is not None
        self._monitor.cancel()
        await self.channels.aclose()
        if unanswered:
            # The gateway stopped answering (frozen, unreachable), or a check of it is in flight: its
            # DELETE could only time out (10 s), and the cell waiting on this kill would be reported
            # dead that much later. The delete goes on in the background; the launcher's aclose waits
            # for it, and the ledger keeps the kernel for the next start if it never succeeds.
            self._launcher.delete_soon(self.kernel_id)
            return
        await self._launcher.delete(self.kernel_id)

    async def shutdown(self, timeout: float = 3.0) -> None:
        """The gateway's DELETE is a polite shutdown followed by a kill on its side."""
        await self.kill()


class GatewayLauncher(KernelBackend):
    """Starts kernels on a gateway; a `Launcher` for `KernelPool(launcher=...)`."""

    remote = True  # the pool then offers host calls over stdin where the socket is unreachable

    def __init__(
        self,
        settings: GatewaySettings,
        *,
        ledger_path: Path | None = None,
        paths: RemotePaths | None = None,
    ) -> None:
        self.settings = settings
        self.rest = GatewayRest(settings)
        self.paths = paths or RemotePaths()
        self.ledger = KernelLedger(ledger_path) if ledger_path is not None else None
        self.owner = owner_tag()
        self._swept = False
        self._live: set[str] = set()
        self._deleting: set[asyncio.Task[None]] = set()
        self._guarantees = KernelGuarantees(
            "gateway",
            where=f"kernels on the Jupyter gateway at {settings.base}"
            + (f" (kernelspec {settings.kernel_name})" if settings.kernel_name else ""),
            network=True,
            notes=("confinement is the gateway's",),
        )

    @property
    def guarantees(self) -> KernelGuarantees:
        return self._guarantees

    async def sweep(self) -> list[str]:
        """Delete kernels on this gateway that servers now gone left behind; returns their ids."""
        self._swept = True
        if self.ledger is None:
            return []
        deleted: list[str] = []
        for kernel_id in self.ledger.orphans(self.settings.base):
            try:
                if await self.rest.delete(kernel_id, timeout=10.0):
                    deleted.append(kernel_id)
            except (GatewayError, TimeoutError) as exc:
                log.warning("could not delete left-over gateway kernel %s: %s", kernel_id, exc)
                continue
            self.ledger.remove(self.settings.base, kernel_id)
        if deleted:
            log.info("deleted %d gateway kernel(s) left by a server that is gone", len(deleted))
        return deleted

    async def check(self) -> str:
        """Prove the gateway answers with this token; returns a short description (for doctor)."""
        specs = await self.rest.check()
        names = sorted(dict(specs.get("kernelspecs", {})))
        name = self.settings.kernel_name or specs.get("default", "?")
        if self.settings.kernel_name and self.settings.kernel_name not in names:
            raise GatewayError(
                f"the kernel gateway at {self.settings.base} has no kernelspec {self.settings.kernel_name!r} "
                f"(it has: {', '.join(names) or 'none'}); fix `kernel_name`"
            )
        return f"gateway {self.settings.base} answers; kernelspec {name}"

    def _kernel_env(self, spec: LaunchSpec) -> dict[str, str]:
        # The session's own variables reach the kernel through the setup cell; the start request
        # carries only what a gateway accepts (KERNEL_*, and names it allows) and the owner tag.
        forward = set(self.settings.forward_env)
        env = {k: v for k, v in spec.env.items() if k.startswith("KERNEL_") or k in forward}
        env[OWNER_ENV] = self.owner
        return env

    async def __call__(self, spec: LaunchSpec) -> RunningKernel:
        """Start a kernel on the gateway, connect its channels and wait until it answers."""
        if not self._swept:
            await self.sweep()
        kernel_id = await self.rest.start_kernel(self._kernel_env(spec))
        self._live.add(kernel_id)
        if self.ledger is not None:
            self.ledger.add(self.settings.base, kernel_id, self.owner)
        runtime = private_dir(spec.runtime_dir)
        log_path = runtime / f"gateway-{kernel_id[:8]}.log"
        channels = GatewayChannels(self.settings, kernel_id)
        try:
            await channels.connect()
            kernel = GatewayKernel(self, kernel_id, channels, log_path)
        except BaseException:
            await channels.aclose()
            await self.delete(kernel_id)
            raise
        try:
            await channels.wait_for_ready(spec.startup_timeout)
        except BaseException as exc:
            await kernel.kill()
            if isinstance(exc, TimeoutError):
                raise KernelStartError(
                    f"the kernel {kernel_id} on the gateway at {self.settings.base} did not become ready "
                    f"within {spec.startup_timeout:g} s; check the gateway's log"
                ) from exc
            raise
        return kernel

    async def delete(self, kernel_id: str) -> None:
        """Delete one kernel of ours (bounded), and forget it once the gateway no longer has it."""
        self._live.discard(kernel_id)
        try:
            await self.rest.delete(kernel_id, timeout=10.0)
        except (GatewayError, TimeoutError) as exc:
            log.warning("deleting gateway kernel %s failed (the next start retries): %s", kernel_id, exc)
            return
        if self.ledger is not None:
            self.ledger.remove(self.settings.base, kernel_id)

    @property
    def pending_deletes(self) -> int:
        """Deletes still running in the background (`delete_soon`)."""
        return len(self._deleting)

    def delete_soon(self, kernel_id: str) -> None:
        """`delete` in the background (a kernel on a gateway that stopped answering); `aclose` waits for it."""
        self._live.discard(kernel_id)
        task = spawn(self.delete(kernel_id), f"gateway-delete-{kernel_id}")
        self._deleting.add(task)
        task.add_done_callback(self._deleting.discard)

    async def aclose(self) -> None:
        """Delete every kernel this launcher still has, then close the HTTP pool."""
        for kernel_id in list(self._live):
            await self.delete(kernel_id)
        if self._deleting:
            await asyncio.gather(*self._deleting, return_exceptions=True)  # each bounded by delete()
        with contextlib.suppress(Exception):
            await self.rest.aclose()
