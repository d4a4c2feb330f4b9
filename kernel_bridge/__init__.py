"""kernel_bridge: persistent IPython kernels over jupyter_client.

The public names are loaded lazily so that kernel-side code can import
`kernel_bridge.hostclient` (standard library only) without pulling in jupyter_client or anyio.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernel_bridge.backend import KernelBackend
    from kernel_bridge.cell import CellRun
    from kernel_bridge.environment import resolve_interpreter, scrub_environment
    from kernel_bridge.errors import InterpreterNotFound, KernelBridgeError, KernelStartError, SessionClosed
    from kernel_bridge.events import (
        CellEvent,
        CellResult,
        ClearOutput,
        Display,
        Error,
        Finished,
        RestoreReport,
        Result,
        Stream,
    )
    from kernel_bridge.hostbridge import HostBridge
    from kernel_bridge.kernel_session import KernelSession
    from kernel_bridge.launcher import Launcher, LaunchSpec, RunningKernel, start_local_kernel
    from kernel_bridge.pool import KernelPool

_EXPORTS = {
    "CellEvent": "events",
    "CellResult": "events",
    "CellRun": "cell",
    "ClearOutput": "events",
    "Display": "events",
    "Error": "events",
    "Finished": "events",
    "HostBridge": "hostbridge",
    "InterpreterNotFound": "errors",
    "KernelBackend": "backend",
    "KernelBridgeError": "errors",
    "KernelPool": "pool",
    "KernelSession": "kernel_session",
    "KernelStartError": "errors",
    "LaunchSpec": "launcher",
    "Launcher": "launcher",
    "RunningKernel": "launcher",
    "start_local_kernel": "launcher",
    "RestoreReport": "events",
    "Result": "events",
    "SessionClosed": "errors",
    "Stream": "events",
    "resolve_interpreter": "environment",
    "scrub_environment": "environment",
}

__all__ = [
    "CellEvent",
    "CellResult",
    "CellRun",
    "ClearOutput",
    "Display",
    "Error",
    "Finished",
    "HostBridge",
    "InterpreterNotFound",
    "KernelBackend",
    "KernelBridgeError",
    "KernelPool",
    "KernelSession",
    "KernelStartError",
    "LaunchSpec",
    "Launcher",
    "RestoreReport",
    "Result",
    "RunningKernel",
    "SessionClosed",
    "Stream",
    "resolve_interpreter",
    "scrub_environment",
    "start_local_kernel",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kernel_bridge' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"kernel_bridge.{module}"), name)
    globals()[name] = value
    return value
