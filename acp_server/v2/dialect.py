"""A v2 connection's state: each session's foreground state and background list, and the v2 shape
of every frame the transport writes (`transport.Dialect`).

Foreground work is the prompts in flight (`lifecycle.py` begins and ends them): `running` while
any runs, `requires_action` while one waits for the user's answer to a permission request of its
own (a subagent's request is its child's, background, work), `idle` when none is left (with the
stop reason that ended the last). Background work is v1's quiescence mirror (`background.py`,
sent on every change): each change is also reported as a snapshot of the current state, so a
client sees refinement and children settle after the turn as idle snapshots whose list empties.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from acp_server.protocol.errors import AcpError
from acp_server.v2 import builders, reshape

Frame = dict[str, object]
Outbound = list[tuple[str, Any]]  # (method, params) notifications to write

META_KEY = "continual-acp"
UPDATE = "session/update"
PERMISSION = "session/request_permission"
RESHAPED_RESULTS = ("session/new", "session/resume", "session/load", "session/set_config_option")
RESUMED = ("session/resume", "session/load")  # the answer follows a snapshot of the session's state
CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")


@dataclass
class _Session:
    active: int = 0  # prompts in flight
    waiting: int = 0  # the foreground's permission requests not answered yet
    background: list[Frame] = field(default_factory=list)
    run: int = 0  # foreground runs so far (ids of v1 chunks sent without one are per run)
    last: str = "idle"  # the state last reported

    @property
    def state(self) -> str:
        if not self.active:
            return "idle"
        return "requires_action" if self.waiting else "running"


class V2Dialect:
    """What `transport.Connection` consults for a v2 connection (one per connection)."""

    def __init__(self, send: Callable[[str, Any], Awaitable[None]]) -> None:
        self._send = send  # writes one notification as is (no second pass through this dialect)
        self._sessions: dict[str, _Session] = {}

    def _session(self, session_id: str) -> _Session:
        return self._sessions.setdefault(session_id, _Session())

    def _snapshot(
        self, session_id: str, stop_reason: str | None = None, error: Any = None
    ) -> tuple[str, Any]:
        s = self._session(session_id)
        s.last = s.state
        update = builders.state_update(s.state, s.background, stop_reason=stop_reason, error=error)
        return UPDATE, {"sessionId": session_id, "update": update}

    # ------------------------------------------------------------ the prompt lifecycle

    def new_message_id(self, *, steer: bool = False) -> str:
        """A user message's id; a steering message's carries agent_core's steering prefix."""
        return f"{'steer' if steer else 'user'}_{uuid.uuid4().hex[:12]}"

    async def begin(self, session_id: str, message_id: str, content: Sequence[Mapping[str, object]]) -> None:
        """A prompt was accepted: echo it, and report `running` if nothing ran."""
        s = self._session(session_id)
        await self._send(
            UPDATE, {"sessionId": session_id, "update": builders.user_message(message_id, content)}
        )
        s.active += 1
        if s.active == 1:
            s.run += 1
            await self._send(*self._snapshot(session_id))

    async def end(self, session_id: str, stop_reason: str, error: Mapping[str, object] | None = None) -> None:
        """A prompt's work ended: `idle` with its stop reason once no other prompt runs."""
        s = self._session(session_id)
        s.active = max(0, s.active - 1)
        if not s.active:
            s.waiting = 0
            await self._send(*self._snapshot(session_id, stop_reason, error))

    # ------------------------------------------------------------ what the transport writes

    def inbound(self, message: dict[str, Any]) -> dict[str, Any]:
        """`session/resume` with `replayFrom: {type: "start"}` is what v1 calls `session/load`: the
        history is replayed (in v2 shapes) before the answer. Any other cursor raises -32602 (the
        draft forbids resuming without the replay asked for). Everything else is served as sent."""
        params = message.get("params")
        if message.get("method") != "session/resume" or not isinstance(params, Mapping):
            return message
        replay = params.get("replayFrom")
        if replay is None:
            return message
        if not isinstance(replay, Mapping) or replay.get("type") != "start":
            kind = replay.get("type") if isinstance(replay, Mapping) else None
            said = f"{kind!r}" if isinstance(kind, str) else "without a type"
            raise AcpError.invalid_params(
                f"session/resume: replayFrom {said} is not a cursor this agent replays from; "
                'replay from {"type": "start"}, or resume without replayFrom'
            )
        load = {k: v for k, v in params.items() if k != "replayFrom"}
        load.setdefault("mcpServers", [])
        return {**message, "method": "session/load", "params": load}

    def notification(self, method: str, params: Any) -> Outbound:
        if (
            method != UPDATE
            or not isinstance(params, Mapping)
            or not isinstance(params.get("update"), Mapping)
        ):
            return [(method, params)]
        session_id, update = str(params.get("sessionId")), params["update"]
        reshaped = reshape.session_update(update)
        if reshaped is None:
            return []
        s = self._session(session_id)
        kind = str(reshaped.get("sessionUpdate"))
        if kind in CHUNKS and not reshaped.get("messageId"):
            # v2 names every message: chunks v1 sent without an id join one message per run and kind.
            reshaped["messageId"] = f"{kind.removesuffix('_chunk')}_{s.run}"
        out: Outbound = [(method, {**params, "update": reshaped})]
        background = _mirror_background(update)
        if background is not None and background != s.background:
            s.background = background
            out.append(self._snapshot(session_id))
        return out

    def request(self, method: str, params: Any) -> tuple[Outbound, Any]:
        """An agent->client request's v2 params, and the state change it causes (sent first)."""
        if method != PERMISSION or not isinstance(params, Mapping):
            return [], params
        session_id = str(params.get("sessionId"))
        s = self._session(session_id)
        before: Outbound = []
        if s.active and not _for_subagent(params):
            s.waiting += 1
            if s.state != s.last:
                before.append(self._snapshot(session_id))
        return before, reshape.permission_request(params)

    def answered(self, method: str, params: Any) -> Outbound:
        """The request was answered (or abandoned): back to `running` once nothing else waits."""
        if method != PERMISSION or not isinstance(params, Mapping) or _for_subagent(params):
            return []
        session_id = str(params.get("sessionId"))
        s = self._session(session_id)
        if not s.waiting:
            return []
        s.waiting -= 1
        return [self._snapshot(session_id)] if s.active and s.state != s.last else []

    def result(self, method: str, params: Any, result: Any) -> tuple[Outbound, Any]:
        """A result's v2 shape, and what must precede it: a resumed session's current state."""
        before: Outbound = []
        if method in RESUMED and isinstance(params, Mapping) and isinstance(params.get("sessionId"), str):
            before.append(self._snapshot(params["sessionId"]))
        if method in RESHAPED_RESULTS and isinstance(result, Mapping):
            return before, reshape.session_result(result)
        return before, result


def _for_subagent(params: Mapping[str, Any]) -> bool:
    meta = params.get("_meta")
    ours = meta.get(META_KEY) if isinstance(meta, Mapping) else None
    return isinstance(ours, Mapping) and "subagent" in ours


def _mirror_background(update: Mapping[str, Any]) -> list[Frame] | None:
    """The v2 background list in v1's quiescence mirror (None: this update is not the mirror)."""
    if update.get("sessionUpdate") != "session_info_update":
        return None
    meta = update.get("_meta")
    ours = meta.get(META_KEY) if isinstance(meta, Mapping) else None
    quiescence = ours.get("quiescence") if isinstance(ours, Mapping) else None
    items = quiescence.get("background") if isinstance(quiescence, Mapping) else None
    if not isinstance(items, list):
        return None
    return [builders.background_work(item) for item in items if isinstance(item, Mapping)]
