"""JSON-RPC error codes used on the ACP wire and the exception handlers raise to answer with one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from acp_server.protocol import frames
from acp_server.protocol.frames import (
    AUTH_REQUIRED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
)

__all__ = [
    "AUTH_REQUIRED",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "AcpError",
    "PeerError",
]


class AcpError(Exception):
    """Raised by a handler to answer its request with this JSON-RPC error (the server keeps running)."""

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> frames.Frame:
        """The JSON-RPC error object this exception answers with."""
        return frames.rpc_error(self.code, self.message, self.data)

    @classmethod
    def from_error(cls, error: frames.Frame) -> AcpError:
        """Raise a `frames.*_error` object as the answer: `raise AcpError.from_error(frames....)`."""
        code, message = error["code"], error["message"]
        assert isinstance(code, int) and isinstance(message, str)
        return cls(code, message, error.get("data"))

    @classmethod
    def invalid_params(cls, message: str, errors: Sequence[Mapping[str, object]] | None = None) -> AcpError:
        """-32602 with this message (and, with `errors`, the validation details as `data.errors`)."""
        return cls.from_error(frames.invalid_params_error(message, errors))

    @classmethod
    def session_not_found(cls, session_id: str) -> AcpError:
        """-32002: the session is not open and not on disk."""
        return cls.from_error(frames.session_not_found_error(session_id))


class PeerError(Exception):
    """The client answered one of our requests with a JSON-RPC error."""

    def __init__(self, method: str, error: object) -> None:
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else repr(error)
        super().__init__(f"client answered {method} with error {code}: {message}")
        self.method = method
        self.code = code
        self.error = error
