"""The `initialize` exchange: what the client offers and what we advertise (only what works)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from acp_server.errors import AcpError

PROTOCOL_VERSION = 1
SERVER_NAME = "continual-acp"
SERVER_TITLE = "Continual ACP (IPython kernel agent)"
# Version of our `_meta["continual-acp"]` extension surface (bumped when the methods change shape).
EXTENSION_VERSION = 1
META_KEY = "continual-acp"


@functools.cache
def server_version() -> str:
    try:
        from importlib.metadata import version

        return version("continual-acp")
    except Exception:  # not installed as a distribution (running from a bare checkout)
        return "0.0.0+unknown"


@dataclass
class ClientCapabilities:
    """The parts of `clientCapabilities` the server acts on."""

    read_text_file: bool = False
    write_text_file: bool = False
    terminal_output: bool = False  # Zed's `_meta.terminal_output`: renders the terminal trio
    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ClientCapabilities:
        caps = params.get("clientCapabilities")
        if not isinstance(caps, dict):
            return cls()
        fs_raw, meta_raw = caps.get("fs"), caps.get("_meta")
        fs: dict[str, Any] = fs_raw if isinstance(fs_raw, dict) else {}
        meta: dict[str, Any] = meta_raw if isinstance(meta_raw, dict) else {}
        return cls(
            read_text_file=fs.get("readTextFile") is True,
            write_text_file=fs.get("writeTextFile") is True,
            terminal_output=meta.get("terminal_output") is True,
            raw=caps,
        )


def check_initialize_params(params: Any) -> None:
    """Hand-checked so `initialize` never waits for the wire models (see wire.py)."""
    if not isinstance(params, dict):
        raise AcpError.invalid_params("initialize: params must be an object", {"errors": []})
    version = params.get("protocolVersion")
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= 65535:
        raise AcpError.invalid_params(
            "Invalid params for initialize: protocolVersion: must be an integer (ACP speaks 1)",
            {
                "errors": [
                    {"loc": ["protocolVersion"], "msg": "must be an integer 0..65535", "type": "int_type"}
                ]
            },
        )
    for key in ("clientCapabilities", "clientInfo"):
        if key in params and params[key] is not None and not isinstance(params[key], dict):
            raise AcpError.invalid_params(
                f"Invalid params for initialize: {key}: must be an object",
                {"errors": [{"loc": [key], "msg": "must be an object", "type": "dict_type"}]},
            )


def initialize_result(extension_methods: list[str], extension_notifications: list[str]) -> dict[str, Any]:
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentInfo": {"name": SERVER_NAME, "title": SERVER_TITLE, "version": server_version()},
        "authMethods": [],
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            # stdio always; both HTTP transports through the MCP SDK (agent_core/mcp), tested.
            "mcpCapabilities": {"http": True, "sse": True},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
            "_meta": {
                META_KEY: {
                    "version": EXTENSION_VERSION,
                    "methods": extension_methods,
                    "notifications": extension_notifications,
                }
            },
        },
    }
