"""JSON-RPC error codes used on the ACP wire and the exception handlers raise to answer with one."""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002


class AcpError(Exception):
    """Raised by a handler to answer its request with this JSON-RPC error (the server keeps running)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @classmethod
    def invalid_params(cls, message: str, data: Any = None) -> AcpError:
        return cls(INVALID_PARAMS, message, data)

    @classmethod
    def session_not_found(cls, session_id: str) -> AcpError:
        return cls(
            RESOURCE_NOT_FOUND,
            f"Unknown session {session_id!r}: it is not open and not on disk; start one with session/new",
            {"sessionId": session_id},
        )


class PeerError(Exception):
    """The client answered one of our requests with a JSON-RPC error."""

    def __init__(self, method: str, error: Any) -> None:
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else repr(error)
        super().__init__(f"client answered {method} with error {code}: {message}")
        self.method = method
        self.code = code
        self.error = error
