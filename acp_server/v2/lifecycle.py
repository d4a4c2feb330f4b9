"""`session/prompt` on a v2 connection: acknowledged at once with the user message's id, then the v1
handler does the work and the session's `state_update`s frame it (`running` ... `idle` + stop reason).

A prompt sent while another is unanswered steers it (the steering draft, advertised as
`capabilities.session.steering`): it joins the running turn at its next model request under the id
it was answered with; a turn that ends before that leaves it to run as the next prompt.

A prompt that cannot be accepted (unknown session, bad content) is still an error answer; a failure
after acceptance (the model endpoint failed) is the `idle` update's stop reason `error`, with the
error the v1 answer would have carried, and the prompt's answer stays a success, as the draft says.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from acp_server.protocol.errors import AcpError
from acp_server.v2 import builders

if TYPE_CHECKING:
    from acp.schema import PromptRequest

    from acp_server.protocol.registry import RequestContext
    from acp_server.v2.dialect import V2Dialect

log = logging.getLogger(__name__)

PromptHandler = Callable[["RequestContext", "PromptRequest"], Awaitable[dict[str, object]]]


class Steering(Protocol):
    """The running turn of a session, for a prompt that arrives while it runs."""

    async def running(self, session_id: str) -> bool:
        """A prompt of the session is unanswered (its turn runs, or is about to)."""
        ...

    async def join(self, req: PromptRequest, message_id: str) -> bool:
        """Send the prompt into that turn as message `message_id`; False when the turn ended first."""
        ...


def acknowledging(
    inner: PromptHandler,
    dialect_of: Callable[[], V2Dialect | None],
    check_session: Callable[[str], Awaitable[object]],
    steering: Steering | None = None,
) -> PromptHandler:
    """`inner` (the v1 prompt handler) as is on a v1 connection; on a v2 one, answered at once."""

    async def prompt(ctx: RequestContext, req: PromptRequest) -> dict[str, object]:
        dialect = dialect_of()
        if dialect is None:
            return await inner(ctx, req)
        await check_session(req.session_id)  # an unknown session is refused before acceptance
        session_id = req.session_id
        # Mid-turn it is a steer: its id is a steering message's, so the turn shows it where it enters.
        steers = steering is not None and await steering.running(session_id)
        message_id = dialect.new_message_id(steer=steers)
        content: list[dict[str, Any]] = [b.model_dump(by_alias=True, exclude_none=True) for b in req.prompt]

        async def work() -> None:
            if steers and steering is not None and await steering.join(req, message_id):
                return  # it entered the running turn, echoed there under `message_id`
            await dialect.begin(session_id, message_id, content)
            stop_reason, error = "error", None
            try:
                answer = await inner(ctx, req)
                stop_reason = str(answer.get("stopReason") or "end_turn")
            except AcpError as exc:
                error = exc.to_error()
            except Exception as exc:  # the session keeps serving; the client hears why the work ended
                log.exception("prompt in %s failed", session_id)
                error = {"code": -32603, "message": f"internal error: {type(exc).__name__}: {exc}"}
            finally:
                await dialect.end(session_id, stop_reason, error)

        ctx.after_response.append(work)
        return builders.prompt_accepted(message_id)

    return prompt
