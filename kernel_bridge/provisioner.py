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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager, NoSuchKernel
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning.factory import KernelProvisionerFactory
from jupyter_client.provisioning.local_provisioner import LocalProvisioner
from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase

from host_base.private_files import private_dir
from kernel_bridge import reaper
from kernel_bridge._tasks import spawn
from kernel_bridge.backend import KernelBackend
from kernel_bridge.errors import KernelStartError
from kernel_bridge.gateway import RemotePaths
from kernel_bridge.guarantees import KernelGuarantees
from kernel_bridge.kernel_ledger import KernelLedger, owner_tag
from kernel_bridge.launcher import LaunchSpec, RunningKernel
from kernel_bridge.snapshot import SnapshotPaths

log = logging.getLogger(__name__)

_POLL = 1.0
PLACE_PREFIX = "provisioner:"  # ledger entries of this launcher: `provisioner:<kernelspec>`
SWEEP_BOUND = 15.0  # seconds to end one left-over kernel (provisioners kill with SIGTERM, 5 s, SIGKILL)
SWEEP_ATTEMPTS = 3  # starts that try to end a left-over kernel before its entry is dropped
_CONFIRM_BOUND = 5.0  # seconds for the provisioner to confirm a kernel we shut down is gone


@dataclass(frozen=True, slots=True)
class _Recorded:
    """Where a kernel is written in the ledger (removed once its end is confirmed)."""

    ledger: KernelLedger
    place: str
    kernel_id: str


def _plain(value: Any) -> Any:
    """`value` as JSON types (a provisioner's state holds bytes, e.g. the connection key)."""
    return json.loads(json.dumps(value, default=lambda v: v.decode() if isinstance(v, bytes) else str(v)))


class ProvisionedKernel(RunningKernel):
    """A kernel whose provisioner answers `poll()` (it may run on another host)."""

    def __init__(
        self,
        km: AsyncKernelManager,
        pid: int,
        log_path: Path,
        paths: RemotePaths,
        recorded: _Recorded | None = None,
    ) -> None:
        client = km.client()
        client.allow_stdin = False
        client.context.setsockopt(zmq.RCVHWM, 0)
        super().__init__(km, client, pid, log_path)
        self._paths = paths
        self._exit: int | None = None
        self._recorded = recorded
        self._provisioner = km.provisioner
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
        await self._forget()

    async def shutdown(self, timeout: float = 3.0) -> None:
        self._monitor.cancel()
        if self._provisioner is None or isinstance(self._provisioner, LocalProvisioner):
            await super().shutdown(timeout)
        else:
            # jupyter_client's polite shutdown fails both ways with gateway_provisioners here: it
            # first tells the launcher's signal listener to exit, so when the kernel then ignores
            # the shutdown request (it lingered ~30 s) nothing can signal it and a remote kernel
            # outlived its session; and for a launcher on this host it ends in a blocking
            # `Popen.wait()` that stalled the whole event loop those 30 s. So: ask the kernel,
            # wait (without blocking) up to `timeout`, then kill through the provisioner.
            with contextlib.suppress(Exception):
                self.client.shutdown()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and not await self._ended():
                await asyncio.sleep(0.2)
            await super().kill()
        await self._forget()

    async def _ended(self) -> bool:
        """The kernel is known to have exited (its local launcher, or the provisioner's poll)."""
        provisioner = self._provisioner
        launcher = getattr(provisioner, "local_proc", None)
        if launcher is not None:
            return bool(launcher.poll() is not None)
        if provisioner is None:
            return True
        try:
            return await asyncio.wait_for(provisioner.poll(), _CONFIRM_BOUND) is not None
        except Exception:  # no answer: not known to have ended
            return False

    async def _forget(self) -> None:
        """Drop the ledger entry once the provisioner says the kernel is gone; else keep it."""
        recorded, self._recorded = self._recorded, None
        if recorded is None or self._provisioner is None:
            return
        try:
            code = await asyncio.wait_for(self._provisioner.poll(), _CONFIRM_BOUND)
        except Exception as exc:  # cannot tell: the next start's sweep asks again
            log.warning(
                "could not confirm kernel %s ended (%s); the next start retries", recorded.kernel_id, exc
            )
            return
        if code is None:
            log.warning("kernel %s still runs after its shutdown; the next start retries", recorded.kernel_id)
            return
        recorded.ledger.remove(recorded.place, recorded.kernel_id)


class ProvisionerLauncher(KernelBackend):
    """Starts kernels of one kernelspec through its provisioner; a `Launcher` for `KernelPool`."""

    remote = True  # the kernel may be elsewhere: host calls fall back to stdin when needed

    def __init__(
        self,
        kernel_name: str,
        *,
        kernel_dirs: list[str] | None = None,
        paths: RemotePaths | None = None,
        ledger_path: Path | None = None,
    ) -> None:
        self.kernel_name = kernel_name
        self.kernel_dirs = kernel_dirs
        self.paths = paths or RemotePaths()
        self.ledger = KernelLedger(ledger_path) if ledger_path is not None else None
        self.owner = owner_tag()
        self.sweep_task: asyncio.Task[list[str]] | None = None
        self._guarantees = KernelGuarantees(
            "provisioner",
            where=f"kernelspec {kernel_name} through its jupyter_client provisioner",
            notes=("confinement is the provisioner's",),
        )

    @property
    def guarantees(self) -> KernelGuarantees:
        return self._guarantees

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

    def begin_sweep(self) -> None:
        """Start ending kernels left by servers that are gone, once, in the background.

        The pool calls it at start and the first launch does too; nothing waits for it, so a
        slow or unreachable host never delays startup.
        """
        if self.sweep_task is None and self.ledger is not None:
            self.sweep_task = spawn(self.sweep(), "provisioner-sweep")

    async def sweep(self) -> list[str]:
        """End the provisioner kernels of servers now gone; returns the ids no longer running.

        Each entry is handled concurrently, bounded by `SWEEP_BOUND`. The rule: an entry is dropped
        when its kernel is confirmed gone (killed now, or already), or when it cannot be acted on
        at all (no usable provisioner state). It is kept, and retried at the next start, when the
        provisioner cannot be loaded (not installed now), fails, times out or still sees the kernel
        running; after `SWEEP_ATTEMPTS` such starts it is dropped with a warning naming the host
        and pid, so the user can end it by hand.
        """
        if self.ledger is None:
            return []
        entries = [
            e for e in self.ledger.orphan_entries() if str(e.get("gateway", "")).startswith(PLACE_PREFIX)
        ]
        outcomes = await asyncio.gather(*(self._end_left_over(e) for e in entries))
        ended = [kernel_id for kernel_id in outcomes if kernel_id is not None]
        if ended:
            log.info("ended %d provisioner kernel(s) left by a server that is gone", len(ended))
        return ended

    async def _end_left_over(self, entry: dict[str, Any]) -> str | None:
        assert self.ledger is not None
        place, kernel_id = str(entry.get("gateway")), str(entry.get("kernel_id"))
        info = entry.get("info")
        state = info.get("provisioner_info") if isinstance(info, dict) else None
        if (
            not isinstance(info, dict)
            or not isinstance(state, dict)
            or not isinstance(info.get("spec"), dict)
        ):
            log.warning("dropping ledger entry of kernel %s: no provisioner state to end it with", kernel_id)
            self.ledger.remove(place, kernel_id)
            return None
        where = f"host {state.get('assigned_host') or state.get('ip') or '?'}, pid {state.get('pid') or '?'}"
        try:
            ended = await asyncio.wait_for(_end_kernel(kernel_id, info), SWEEP_BOUND)
            failure = None if ended else "its provisioner still sees it running"
        except Exception as exc:  # not installed, unreachable, timed out: kept for the next start
            ended, failure = False, f"{type(exc).__name__}: {exc}"
        if ended:
            self.ledger.remove(place, kernel_id)
            return kernel_id
        attempts = self.ledger.count_attempt(place, kernel_id)
        if attempts >= SWEEP_ATTEMPTS:
            self.ledger.remove(place, kernel_id)
            log.warning(
                "giving up on left-over kernel %s (%s) after %d starts (%s); end it by hand",
                kernel_id,
                where,
                attempts,
                failure,
            )
        else:
            log.warning(
                "could not end left-over kernel %s (%s): %s; the next start retries",
                kernel_id,
                where,
                failure,
            )
        return None

    async def _record(self, km: AsyncKernelManager, name: str) -> _Recorded | None:
        """Write a remote provisioner's kernel to the ledger with the state needed to end it later."""
        provisioner = km.provisioner
        if self.ledger is None or provisioner is None or isinstance(provisioner, LocalProvisioner):
            return None  # a local kernel: our process-group kill and its parent watch end it
        place = PLACE_PREFIX + self.kernel_name
        try:
            kernel_spec = km.kernel_spec
            assert kernel_spec is not None
            info = {
                "provisioner": name,
                "class": f"{type(provisioner).__module__}.{type(provisioner).__qualname__}",
                "spec": _plain(kernel_spec.to_dict()),
                "resource_dir": kernel_spec.resource_dir,
                "provisioner_info": _plain(await provisioner.get_provisioner_info()),
            }
            self.ledger.add(place, km.kernel_id, self.owner, info)
        except Exception as exc:  # the kernel still works; only a crash of this server would leak it
            log.warning("could not write kernel %s to the kernel ledger: %s", km.kernel_id, exc)
            return None
        return _Recorded(self.ledger, place, km.kernel_id)

    async def aclose(self) -> None:
        """Stop a sweep still running at shutdown (its entries stay for the next start)."""
        task = self.sweep_task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def __call__(self, spec: LaunchSpec) -> RunningKernel:
        """Start the kernelspec's kernel and wait until it answers."""
        self.begin_sweep()
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
        kernel = ProvisionedKernel(km, pid, log_path, self.paths, await self._record(km, name))
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


async def _end_kernel(kernel_id: str, info: dict[str, Any]) -> bool:
    """Re-create a kernel's provisioner from its ledger info and kill the kernel; True once it is gone.

    The provisioner is loaded by its registered name (an entry point), not by the recorded class
    path: a file should not decide what code this server imports.
    """
    spec = KernelSpec(resource_dir=str(info.get("resource_dir") or ""), **info["spec"])
    factory = KernelProvisionerFactory.instance()
    provisioner: KernelProvisionerBase = factory.create_provisioner_instance(kernel_id, spec, None)
    await provisioner.load_provisioner_info(info["provisioner_info"])
    try:
        if await provisioner.poll() is not None:
            return True
        await provisioner.kill()
        # A launcher's signal listener can answer one more poll after the kernel died.
        for _ in range(10):
            if await provisioner.poll() is not None:
                return True
            await asyncio.sleep(0.5)
        return False
    finally:
        # gateway_provisioners' launcher forks a signal listener that exits when the kernel, ending,
        # SIGTERMs its children. A kernel that had to be SIGKILLed (a loaded host: kill's SIGTERM
        # not answered in time), or whose launcher died with the server, never does that: tell the
        # listener itself (a no-op for provisioners without one).
        with contextlib.suppress(Exception):
            await provisioner.shutdown_requested(restart=False)
        with contextlib.suppress(Exception):
            await provisioner.cleanup(restart=False)
