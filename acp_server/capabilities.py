"""The `initialize` exchange: what the client offers and what we advertise (only what works)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from acp_server import frames
from acp_server.frames import META_KEY

if TYPE_CHECKING:
    from acp_server.params import InitializeParams

__all__ = [
    "EXTENSION_VERSION",
    "META_KEY",
    "PROTOCOL_VERSION",
    "ClientCapabilities",
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
    def from_initialize(cls, req: InitializeParams) -> ClientCapabilities:
        """Read `initialize`'s `clientCapabilities` (anything malformed counts as not offered)."""
        caps = req.client_capabilities
        if caps is None:
            return cls(client_name=_client_name(req.client_info))
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
            client_name=_client_name(req.client_info),
            raw=caps,
        )


def _client_name(info: Mapping[str, object] | None) -> str:
    name = info.get("name") if info is not None else None
    return name if isinstance(name, str) else ""


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
