"""How the client answers the agent's requests: permission, `fs/*` inside a root, elicitation, and
method-not-found for the rest.

`ClientPolicy.answer(request)` returns the `result` to send, None to leave the request unanswered
(a test holding a permission prompt open), or raises `AgentRequestError` for an error answer. Each
method is one overridable method, so a caller changes one answer without re-implementing dispatch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002  # ACP's code for a file the client does not have

PermissionChooser = Callable[[dict[str, Any]], dict[str, Any]]
ElicitationAnswer = Callable[[dict[str, Any]], dict[str, Any]]


class AgentRequestError(Exception):
    """Answer the agent's request with this JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def allow_once(params: dict[str, Any]) -> dict[str, Any]:
    """Pick the "allow once" option (else the first offered); cancelled when none is offered."""
    options = params.get("options") or []
    chosen = next((o for o in options if o.get("kind") == "allow_once"), options[0] if options else None)
    if chosen is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": chosen["optionId"]}}


def select(option_id: str) -> PermissionChooser:
    """Always pick the option with this id."""
    return lambda params: {"outcome": {"outcome": "selected", "optionId": option_id}}


class ClientPolicy:
    """The answers of a client that advertises `fs` for the files under `root` (None: no `fs`, the
    requests get method-not-found) and, when `elicitation` is given, form elicitation."""

    def __init__(
        self,
        *,
        permission: PermissionChooser = allow_once,
        root: Path | None = None,
        elicitation: ElicitationAnswer | None = None,
    ) -> None:
        self.permission = permission
        self.root = root.resolve() if root is not None else None
        self.elicitation = elicitation

    def answer(self, request: Mapping[str, Any]) -> dict[str, Any] | None:
        method = str(request.get("method"))
        params = request.get("params")
        params = params if isinstance(params, dict) else {}
        if method == "session/request_permission":
            return self.request_permission(params)
        if method == "fs/read_text_file":
            return self.read_text_file(params)
        if method == "fs/write_text_file":
            return self.write_text_file(params)
        if method == "elicitation/create":
            return self.create_elicitation(params)
        return self.unknown(method, params)

    def request_permission(self, params: dict[str, Any]) -> dict[str, Any] | None:
        return self.permission(params)

    def create_elicitation(self, params: dict[str, Any]) -> dict[str, Any] | None:
        if self.elicitation is None:
            return self.unknown("elicitation/create", params)
        return self.elicitation(params)

    def unknown(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        raise AgentRequestError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def inside_root(self, method: str, params: dict[str, Any]) -> Path:
        """The request's path, if it is an absolute path under the root (symlinks resolved)."""
        if self.root is None:
            self.unknown(method, params)
        assert self.root is not None
        raw = params.get("path")
        if not isinstance(raw, str) or not Path(raw).is_absolute():
            raise AgentRequestError(INVALID_PARAMS, f"{method}: path must be absolute, got {raw!r}")
        path = Path(raw).resolve()
        if not path.is_relative_to(self.root):
            raise AgentRequestError(INVALID_PARAMS, f"{method}: {raw} is outside {self.root}")
        return path

    def read_text_file(self, params: dict[str, Any]) -> dict[str, Any] | None:
        path = self.inside_root("fs/read_text_file", params)
        try:
            return {"content": path.read_text(encoding="utf-8")}
        except FileNotFoundError:
            raise AgentRequestError(RESOURCE_NOT_FOUND, f"no {params['path']}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise AgentRequestError(INTERNAL_ERROR, f"reading {params['path']}: {exc}") from None

    def write_text_file(self, params: dict[str, Any]) -> dict[str, Any] | None:
        path = self.inside_root("fs/write_text_file", params)
        content = params.get("content")
        if not isinstance(content, str):
            raise AgentRequestError(INVALID_PARAMS, "fs/write_text_file: content must be a string")
        try:
            path.write_text(content, encoding="utf-8")
        except OSError as exc:
            raise AgentRequestError(INTERNAL_ERROR, f"writing {params['path']}: {exc}") from None
        return {}
