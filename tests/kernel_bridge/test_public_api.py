"""The names other packages code against, and the kernel-side module's light footprint."""

from __future__ import annotations

import subprocess
import sys

import kernel_bridge

CONTRACT = {
    "KernelPool",
    "KernelSession",
    "CellRun",
    "CellResult",
    "Stream",
    "Display",
    "Result",
    "ClearOutput",
    "Error",
    "Finished",
    "RestoreReport",
    "HostBridge",
    "KernelBridgeError",
    "KernelStartError",
    "InterpreterNotFound",
    "SessionClosed",
    # The provisioner seam: `KernelPool(launcher=...)` takes any `Launcher`.
    "Launcher",
    "LaunchSpec",
    "RunningKernel",
    "start_local_kernel",
}


def test_contract_names_are_exported() -> None:
    assert set(kernel_bridge.__all__) >= CONTRACT
    for name in kernel_bridge.__all__:
        assert getattr(kernel_bridge, name) is not None


def test_session_and_run_have_the_contract_methods() -> None:
    for method in ("execute", "interrupt", "restart", "snapshot", "restore", "shutdown"):
        assert callable(getattr(kernel_bridge.KernelSession, method))
    assert isinstance(kernel_bridge.KernelSession.alive, property)
    for method in ("start", "acquire", "aclose"):
        assert callable(getattr(kernel_bridge.KernelPool, method))
    assert callable(kernel_bridge.CellRun.result) and hasattr(kernel_bridge.CellRun, "__anext__")


def test_importing_the_host_client_pulls_in_no_third_party_module() -> None:
    code = (
        "import sys\n"
        "from kernel_bridge import hostclient as bridge\n"
        "heavy = sorted(m for m in ('jupyter_client', 'zmq', 'anyio', 'dill') if m in sys.modules)\n"
        "print(heavy, callable(bridge.call), callable(bridge.acall))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "[] True True\n"
