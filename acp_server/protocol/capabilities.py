"""The `initialize` exchange: what the client offers and what we advertise (only what works)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from acp_server.protocol.frames import META_KEY

# The `initialize` answer lives in initialize.py (the early answer imports it without this module).
from acp_server.protocol.initialize import EXTENSION_VERSION, PROTOCOL_VERSION, initialize_result

if TYPE_CHECKING:
    from acp_server.protocol.params import InitializeParams

__all__ = [
    "EXTENSION_VERSION",
    "META_KEY",
    "PROTOCOL_VERSION",
    "ClientCapabilities",
    "initialize_result",
]


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
    plan: bool = False  # `plan` (unstable v1): the plan goes as `plan_update` by id instead of `plan`
    # `subagents` (unstable v1): each child's life goes as `subagent_update` instead of a card.
    subagents: bool = False
    # The unstable `usage` of the prompt response. The schema names no capability for it: a client
    # takes it when it advertised an unstable capability we honour (`plan`, `subagents`: it speaks
    # the unstable schema that defines `usage`) or opted in with `_meta["continual-acp"].usage: true`.
    usage: bool = False
    # `elicitation.form` (stable v1): reviews go as `elicitation/create` forms instead of a permission
    # request, and `editor.ask()` from a cell can be answered.
    elicitation_form: bool = False
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
        plan, subagents = isinstance(caps.get("plan"), dict), isinstance(caps.get("subagents"), dict)
        return cls(
            read_text_file=fs.get("readTextFile") is True,
            write_text_file=fs.get("writeTextFile") is True,
            terminal_output=meta.get("terminal_output") is True,
            quiescence=ours.get("quiescence") is True,
            # `{}` advertises the capability; omitted or null does not (schema.json).
            notices=isinstance(session.get("notices"), dict),
            compaction=isinstance(session.get("compaction"), dict),
            plan=plan,
            subagents=subagents,
            usage=plan or subagents or ours.get("usage") is True,
            elicitation_form=_advertises_form(caps.get("elicitation")),
            client_name=_client_name(req.client_info),
            raw=caps,
        )


def _client_name(info: Mapping[str, object] | None) -> str:
    name = info.get("name") if info is not None else None
    return name if isinstance(name, str) else ""


def _advertises_form(elicitation: object) -> bool:
    """`elicitation: {form: {}}` advertises forms; omitted or null does not (schema.json)."""
    return isinstance(elicitation, dict) and isinstance(elicitation.get("form"), dict)
