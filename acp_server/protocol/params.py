"""Typed params of the two startup methods, read without `acp.schema` and without pydantic.

`initialize` and `session/new` are answered while the wire models are still importing in the
background (wire.py: `acp.schema` and pydantic cost more than the whole startup budget), so their
params are checked here by hand into frozen dataclasses, with -32602 errors in the shape the
schema models give (`data.errors` of `{loc, msg, type}`). Every other method is validated with
`acp.schema` (the registry's `params_model`) or, where the schema has no model, with the pydantic
models of `acp_server/harness/params.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from acp_server.protocol import frames
from acp_server.protocol.errors import AcpError
from acp_server.protocol.initialize import check_initialize_params

JsonObject = dict[str, object]


@dataclass(frozen=True)
class InitializeParams:
    """`initialize`: the protocol version and what the client says about itself (objects or None)."""

    protocol_version: int
    client_capabilities: JsonObject | None = None
    client_info: JsonObject | None = None


@dataclass(frozen=True)
class NewSessionParams:
    """`session/new`: the cwd (not yet checked to be absolute) and the raw MCP server objects."""

    cwd: str
    mcp_servers: tuple[JsonObject, ...]
    additional_directories: tuple[str, ...] | None = None


async def read_initialize(params: JsonObject, method: str) -> InitializeParams:
    """`initialize` params, or -32602 naming the first bad field."""
    return initialize_params(params, method)


def initialize_params(params: JsonObject, method: str = "initialize") -> InitializeParams:
    """The typed `initialize` params (also for the early answer's params, checked by the same rule)."""
    check_initialize_params(params, method)
    version = params["protocolVersion"]
    assert isinstance(version, int)
    caps, info = params.get("clientCapabilities"), params.get("clientInfo")
    return InitializeParams(
        version, caps if isinstance(caps, dict) else None, info if isinstance(info, dict) else None
    )


async def read_new_session(params: JsonObject, method: str) -> NewSessionParams:
    """`session/new` params, or -32602 listing every bad field (the first one in the message)."""
    problems: list[tuple[str, str, str]] = []  # (field, message, pydantic-style type)
    cwd = params.get("cwd")
    if not isinstance(cwd, str):
        problems.append(("cwd", "Field required" if cwd is None else "must be a string", "missing"))
    servers = params.get("mcpServers")
    if not isinstance(servers, list) or not all(isinstance(item, dict) for item in servers):
        missing = servers is None
        problems.append(
            ("mcpServers", "Field required" if missing else "must be a list of objects", "missing")
        )
    extra_dirs = params.get("additionalDirectories")
    dirs: tuple[str, ...] | None = None
    if isinstance(extra_dirs, list) and all(isinstance(d, str) for d in extra_dirs):
        dirs = tuple(d for d in extra_dirs if isinstance(d, str))
    elif extra_dirs is not None:
        problems.append(("additionalDirectories", "must be a list of strings", "list_type"))
    if problems or not isinstance(cwd, str) or not isinstance(servers, list):
        field, msg, _ = problems[0]
        errors = [frames.param_error([f], m, t) for f, m, t in problems]
        raise AcpError.invalid_params(f"Invalid params for {method}: {field}: {msg}", errors)
    return NewSessionParams(cwd, tuple(item for item in servers if isinstance(item, dict)), dirs)


@dataclass(frozen=True)
class AuthenticateParams:
    """`authenticate`: the id of one of the advertised auth methods."""

    method_id: str


async def read_authenticate(params: JsonObject, method: str) -> AuthenticateParams:
    """`authenticate` params, or -32602 when `methodId` is not a string."""
    method_id = params.get("methodId")
    if not isinstance(method_id, str):
        msg = "Field required" if method_id is None else "must be a string"
        raise AcpError.invalid_params(
            f"Invalid params for {method}: methodId: {msg}",
            [frames.param_error(["methodId"], msg, "missing" if method_id is None else "string_type")],
        )
    return AuthenticateParams(method_id)
