"""The `initialize` exchange: what the client offers and what we advertise (only what works)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from acp_server import frames
from acp_server.errors import AcpError
from acp_server.frames import META_KEY

__all__ = [
    "EXTENSION_VERSION",
    "META_KEY",
    "PROTOCOL_VERSION",
    "ClientCapabilities",
    "check_initialize_params",
    "initialize_result",
]

PROTOCOL_VERSION = 1
SERVER_NAME = "continual-acp"
SERVER_TITLE = "Continual ACP (IPython kernel agent)"
# Version of our `_meta["continual-acp"]` extension surface (bumped when the methods change shape).
EXTENSION_VERSION = 1


@functools.cache
def server_version() -> str:
    """The installed distribution's version (a placeholder when running from a bare checkout)."""
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
    # `_meta["continual-acp"].quiescence: true`: the client handles our `_harness/quiescence`
    # notification; everyone else gets only its `session_info_update` mirror.
    quiescence: bool = False
    notices: bool = False  # `session.notices` (ACP v1): `notice` updates instead of agent messages
    compaction: bool = False  # `session.compaction` (ACP v1): `compaction_update` / `_summary_chunk`
    client_name: str = ""  # `clientInfo.name` (client_quirks.py: how some clients title cards)
    raw: dict[str, object] = field(default_factory=dict)

    @classmethod
    def from_params(cls, params: Mapping[str, object]) -> ClientCapabilities:
        """Read `initialize`'s `clientCapabilities` (anything malformed counts as not offered)."""
        caps = params.get("clientCapabilities")
        if not isinstance(caps, dict):
            return cls(client_name=_client_name(params))
        fs_raw, meta_raw = caps.get("fs"), caps.get("_meta")
        fs: dict[str, object] = fs_raw if isinstance(fs_raw, dict) else {}
        meta: dict[str, object] = meta_raw if isinstance(meta_raw, dict) else {}
        ours_raw, session_raw = meta.get(META_KEY), caps.get("session")
        ours: dict[str, object] = ours_raw if isinstance(ours_raw, dict) else {}
        session: dict[str, object] = session_raw if isinstance(session_raw, dict) else {}
        return cls(
            read_text_file=fs.get("readTextFile") is True,
            write_text_file=fs.get("writeTextFile") is True,
            terminal_output=meta.get("terminal_output") is True,
            quiescence=ours.get("quiescence") is True,
            # `{}` advertises the capability; omitted or null does not (schema.json).
            notices=isinstance(session.get("notices"), dict),
            compaction=isinstance(session.get("compaction"), dict),
            client_name=_client_name(params),
            raw=caps,
        )


def _client_name(params: Mapping[str, object]) -> str:
    info = params.get("clientInfo")
    name = info.get("name") if isinstance(info, dict) else None
    return name if isinstance(name, str) else ""


def check_initialize_params(params: object) -> None:
    """Hand-checked so `initialize` never waits for the wire models (see wire.py)."""
    if not isinstance(params, dict):
        raise AcpError.from_error(frames.invalid_params_error("initialize: params must be an object", []))
    version = params.get("protocolVersion")
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= 65535:
        raise AcpError.from_error(
            frames.invalid_params_error(
                "Invalid params for initialize: protocolVersion: must be an integer (ACP speaks 1)",
                [frames.param_error(["protocolVersion"], "must be an integer 0..65535", "int_type")],
            )
        )
    for key in ("clientCapabilities", "clientInfo"):
        if key in params and params[key] is not None and not isinstance(params[key], dict):
            raise AcpError.from_error(
                frames.invalid_params_error(
                    f"Invalid params for initialize: {key}: must be an object",
                    [frames.param_error([key], "must be an object", "dict_type")],
                )
            )


def initialize_result(
    extension_methods: Sequence[str], extension_notifications: Sequence[str]
) -> frames.Frame:
    """The `initialize` answer: this server's name and version, what works, our extension surface."""
    return frames.initialize_response(
        protocol_version=PROTOCOL_VERSION,
        name=SERVER_NAME,
        title=SERVER_TITLE,
        version=server_version(),
        extension_version=EXTENSION_VERSION,
        extension_methods=extension_methods,
        extension_notifications=extension_notifications,
    )
