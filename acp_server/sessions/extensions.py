"""The `_session/*` extension methods: `_session/rewind` and `_session/steer`.

Advertised under `agentCapabilities._meta["continual-acp"].methods` with the `_harness/*` ones.
Params are checked by hand (a small surface): a wrong one is -32602 naming the field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acp_server.protocol.errors import AcpError

if TYPE_CHECKING:
    from acp.schema import PromptRequest

    from acp_server.ports import HarnessHost
    from acp_server.protocol.registry import RequestContext

JsonObject = dict[str, object]

SESSION_METHODS: tuple[str, ...] = ("_session/rewind", "_session/steer")


class RewindParams:
    """`_session/rewind`'s params, checked (a plain class: this module is on the startup path,
    where even `dataclasses` is not imported before the first `initialize` is answered)."""

    __slots__ = ("files", "message_id", "rollback", "session_id", "turns")

    def __init__(
        self, session_id: str, turns: int | None, message_id: str | None, files: bool, rollback: bool | None
    ) -> None:
        self.session_id = session_id
        self.turns = turns
        self.message_id = message_id
        self.files = files
        self.rollback = rollback


class AnchoredRewindParams:
    """`_session/rewind` in the shape other ACP agents speak: `{sessionId, beforeMessage: {messageId,
    messageFingerprint?, messageOccurrence?}, resumeAtMessage?}`, answered `{rewound}`."""

    __slots__ = ("fingerprint", "message_id", "occurrence", "session_id")

    def __init__(self, session_id: str, message_id: str, fingerprint: str | None, occurrence: int) -> None:
        self.session_id = session_id
        self.message_id = message_id
        self.fingerprint = fingerprint
        self.occurrence = occurrence


def _anchored(params: JsonObject, method: str, session_id: str) -> AnchoredRewindParams:
    before = params.get("beforeMessage")
    if not isinstance(before, dict):
        raise AcpError.invalid_params(f"Invalid params for {method}: beforeMessage: must be an object")
    for ours in ("turns", "messageId", "files", "rollbackRefinements"):
        if ours in params:
            raise AcpError.invalid_params(
                f"Invalid params for {method}: beforeMessage and {ours} are two shapes of this method; "
                f"give one"
            )
    message_id = before.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        raise AcpError.invalid_params(
            f"Invalid params for {method}: beforeMessage.messageId: must be a non-empty string"
        )
    fingerprint = before.get("messageFingerprint")
    if fingerprint is not None and (
        not isinstance(fingerprint, str) or not fingerprint.startswith("sha256:")
    ):
        raise AcpError.invalid_params(
            f'Invalid params for {method}: beforeMessage.messageFingerprint: must be "sha256:" and a hex digest'
        )
    occurrence = before.get("messageOccurrence", 1)
    if isinstance(occurrence, bool) or not isinstance(occurrence, int) or occurrence < 1:
        raise AcpError.invalid_params(
            f"Invalid params for {method}: beforeMessage.messageOccurrence: must be an integer >= 1"
        )
    return AnchoredRewindParams(session_id, message_id, fingerprint, occurrence)


def _session_id(params: JsonObject, method: str) -> str:
    value = params.get("sessionId")
    if not isinstance(value, str) or not value:
        raise AcpError.invalid_params(f"Invalid params for {method}: sessionId: must be a non-empty string")
    return value


async def read_rewind(params: JsonObject, method: str) -> RewindParams | AnchoredRewindParams:
    if not isinstance(params, dict):
        raise AcpError.invalid_params(f"{method}: params must be an object")
    session_id = _session_id(params, method)
    if "beforeMessage" in params:
        return _anchored(params, method, session_id)
    turns, message_id = params.get("turns"), params.get("messageId")
    if turns is not None and message_id is not None:
        raise AcpError.invalid_params(f"Invalid params for {method}: give turns or messageId, not both")
    if turns is not None and (isinstance(turns, bool) or not isinstance(turns, int) or turns < 1):
        raise AcpError.invalid_params(f"Invalid params for {method}: turns: must be an integer >= 1")
    if message_id is not None and (not isinstance(message_id, str) or not message_id):
        raise AcpError.invalid_params(f"Invalid params for {method}: messageId: must be a non-empty string")
    files = params.get("files", False)
    if not isinstance(files, bool):
        raise AcpError.invalid_params(f"Invalid params for {method}: files: must be true or false")
    rollback = params.get("rollbackRefinements")
    if rollback is not None and not isinstance(rollback, bool):
        raise AcpError.invalid_params(
            f"Invalid params for {method}: rollbackRefinements: must be true or false"
        )
    return RewindParams(session_id, turns, message_id, files, rollback)


class StatusParams:
    __slots__ = ("session_id",)

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id


class TitleParams:
    __slots__ = ("session_id", "title")

    def __init__(self, session_id: str, title: str) -> None:
        self.session_id = session_id
        self.title = title


async def read_status(params: JsonObject, method: str) -> StatusParams:
    if not isinstance(params, dict):
        raise AcpError.invalid_params(f"{method}: params must be an object")
    return StatusParams(_session_id(params, method))


async def read_title(params: JsonObject, method: str) -> TitleParams:
    if not isinstance(params, dict):
        raise AcpError.invalid_params(f"{method}: params must be an object")
    title = params.get("title")
    if not isinstance(title, str) or not title.strip():
        raise AcpError.invalid_params(f"Invalid params for {method}: title: must be a non-empty string")
    return TitleParams(_session_id(params, method), title)


def install(server: HarnessHost) -> None:
    """Register the `_session/*` methods, and the unstable `session/status` and `session/set_title`
    (advertised as `sessionCapabilities.status` / `.title`)."""

    async def status(ctx: RequestContext, request: StatusParams) -> JsonObject:
        from acp_server.protocol import frames
        from acp_server.sessions.ids import check_session_id

        agent = await server.agent()
        check_session_id(agent, request.session_id)  # a symlinked or file-blocked dir: -32602 naming it
        if agent.get_session(request.session_id) is not None:
            return frames.session_status_response("open")
        if agent.session_exists(request.session_id):
            return frames.session_status_response("saved")
        raise AcpError.session_not_found(request.session_id)

    async def set_title(ctx: RequestContext, request: TitleParams) -> JsonObject:
        from acp_server.protocol import frames

        opened = await server.open_session(request.session_id)
        try:
            title = opened.session.set_title(request.title)
        except ValueError:  # nothing left once control characters are dropped
            raise AcpError.invalid_params(
                "Invalid params for session/set_title: title: has no text to show (only whitespace or "
                "control characters)"
            ) from None
        await server.send_update(request.session_id, frames.session_title_update(title))
        return {}

    server.registry.request("session/status", reader=read_status)(status)
    server.registry.request("session/set_title", reader=read_title)(set_title)

    async def rewind(ctx: RequestContext, request: RewindParams | AnchoredRewindParams) -> JsonObject:
        from acp_server.commands import rewind_commands as rewinding
        from agent_core.history.rewind import RewindError

        if isinstance(request, AnchoredRewindParams):
            return await rewind_anchored(request)
        opened = await server.open_session(request.session_id)
        if opened.prompt_lock.locked():
            raise AcpError.invalid_params(
                f"_session/rewind: session {request.session_id} is running a prompt; cancel it first"
            )
        async with opened.prompt_lock:
            try:
                report = await rewinding.rewind(
                    opened,
                    turns=request.turns,
                    message_id=request.message_id,
                    files=request.files,
                    rollback=request.rollback,
                )
            except RewindError as exc:
                raise AcpError.invalid_params(f"_session/rewind: {exc}") from None
        return report.to_wire()

    async def rewind_anchored(request: AnchoredRewindParams) -> JsonObject:
        """Before the anchored user message: that prompt and all after it go, the kernel's variables
        come back as ours does; files stay (the client keeps its own checkpoints of them). A running
        prompt answers `{rewound: false}`, as the other agents that speak this shape do."""
        from acp_server.commands import rewind_commands as rewinding
        from acp_server.protocol import frames
        from agent_core.history.message_anchor import prompt_anchor
        from agent_core.history.rewind import RewindError

        opened = await server.open_session(request.session_id)
        if opened.prompt_lock.locked() or opened.session.busy:
            return frames.anchored_rewind_response(False)
        async with opened.prompt_lock:
            message_id = prompt_anchor(
                opened.session, request.message_id, request.fingerprint, request.occurrence
            )
            if message_id is None:
                raise AcpError.invalid_params(
                    f"_session/rewind: message {request.message_id!r} was not found in session "
                    f"{request.session_id} (by id{' or fingerprint' if request.fingerprint else ''})"
                )
            try:
                report = await rewinding.rewind(opened, message_id=message_id, files=False, rollback=None)
            except RewindError as exc:
                raise AcpError.invalid_params(f"_session/rewind: {exc}") from None
        return frames.anchored_rewind_response(report.rewound)

    server.registry.request("_session/rewind", reader=read_rewind)(rewind)

    async def steer(ctx: RequestContext, request: PromptRequest) -> JsonObject:
        # Same params as session/prompt ({sessionId, prompt}): read with its schema model.
        from acp_server.turn.session_prompt import steer_into

        opened = await server.open_session(request.session_id)
        if not opened.session.busy and not opened.unanswered_prompts:
            raise AcpError.invalid_params(
                f"_session/steer: no turn is running in session {request.session_id}; send it with session/prompt"
            )
        # From the moment a prompt is received: a turn still waiting for the kernel or the lock takes
        # the message at its first model request.
        entered = await steer_into(opened, request.prompt, queue=True)
        if entered:
            return {"entered": True}
        return {"entered": False, "reason": "the turn ended before its next model request; nothing was sent"}

    server.registry.request("_session/steer", params_model="PromptRequest")(steer)
