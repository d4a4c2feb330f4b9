"""`KernelBackend`: the pool's one view of a backend, the registry by name, and the launch seam's source
of confinement."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from kernel_bridge import KernelPool, backend, workspace_launch
from kernel_bridge.backend import KernelBackend, LocalBackend, as_backend, backend_class, register_backend
from kernel_bridge.gateway import GatewayLauncher
from kernel_bridge.guarantees import KernelGuarantees
from kernel_bridge.launcher import LaunchSpec, RunningKernel, start_local_kernel
from kernel_bridge.provisioner import ProvisionerLauncher
from kernel_bridge.sandbox import SandboxLauncher

pytestmark = pytest.mark.anyio


class _Elsewhere(KernelBackend):
    """A backend that never starts anything: what the pool reads of it is declared."""

    remote = True
    binds_cwd = True

    @property
    def guarantees(self) -> KernelGuarantees:
        return KernelGuarantees("elsewhere", where="nowhere", confined=True)

    async def __call__(self, spec: LaunchSpec) -> RunningKernel:
        raise AssertionError("not started in these tests")


def test_the_built_in_backends_are_kernel_backends_by_name() -> None:
    assert backend_class("local") is LocalBackend
    assert backend_class("sandbox") is SandboxLauncher
    assert backend_class("gateway") is GatewayLauncher
    assert backend_class("provisioner") is ProvisionerLauncher


def test_an_unknown_backend_name_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match="known: gateway, local, provisioner, sandbox"):
        backend_class("no-such-backend")


def test_a_registered_backend_is_found_by_name_and_a_non_backend_is_refused() -> None:
    register_backend("elsewhere-test", _Elsewhere)
    try:
        assert backend_class("elsewhere-test") is _Elsewhere
    finally:
        backend._registered.pop("elsewhere-test")
    with pytest.raises(TypeError, match="not a KernelBackend subclass"):
        register_backend("bad", object)  # type: ignore[arg-type]


def test_an_installed_entry_point_backend_is_found_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    point = metadata.EntryPoint(
        name="elsewhere-installed", value=f"{__name__}:_Elsewhere", group=backend.ENTRY_POINT_GROUP
    )

    def installed(**select: Any) -> metadata.EntryPoints:
        found = [point] if select.get("group") == backend.ENTRY_POINT_GROUP else []
        return metadata.EntryPoints(found)

    monkeypatch.setattr(metadata, "entry_points", installed)
    assert backend_class("elsewhere-installed") is _Elsewhere


def test_the_pool_reads_what_a_backend_declares() -> None:
    pool = KernelPool(0, launcher=_Elsewhere())
    assert pool.host_stdin == "fallback"  # remote: host calls may fall back to stdin
    assert pool.guarantees.backend == "elsewhere"
    assert pool._binds_cwd  # kernels warmed for the last workspace only


async def test_the_pool_takes_a_plain_function_and_the_local_launcher_as_backends() -> None:
    async def launch(spec: LaunchSpec) -> RunningKernel:
        return await start_local_kernel(spec)

    assert isinstance(as_backend(start_local_kernel), LocalBackend)
    plain = as_backend(launch)
    assert isinstance(plain, KernelBackend) and not plain.remote and not plain.local_interpreter
    assert (await KernelPool(0, launcher=launch).check_backend()).startswith("backend local: ")


def test_a_backend_is_the_launch_seams_confinement_source(tmp_path: Path) -> None:
    """Only a confining backend adds a fence to workspace commands; the others add none."""
    local = LocalBackend()
    assert local.command_confinement(tmp_path, tmp_path) is None
    workspace_launch.use_confinement(local)
    try:
        with workspace_launch.policy(tmp_path) as launch:
            assert launch.confinement is None
    finally:
        workspace_launch.use_confinement(None)
