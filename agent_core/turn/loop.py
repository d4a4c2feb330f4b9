"""One prompt turn: model -> cells in the kernel -> results back -> repeat.

The loop ends on a final answer, a truncation (`max_tokens`: a half-streamed tool call is never run
and nothing half-written enters the model context), a content filter (`refusal`), or the limit on
model requests (`max_turn_requests`). Cancellation is handled by the caller (`Session.run_turn`), which
cancels the task running this loop; the `except CancelledError` blocks here only do the bounded
cleanup that must happen on the way out (interrupt the kernel).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agent_core import events as ev
from agent_core.aio import shielded
from agent_core.config.loader import NO_MODEL_MESSAGE, AgentConfig
from agent_core.errors import ModelError, PermissionRequestFailed
from agent_core.kernel.handle import KernelHandle
from agent_core.model import IPYTHON_TOOL, ModelClient
from agent_core.model_events import ModelDone, ReasoningDelta, StreamFallback, TextDelta, ToolCall, Usage
from agent_core.ports import EditorPort, PermissionRequest
from agent_core.turn import text_actions as ta
from agent_core.turn.content import to_model_content
from agent_core.turn.titles import cell_title

if TYPE_CHECKING:
    from agent_core.control_plane.guard import ControlPlaneGuard
    from agent_core.control_plane.held import HeldChange
    from kernel_bridge import KernelSession

log = logging.getLogger(__name__)

Emit = Callable[[ev.TurnEvent], None]

# How long cancellation may spend interrupting a cell before the turn reports `cancelled` anyway;
# kernel_bridge escalates to a restart on its own if the cell ignores the interrupt.
CANCEL_CELL_GRACE = 0.5


@dataclass(frozen=True)
class TurnOutcome:
    """How a turn ended: the stop reason and, for a limit or a refusal, the message the user saw."""

    stop_reason: ev.StopReason
    message: str | None = None


class TurnContext(Protocol):
    """What one turn needs of its session (`Session` is one): settings, context, model, editor, kernel,
    and the control-plane guard around its cells (what `control_plane.cells.GuardedSession` asks)."""

    @property
    def agent_config(self) -> AgentConfig: ...

    @property
    def model(self) -> ModelClient: ...

    @property
    def editor(self) -> EditorPort: ...

    @property
    def mode(self) -> str: ...

    @property
    def model_name(self) -> str | None: ...

    @property
    def model_accepts_images(self) -> bool: ...

    @property
    def max_turn_requests(self) -> int: ...

    # "Allow always (this session)" was chosen at a permission request.
    always_allowed: bool

    # The user was told that this session's answers come unstreamed (said once per session).
    stream_fallback_told: bool

    async def cells_need_approval(self) -> bool:
        """True when every cell must be approved whatever the mode (a sandbox that is not in force)."""
        ...

    @property
    def messages(self) -> list[dict[str, Any]]: ...

    def append_message(self, message: dict[str, Any]) -> None: ...

    def system_prompt(self, parts: Sequence[ev.PromptPart] = ()) -> str: ...

    def usage_event(self, usage: Usage) -> ev.UsageReport: ...

    async def maybe_compact(self) -> None: ...

    async def compact_for_overflow(self) -> bool: ...

    def drop_images(self) -> bool: ...

    @property
    def kernel_handle(self) -> KernelHandle: ...

    @property
    def control_plane(self) -> ControlPlaneGuard | None: ...

    async def hold_control_plane_change(self, held: HeldChange) -> str | None: ...

    async def publish(self, event: ev.TurnEvent) -> None: ...

    async def kernel(self) -> KernelSession: ...

    def turn_context(self) -> str | None:
        """Short per-turn context for the model (the goal block), or None."""
        ...

    def take_steering(self) -> list[tuple[Sequence[ev.PromptPart], str | None]]:
        """Messages sent into the running turn since the last request (steering), oldest first."""
        ...

    @property
    def steering_waiting(self) -> bool:
        """A steering message waits for the next request (the turn must not end before it)."""
        ...


STEER_PREFIX = "steer"  # the message id prefix of a steering message (shown live, replayed in place)


def new_id(prefix: str) -> str:
    """A fresh id for a message, thought or cell (`msg_0123...`)."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


async def run_turn_body(session: TurnContext, parts: Sequence[ev.PromptPart], emit: Emit) -> TurnOutcome:
    """The loop itself; emits events through `emit` (which also records them)."""
    config = session.agent_config
    user_id = new_id("msg")
    emit(ev.UserMessage(parts=tuple(parts), message_id=user_id))
    content = to_model_content(parts, images=session.model_accepts_images)
    note = session.kernel_handle.take_note()
    if note:
        content = (
            f"{content}\n\n[kernel] {note}"
            if isinstance(content, str)
            else [*content, {"type": "text", "text": f"[kernel] {note}"}]
        )
    block = session.turn_context()
    if block:
        # In the user message, not the system prompt: it changes every turn (tokens used), and the
        # system prompt must stay a stable cache prefix.
        content = (
            f"{content}\n\n[goal]\n{block}"
            if isinstance(content, str)
            else [*content, {"type": "text", "text": f"[goal]\n{block}"}]
        )
    session.append_message({"role": "user", "content": content})

    if not session.model_name:
        emit(ev.MessageChunk(NO_MODEL_MESSAGE, new_id("msg")))
        return TurnOutcome("end_turn")

    # In a worker thread: the system prompt reads the repository (AGENTS.md, the skill folders, the
    # project harness), and a slow or hostile file system must not stall the event loop.
    system = await asyncio.to_thread(session.system_prompt, parts)
    if session.control_plane is not None:  # unconfined: the prompt must come from the verified tree
        from agent_core.control_plane import cells as control_plane

        system = await control_plane.verified_system_prompt(session, parts, emit, system)
    formats = _Formats(session)
    limit = session.max_turn_requests
    for _request in range(limit):
        # Steering joins here, at the next request: after the tool results it follows, in order.
        for steered, steer_id in session.take_steering():
            emit(ev.UserMessage(parts=tuple(steered), message_id=steer_id or new_id(STEER_PREFIX)))
            session.append_message(
                {"role": "user", "content": to_model_content(steered, images=session.model_accepts_images)}
            )
        # Before every request, not only at the start: one long turn of cells can fill the window.
        await session.maybe_compact()
        text_mode = formats.current() == "text"
        try:
            done = await _one_request(session, system, emit, text_mode=text_mode)
        except ModelError as exc:
            if _images_refused(exc) and session.drop_images():
                # A text-only model: describe the images instead, for the rest of the session.
                done = await _one_request(session, system, emit, text_mode=text_mode)
            elif _context_overflow(exc) and await session.compact_for_overflow():
                # The configured window was too optimistic: compact once and try again.
                done = await _one_request(session, system, emit, text_mode=text_mode)
            elif not text_mode and formats.configured == "auto" and ta.tools_refused(exc.status, str(exc)):
                # The endpoint takes no `tools`: act through fenced python blocks instead (text_actions.py).
                formats.choose_text()
                emit(ev.Notice("info", ta.SWITCH_TITLE, ta.REFUSED_NOTICE))
                text_mode = True
                done = await _one_request(session, system, emit, text_mode=True)
            else:
                raise
        if done.usage is not None:
            emit(session.usage_event(done.usage))
        if done.finish_reason == "length":
            message = (
                "The model reached its output limit"
                + (f" (max_tokens={config.max_output_tokens})" if config.send_max_tokens else "")
                + " before finishing"
                + (", in the middle of a tool call that was therefore not run" if done.tool_calls else "")
                + ". Nothing it half-wrote was kept. Ask for a smaller step, or raise CONTINUAL_ACP_MAX_OUTPUT_TOKENS."
            )
            emit(ev.MessageChunk("\n\n" + message if done.text else message, new_id("msg")))
            return TurnOutcome("max_tokens", message)
        if done.finish_reason == "content_filter":
            message = "The model provider's content filter stopped this answer."
            emit(ev.MessageChunk(message, new_id("msg")))
            return TurnOutcome("refusal", message)
        if not done.text and not done.tool_calls:
            # Nothing to show or keep (a reasoning-only or empty reply): say so rather than end
            # silently, and keep no empty assistant message (endpoints reject one on the next request).
            emit(ev.MessageChunk("(The model returned an empty answer.)", new_id("msg")))
            return TurnOutcome("end_turn")
        assistant: dict[str, Any] = {"role": "assistant", "content": done.text or None}
        if done.tool_calls:
            assistant["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in done.tool_calls
            ]
        session.append_message(assistant)
        action = formats.action(done, text_mode, emit)
        if action is not None:
            # The text action format: run the block as a cell, feed its output back as the next message.
            result = await _run_cell(
                session, new_id("cell"), action.code, cell_title(action.code, None), emit
            )
            session.append_message({"role": "user", "content": ta.output_message(result.text)})
            if result.cancelled:
                return TurnOutcome("cancelled")
            continue
        if not done.tool_calls:
            if session.steering_waiting:
                continue  # a message arrived during this answer: the model hears it before the turn ends
            return TurnOutcome("end_turn")
        for index, call in enumerate(done.tool_calls):
            result = await _run_tool_call(session, call, emit)
            session.append_message({"role": "tool", "tool_call_id": call.id, "content": result.text})
            if result.cancelled:
                # The user cancelled at the permission prompt: the remaining calls never ran, but
                # every tool call id still needs an answer or the next request is invalid.
                for skipped in done.tool_calls[index + 1 :]:
                    session.append_message(
                        {
                            "role": "tool",
                            "tool_call_id": skipped.id,
                            "content": "Not run: the turn was cancelled.",
                        }
                    )
                return TurnOutcome("cancelled")
    message = f"Stopped after {limit} model requests in one prompt (max_turn_requests). Send another prompt to continue."
    emit(ev.MessageChunk(message, new_id("msg")))
    return TurnOutcome("max_turn_requests", message)


_OVERFLOW_WORDS = ("context length", "context window", "maximum context", "too many tokens", "context_length")


def _context_overflow(exc: ModelError) -> bool:
    """A 400/413 whose message says the prompt does not fit the model (wording varies by server)."""
    text = str(exc).lower()
    return exc.status in (400, 413) and any(word in text for word in _OVERFLOW_WORDS)


def _images_refused(exc: ModelError) -> bool:
    """A 400 that names images (wording varies: "image_url", "does not support images", "vision")."""
    text = str(exc).lower()
    return exc.status == 400 and ("image" in text or "vision" in text)


class _Formats:
    """The turn's view of the action format (text_actions.py): configured, remembered, switched."""

    def __init__(self, session: TurnContext) -> None:
        try:
            self.configured = ta.configured_format(session.agent_config.extra)
        except ValueError as exc:
            log.warning("%s; using auto", exc)
            self.configured = "auto"
        self._endpoint = session.model.endpoint
        self._model = session.model_name or ""

    def current(self) -> ta.ActionFormat:
        return ta.MEMORY.current(self.configured, self._endpoint, self._model)

    def choose_text(self) -> None:
        ta.MEMORY.choose_text(self._endpoint, self._model)

    def action(self, done: ModelDone, text_mode: bool, emit: Emit) -> ta.TextAction | None:
        """The block to run from this answer, if any (switching an `auto` session to text on a guess)."""
        if done.tool_calls:
            ta.MEMORY.saw_tool_call(self._endpoint, self._model)
            return None
        if text_mode:
            return ta.find_action(done.text)
        if not ta.MEMORY.may_guess_text(self.configured, self._endpoint, self._model):
            return None
        action = ta.find_action(done.text)
        if action is not None:
            self.choose_text()
            emit(ev.Notice("info", ta.SWITCH_TITLE, ta.SWITCH_NOTICE))
        return action


async def _one_request(
    session: TurnContext, system: str, emit: Emit, *, text_mode: bool = False
) -> ModelDone:
    message_id = new_id("msg")
    thought_id = new_id("thought")
    if text_mode:
        system = f"{system}\n\n{ta.TEXT_FORMAT_PROMPT}"
    messages = [{"role": "system", "content": system}, *session.messages]
    done: ModelDone | None = None
    tools = () if text_mode else (IPYTHON_TOOL,)
    async for event in session.model.stream(messages, model=session.model_name, tools=tools):
        if isinstance(event, TextDelta):
            emit(ev.MessageChunk(event.text, message_id))
        elif isinstance(event, ReasoningDelta):
            emit(ev.ThoughtChunk(event.text, thought_id))
        elif isinstance(event, StreamFallback):
            if event.restart:
                # The whole answer follows as a message of its own; the cut one stays as it was shown.
                message_id, thought_id = new_id("msg"), new_id("thought")
            if not session.stream_fallback_told:
                session.stream_fallback_told = True
                emit(ev.Notice("info", STREAM_FALLBACK_TITLE, stream_fallback_notice(event)))
        else:
            done = event
    assert done is not None  # ModelClient.stream always ends with ModelDone
    return done


STREAM_FALLBACK_TITLE = "Answers without streaming"


def stream_fallback_notice(event: StreamFallback) -> str:
    """What the user is told (once per session) when answers arrive whole instead of streamed."""
    cut = " The cut answer above was asked for again; the whole answer follows." if event.restart else ""
    return (
        f"The model endpoint could not stream an answer ({event.reason}), so the request was sent "
        "again without streaming; this model's answers now arrive whole rather than word by word."
        f"{cut}"
    )


@dataclass(frozen=True)
class _ToolResult:
    """What a tool call gives back to the model, and whether it was cancelled."""

    text: str
    cancelled: bool = False


async def _run_tool_call(session: TurnContext, call: ToolCall, emit: Emit) -> _ToolResult:
    if call.name != "ipython":
        return _ToolResult(
            f"Error: there is no tool named {call.name!r}; the only tool is `ipython(code, title?)`."
        )
    try:
        args = call.parsed()
    except ValueError as exc:
        return _ToolResult(f'Error: {exc}. Call ipython with a JSON object like {{"code": "print(1)"}}.')
    code = args.get("code")
    if not isinstance(code, str) or not code.strip():
        return _ToolResult('Error: ipython needs a non-empty string argument "code".')
    raw_title = args.get("title")
    title = cell_title(code, raw_title if isinstance(raw_title, str) else None)
    return await _run_cell(session, call.id, code, title, emit)


async def _run_cell(session: TurnContext, cell_id: str, code: str, title: str, emit: Emit) -> _ToolResult:
    """Ask (in ask mode), then run one cell; what the model is told about it."""
    if (session.mode == "ask" or await session.cells_need_approval()) and not session.always_allowed:
        try:
            decision = await session.editor.request_permission(
                PermissionRequest(cell_id=cell_id, title=title, code=code)
            )
        except PermissionRequestFailed as exc:
            error = f"the client failed to answer the permission request: {exc}"
            emit(ev.CellFinished(cell_id, "failed", error=error))
            return _ToolResult(f"Not run: {error}. Nobody approved this cell; ask the user how to go on.")
        if decision == "allow_always":
            session.always_allowed = True
        elif decision == "reject":
            emit(ev.CellFinished(cell_id, "cancelled", error="rejected by the user"))
            return _ToolResult("The user rejected this cell; it was not run. Ask or take another approach.")
        elif decision == "cancelled":
            emit(ev.CellFinished(cell_id, "cancelled", error="cancelled"))
            return _ToolResult("Not run: the turn was cancelled.", cancelled=True)

    emit(ev.CellStarted(cell_id=cell_id, code=code, title=title))
    return await _execute(session, cell_id, code, emit)


async def _execute(session: TurnContext, cell_id: str, code: str, emit: Emit) -> _ToolResult:
    from kernel_bridge.events import ClearOutput, Display, Result, Stream

    try:
        kernel = await session.kernel()
    except Exception as exc:
        error = f"the kernel could not start: {exc}"
        emit(ev.CellFinished(cell_id, "failed", error=error))
        return _ToolResult(f"Error: {error}. The cell was not run.")
    # Imported at the first cell: the guard brings harness_store, which session/new must not wait for.
    from agent_core.control_plane import cells as control_plane

    await control_plane.before_cell(session)
    handle = session.kernel_handle
    checkpoint, handle.before_cell = handle.before_cell, None
    if checkpoint is not None:
        await checkpoint(kernel)  # the prompt's checkpoint, before its first cell changes anything
    handle.current_cell = cell_id
    handle.cells_run += 1
    handle.touch()
    revived = handle.take_revived()
    if revived:
        emit(ev.CellOutput(cell_id, "stdout", revived + "\n"))  # once, on the cell that woke it
    try:
        run = kernel.execute(code, timeout=session.agent_config.cell_timeout)
        try:
            async for item in run:
                if isinstance(item, Stream):
                    emit(ev.CellOutput(cell_id, item.name, item.text))
                elif isinstance(item, Display):
                    emit(ev.CellDisplay(cell_id, dict(item.data)))
                elif isinstance(item, Result):
                    emit(ev.CellDisplay(cell_id, dict(item.data), is_result=True))
                elif isinstance(item, ClearOutput):
                    emit(ev.CellClear(cell_id))
            result = await run.result()
        except asyncio.CancelledError:
            # Cancel: stop the cell now; kernel_bridge restarts the kernel itself if it will not stop.
            await shielded(kernel.interrupt(), CANCEL_CELL_GRACE)
            emit(ev.CellFinished(cell_id, "cancelled", error="cancelled by the user"))
            await control_plane.after_cell(session, cell_id, code, emit, cancelled=True)
            raise
    finally:
        handle.current_cell = None
        handle.touch()
    # Unconfined backends: what the cell wrote under .continual-acp/ is restored and held for review.
    held_note = await control_plane.after_cell(session, cell_id, code, emit)

    output = result.output
    if result.report:
        output = f"{result.report}\n{output}" if output else result.report
    if revived:
        output = f"{revived}\n{output}" if output else revived
    if result.status == "ok":
        emit(ev.CellFinished(cell_id, "completed", output=output, duration=result.duration))
    elif result.status == "died":
        error = "kernel died while running this cell; a fresh kernel will run the next one"
        emit(ev.CellFinished(cell_id, "failed", error=error, output=output, duration=result.duration))
        # The card says it already; clients with notices also get it as a notice (no message fallback).
        emit(
            ev.Notice(
                "warning",
                "The kernel died and was replaced",
                "A fresh kernel runs the next cell with the last snapshot's variables restored.",
                fallback=False,
            )
        )
        output = f"{error}\n{output}"
    elif result.status == "interrupted":
        emit(
            ev.CellFinished(
                cell_id, "cancelled", error="interrupted", output=output, duration=result.duration
            )
        )
        output = f"(the cell was interrupted)\n{output}"
    else:
        error = f"{result.error.ename}: {result.error.evalue}" if result.error else "the cell failed"
        emit(ev.CellFinished(cell_id, "failed", error=error, output=output, duration=result.duration))
    if held_note:
        output = f"{output}\n{held_note}" if output else held_note
    return _ToolResult(output or "(no output)")
