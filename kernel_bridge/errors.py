"""Exceptions kernel_bridge raises; each message says what failed and what to do."""

from __future__ import annotations


class KernelBridgeError(Exception):
    """Base class for every error this package raises on purpose."""


class KernelStartError(KernelBridgeError):
    """A kernel could not be started (bad interpreter, ipykernel missing, timed out)."""


class InterpreterNotFound(KernelStartError):
    """The configured kernel interpreter does not exist or is not executable."""

    def __init__(self, path: str, detail: str = "") -> None:
        self.path = path
        message = f"kernel interpreter not found: {path}"
        if detail:
            message += f" ({detail})"
        message += "; set the kernel interpreter to a Python that has ipykernel installed"
        super().__init__(message)


class SessionClosed(KernelBridgeError):
    """The kernel session was shut down; acquire a new one."""
