"""`session/prompt`: a slash command, or one agent turn streamed as `session/update`s.

Every update of the turn is flushed before the response; a cancelled turn answers
`stopReason: "cancelled"` (never an error); a final model failure answers a JSON-RPC error whose
message says which endpoint failed and what to check.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio

from acp_server.commands.slash_commands import SKILL_PREFIX, CommandRunner, parse_command, skill_prompt
from acp_server.harness.review import ask_pending_reviews, wait_for_settlement
from acp_server.ports import CommandContext
from acp_server.protocol import frames
from acp_server.protocol.errors import AcpError
from acp_server.sessions.config_options import config_options
from acp_server.turn.usage import TurnUsage

if TYPE_CHECKING:
    from acp.schema import (
        AudioContentBlock,
        EmbeddedResourceContentBlock,
        ImageContentBlock,
        PromptRequest,
        ResourceContentBlock,
        TextContentBlock,
    )

    from acp_server.ports import OpenSession, PromptHost, ServerPort
    from acp_server.protocol.registry import RequestContext
    from agent_core.events import PromptPart
    from agent_core.session import Session

    ContentBlock = (
        TextContentBlock
        | ImageContentBlock
        | AudioContentBlock
        | ResourceContentBlock
        | EmbeddedResourceContentBlock
    )

log = logging.getLogger(__name__)

# `wait_for_refinement`: how long a prompt may wait for background refinement to settle.
WAIT_FOR_REFINEMENT_SECONDS = 600.0


def _wants_settlement(session: Session) -> bool:
    return bool(session.config.get("wait_for_refinement"))


def register_prompt(server: PromptHost) -> None:
    async def on_cancel_request(ctx: RequestContext) -> None:
        # `$/cancel_request` for a prompt = session/cancel: the prompt still answers `cancelled`.
        session_id = ctx.extras.get("sessionId")
        if isinstance(session_id, str):
            await server.cancel_session(session_id)

    async def prompt(ctx: RequestContext, req: PromptRequest) -> dict[str, object]:
        ctx.extras["sessionId"] = req.session_id
        opened = await server.open_session(req.session_id)
        opened.unanswered_prompts += 1
        try:
            return await _answer(ctx, req, opened)
        finally:
            opened.unanswered_prompts -= 1
            if opened.unanswered_prompts == 0 and not opened.session.busy:
                opened.session.drop_steering()  # queued for a turn that never came (a command)

    async def _answer(ctx: RequestContext, req: PromptRequest, opened: OpenSession) -> dict[str, object]:
        blocks = [block.model_dump(by_alias=True, exclude_none=True) for block in req.prompt]
        generation = opened.cancel_generation
        early = parse_command(blocks)
        if early is not None and early[0] in ("kernel", "agents"):  # /agents too
            # `/kernel` (status, interrupt, restart) answers now: waiting behind the running turn
            # would make `/kernel interrupt` useless and `/kernel status` stale.
            await _command_runner(server, req.session_id, opened, req.prompt).run(*early)
            return frames.prompt_response("end_turn")
        if early is None and opened.prompt_lock.locked() and _steers(opened.session):
            # `while_busy = steer`: this prompt joins the running turn at its next model request and
            # answers when that turn ends, with its stop reason. A turn that ends first leaves it
            # queued as usual.
            if await steer_into(opened, req.prompt):
                async with opened.prompt_lock:
                    pass  # the joined turn's prompt holds the lock until it has answered
                if opened.cancel_generation != generation:
                    return frames.prompt_response("cancelled")
                return frames.prompt_response(opened.last_stop_reason or "end_turn")
        async with opened.prompt_lock:
            if opened.cancel_generation != generation:
                return frames.prompt_response("cancelled")  # cancelled while it waited for the running turn
            await server.refresh_commands(opened)
            command = parse_command(blocks)
            if command is not None and command[0].startswith(SKILL_PREFIX):
                # `/skill:<name> task`: a model turn that starts from the skill's full instructions.
                # Off the loop: it reads the skill's SKILL.md from the repository.
                text = await anyio.to_thread.run_sync(
                    skill_prompt, opened.session, command[0][len(SKILL_PREFIX) :], command[1]
                )
                if text is not None:
                    from agent_core import TextPart

                    parts = [TextPart(text), *(_prompt_part(b) for b in req.prompt[1:])]
                    used = TurnUsage(opened.session.usage_totals)
                    stop_reason = await _run_turn(opened, parts, generation, used)
                    return frames.prompt_response(stop_reason, _usage_for(server, used))
            if command is not None:
                # A command may ask the model (`/refine`, `/compact`): cancelling the prompt cancels
                # that request too, and the lock is free for the next prompt at once.
                with opened.cancellable() as scope:
                    if opened.cancel_generation != generation:
                        scope.cancel()  # cancelled while the command list was refreshed
                    await _command_runner(server, req.session_id, opened, req.prompt).run(*command)
                return frames.prompt_response(
                    "cancelled" if opened.cancel_generation != generation else "end_turn"
                )
            parts = [_prompt_part(block) for block in req.prompt]
            # Proposals that arrived after an earlier turn ended are asked before this one starts.
            if not await ask_pending_reviews(opened, generation):
                return frames.prompt_response("cancelled")
            used = TurnUsage(opened.session.usage_totals)
            stop_reason = await _run_turn(opened, parts, generation, used)
            opened.last_stop_reason = stop_reason
            if _wants_settlement(opened.session) and stop_reason != "cancelled":
                with opened.cancellable():
                    await wait_for_settlement(opened, WAIT_FOR_REFINEMENT_SECONDS)
            return frames.prompt_response(
                "cancelled" if opened.cancel_generation != generation else stop_reason,
                _usage_for(server, used),
            )

    from acp_server.v2.lifecycle import acknowledging

    class RunningTurn:
        """v2: a prompt sent while one is unanswered steers it (the draft's `session.steering`)."""

        async def running(self, session_id: str) -> bool:
            opened = await server.open_session(session_id)
            return opened.session.busy or opened.unanswered_prompts > 0

        async def join(self, req: PromptRequest, message_id: str) -> bool:
            opened = await server.open_session(req.session_id)
            return await steer_into(opened, req.prompt, queue=True, message_id=message_id)

    # A v2 connection gets the answer at once and the turn framed by `state_update`s (acp_server/v2).
    server.registry.request(
        "session/prompt", params_model="PromptRequest", on_cancel_request=on_cancel_request
    )(acknowledging(prompt, server.v2_dialect, server.open_session, RunningTurn()))


def _usage_for(server: ServerPort, used: TurnUsage) -> frames.Frame | None:
    """The turn's `usage` (unstable) for a client that takes it (`ClientCapabilities.usage`)."""
    return used.frame() if server.client.usage else None


def _steers(session: Session) -> bool:
    return session.busy and session.agent_config.while_busy == "steer"


async def steer_into(
    opened: OpenSession, prompt: Sequence[ContentBlock], *, queue: bool = False, message_id: str | None = None
) -> bool:
    """Send `prompt` into the session's running turn; True once it entered at a model request, False
    when the turn ended first (or none runs). With `queue`, a turn that has not started yet (its
    prompt is unanswered) takes it at its first request."""
    try:
        future = opened.session.steer(
            [_prompt_part(block) for block in prompt], queue=queue, message_id=message_id
        )
    except RuntimeError:
        return False
    return await future


def _command_runner(
    server: ServerPort, session_id: str, opened: OpenSession, prompt: Sequence[ContentBlock] = ()
) -> CommandRunner:
    """A runner whose replies are one agent message (and whose mode switches are announced).

    The exchange goes into the transcript (the command as a user message, the replies as one agent
    message), so `session/load` replays the same thread the user saw.
    """
    from agent_core import MessageChunk, UserMessage

    message_id = f"cmd-{uuid.uuid4().hex[:12]}"
    record = opened.session.record_event
    if prompt:
        record(UserMessage(tuple(_prompt_part(block) for block in prompt), f"{message_id}-user"))

    async def reply(text: str) -> None:
        record(MessageChunk(text, message_id))
        await server.send_update(session_id, frames.agent_message_update(text, message_id))

    async def reply_once(text: str, recorded: str) -> None:
        record(MessageChunk(recorded, message_id))
        await server.send_update(session_id, frames.agent_message_update(text, message_id))

    async def announce_mode() -> None:
        # An agent-side mode switch: both the mode and the config option lists change.
        session = opened.session
        await server.send_update(session_id, frames.current_mode_update(session.mode))
        await server.send_update(session_id, frames.config_option_update(config_options(session)))

    return CommandRunner(CommandContext(server, opened, reply, announce_mode, reply_once))


async def _run_turn(opened: OpenSession, parts: list[PromptPart], generation: int, used: TurnUsage) -> str:
    from agent_core import ModelError, UsageReport

    presenter = opened.presenter
    presenter.stop_reason = None
    failure: AcpError | None = None
    async with anyio.create_task_group() as tg:
        presenter.attach(tg)
        try:
            async for event in opened.session.run_turn(parts):
                if isinstance(event, UsageReport):
                    used.add(event)
                await presenter.present(event)
        except ModelError as exc:
            failure = AcpError.from_error(frames.model_error(exc.message, exc.endpoint, exc.status))
        finally:
            if opened.cancel_generation != generation and presenter.stop_reason is None:
                presenter.stop_reason = "cancelled"
            await presenter.close()
            tg.cancel_scope.cancel()
    if failure is not None:
        if opened.cancel_generation != generation:
            return "cancelled"
        raise failure
    if opened.cancel_generation != generation:
        return "cancelled"
    return presenter.stop_reason or "end_turn"


def _prompt_part(block: ContentBlock) -> PromptPart:
    """An ACP content block (acp.schema model) as an agent_core prompt part."""
    from acp.schema import (
        EmbeddedResourceContentBlock,
        ImageContentBlock,
        ResourceContentBlock,
        TextContentBlock,
        TextResourceContents,
    )

    from agent_core import ImagePart, ResourceLinkPart, ResourcePart, TextPart

    if isinstance(block, TextContentBlock):
        return TextPart(block.text)
    if isinstance(block, ImageContentBlock):
        return ImagePart(block.data, block.mime_type, block.uri)
    if isinstance(block, EmbeddedResourceContentBlock):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            return ResourcePart(resource.uri, text=resource.text, blob=None, mime_type=resource.mime_type)
        return ResourcePart(resource.uri, text=None, blob=resource.blob, mime_type=resource.mime_type)
    if isinstance(block, ResourceContentBlock):
        return ResourceLinkPart(block.uri, block.name, block.mime_type)
    raise AcpError.invalid_params(
        f"session/prompt: {block.type} content is not supported (this agent accepts text, image, resource, resource_link)"
    )
