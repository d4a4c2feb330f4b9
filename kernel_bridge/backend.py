"""`KernelBackend`: where kernels come from, and what confines the workspace code the server starts.

One seam for both: a backend starts kernels for `KernelPool` (`__call__(spec)`, the `Launcher`
call) and gives the launch seam (`workspace_launch`) the confinement it applies to gates and other
workspace commands (`command_confinement`). What the pool asks of a backend is declared here
instead of probed: `remote` (host calls may need the stdin fallback), `binds_cwd` (a kernel serves
one workspace), `local_interpreter` (kernels run this machine's `python`: `check_backend` asks it
for ipykernel), `guarantees` (as data: where kernels run, confinement, network), `check`,
`begin_sweep` (end kernels a killed server left), `aclose`. A started kernel's own hooks
(interrupt, shutdown and kill, the checkpoint/snapshot hooks `kernel_snapshot`, `before_restore`,
`after_snapshot`) are `RunningKernel`'s.

Backends by name (`backend_class`): the built-in `local`, `sandbox`, `gateway`, `provisioner`, then
any registered with `register_backend` or installed under the entry-point group
`continual_acp.kernel_backends` (`name = "package.module:Class"`).

`as_backend(launcher)` turns what `KernelPool(launcher=...)` accepted before into a backend: a
plain async function is a backend with the defaults (`start_local_kernel` is the local one); an
object written before this class keeps its attributes (read once, here).
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_bridge.guarantees import LOCAL, KernelGuarantees

if TYPE_CHECKING:
    from kernel_bridge.confinement import Confinement
    from kernel_bridge.kernel_template import KernelTemplates
    from kernel_bridge.launcher import LaunchSpec, RunningKernel

__all__ = [
    "ENTRY_POINT_GROUP",
    "KernelBackend",
    "LocalBackend",
    "as_backend",
    "backend_class",
    "register_backend",
]

ENTRY_POINT_GROUP = "continual_acp.kernel_backends"


class KernelBackend(abc.ABC):
    """Starts kernels (`await backend(spec)`) and says what confines them and the workspace's code."""

    remote: bool = False
    binds_cwd: bool = False
    local_interpreter: bool = False

    @property
    def guarantees(self) -> KernelGuarantees:
        """Where kernels run and how they are confined (the `/kernel status` line is its `describe`)."""
        return LOCAL

    @abc.abstractmethod
    async def __call__(self, spec: LaunchSpec) -> RunningKernel:
        """Start one kernel for `spec` and return it connected and ready."""

    async def check(self) -> str:
        """Whether kernels can start, without starting one; raises `KernelStartError` naming the fix."""
        return self.guarantees.describe()

    def begin_sweep(self) -> None:
        """End, in the background, kernels that a server now gone left running (remote backends)."""
        return None  # nothing is left behind by a backend whose kernels are this server's children

    async def aclose(self) -> None:
        """Release what the backend still holds (remote kernels, sessions) when the pool closes."""
        return None  # a local backend holds nothing beyond the kernels the pool shuts down

    def command_confinement(self, cwd: Path, own_dir: Path) -> Confinement | None:
        """The confinement of a workspace command in `cwd` (a gate): the kernels' own fence, or None
        when the backend adds none on this machine. `own_dir` is the command's private writable dir."""
        return None


class LocalBackend(KernelBackend):
    """Kernels as local processes of this server (`launcher.start_local_kernel`), forked from a
    template that imported ipykernel once where this host allows it (`kernel_template`)."""

    local_interpreter = True

    def __init__(self, *, fork: bool = True) -> None:
        self._templates: KernelTemplates | None = None
        if fork:
            from kernel_bridge.kernel_template import KernelTemplates, forking_supported

            self._templates = KernelTemplates() if forking_supported() else None

    async def __call__(self, spec: LaunchSpec) -> RunningKernel:
        from kernel_bridge.launcher import start_local_kernel

        return await start_local_kernel(spec, templates=self._templates)

    async def aclose(self) -> None:
        """End the kernel templates (after the pool shut its kernels down: they watch them)."""
        templates, self._templates = self._templates, None
        if templates is not None:
            import anyio

            await anyio.to_thread.run_sync(templates.close)


class _FunctionBackend(KernelBackend):
    """A plain `async def launcher(spec)`: a backend with the defaults."""

    def __init__(self, launch: Callable[[LaunchSpec], Awaitable[RunningKernel]]) -> None:
        self._launch = launch

    async def __call__(self, spec: LaunchSpec) -> RunningKernel:
        return await self._launch(spec)


class _DeclaredBackend(_FunctionBackend):
    """An object written before `KernelBackend` (a callable with some of its attributes)."""

    def __init__(self, launcher: Any) -> None:
        super().__init__(launcher)
        self._launcher = launcher
        self.remote = bool(getattr(launcher, "remote", False))
        self.binds_cwd = bool(getattr(launcher, "binds_cwd", False))
        self.local_interpreter = bool(getattr(launcher, "local_interpreter", False))

    @property
    def guarantees(self) -> KernelGuarantees:
        value = getattr(self._launcher, "guarantees", None)
        return value if isinstance(value, KernelGuarantees) else LOCAL

    async def check(self) -> str:
        check = getattr(self._launcher, "check", None)
        return str(await check()) if check is not None else self.guarantees.describe()

    def begin_sweep(self) -> None:
        sweep = getattr(self._launcher, "begin_sweep", None)
        if sweep is not None:
            sweep()

    async def aclose(self) -> None:
        closer = getattr(self._launcher, "aclose", None)
        if closer is not None:
            await closer()


def as_backend(launcher: Any) -> KernelBackend:
    """`launcher` (a `KernelBackend`, `start_local_kernel`, another async function, or an object
    written before this class) as a `KernelBackend`."""
    if isinstance(launcher, KernelBackend):
        return launcher
    from kernel_bridge.launcher import start_local_kernel

    if launcher is start_local_kernel:
        return LocalBackend()
    if any(hasattr(launcher, name) for name in ("remote", "binds_cwd", "local_interpreter", "guarantees")):
        return _DeclaredBackend(launcher)
    return _FunctionBackend(launcher)


# The built-in backends by name, as "module:Class" (imported on use: a gateway's aiohttp, a
# provisioner's jupyter_client machinery are not loaded for a local server).
_BUILT_IN = {
    "local": "kernel_bridge.backend:LocalBackend",
    "sandbox": "kernel_bridge.sandbox:SandboxLauncher",
    "gateway": "kernel_bridge.gateway:GatewayLauncher",
    "provisioner": "kernel_bridge.provisioner:ProvisionerLauncher",
}
_registered: dict[str, type[KernelBackend]] = {}


def register_backend(name: str, cls: type[KernelBackend]) -> None:
    """Make `cls` the backend called `name` in this process (over an installed one of that name)."""
    if not (isinstance(cls, type) and issubclass(cls, KernelBackend)):
        raise TypeError(f"kernel backend {name!r}: {cls!r} is not a KernelBackend subclass")
    _registered[name] = cls


def _load(target: str, name: str) -> type[KernelBackend]:
    module, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    if not (isinstance(cls, type) and issubclass(cls, KernelBackend)):
        raise TypeError(f"kernel backend {name!r}: {target} is not a KernelBackend subclass")
    return cls


def backend_class(name: str) -> type[KernelBackend]:
    """The backend class called `name`: registered, built in, or installed as an entry point of
    `continual_acp.kernel_backends`. Raises KeyError listing the names known."""
    if name in _registered:
        return _registered[name]
    if name in _BUILT_IN:
        return _load(_BUILT_IN[name], name)
    from importlib import metadata  # on use: the metadata scan is not on any start-up path

    installed = metadata.entry_points(group=ENTRY_POINT_GROUP)
    for point in installed:
        if point.name == name:
            cls = point.load()
            if not (isinstance(cls, type) and issubclass(cls, KernelBackend)):
                raise TypeError(f"kernel backend {name!r}: {point.value} is not a KernelBackend subclass")
            return cls
    known = sorted({*_BUILT_IN, *_registered, *(p.name for p in installed)})
    raise KeyError(f"no kernel backend called {name!r} (known: {', '.join(known)})")
