"""What the model client yields: the stream's events (`TextDelta`, `ReasoningDelta`, `StreamFallback`,
`ModelDone` with its `ToolCall`s and `Usage`), usage read from the shapes compatible servers send
(`parse_usage`), and a whole (non-streamed) answer turned into the same events (`answer_events`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent_core.errors import ModelError
from agent_core.safetext import scrub, scrub_value


@dataclass(frozen=True)
class TextDelta:
    """A piece of answer text from the model stream."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of reasoning text from the model stream."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """A complete tool call; `arguments` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str

    def parsed(self) -> dict[str, Any]:
        """The arguments as an object; raises ValueError with a readable message if they are not one."""
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"the arguments of {self.name} are not valid JSON ({exc.msg} at {exc.pos})"
            ) from None
        if not isinstance(value, dict):
            raise ValueError(f"the arguments of {self.name} must be a JSON object")
        # A `"\\udc80"` escape in the arguments decodes to a lone surrogate: never let it through.
        return dict(scrub_value(value))


@dataclass(frozen=True)
class Usage:
    """Token counts of one model request."""

    input_tokens: int = 0  # prompt tokens not served from cache
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens


@dataclass(frozen=True)
class ModelDone:
    """The end of one model request: why it stopped, its text, reasoning, tool calls, usage."""

    finish_reason: str  # "stop" | "tool_calls" | "length" | "content_filter" | ...
    text: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None


@dataclass(frozen=True)
class StreamFallback:
    """The answer that follows was not streamed. `reason` says why (the stream failed, or this model's
    streams failed before); `restart`: deltas of a failed stream were already yielded, and the whole
    answer that follows replaces them."""

    reason: str
    restart: bool = False


ModelEvent = TextDelta | ReasoningDelta | StreamFallback | ModelDone


def parse_usage(raw: Any) -> Usage | None:
    """Read usage from the shapes compatible servers use (OpenAI, vLLM, OpenRouter/Anthropic-style)."""
    if raw is None:
        return None
    data: Mapping[str, Any] = raw.model_dump() if hasattr(raw, "model_dump") else dict(raw)
    prompt = int(data.get("prompt_tokens") or 0)
    output = int(data.get("completion_tokens") or 0)
    details = data.get("prompt_tokens_details") or {}
    cache_read = int(details.get("cached_tokens") or data.get("cache_read_input_tokens") or 0)
    cache_write = int(
        details.get("cache_write_tokens")
        or details.get("cache_creation_tokens")
        or data.get("cache_creation_input_tokens")
        or 0
    )
    return Usage(
        input_tokens=max(0, prompt - cache_read),
        output_tokens=output,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def answer_events(reply: Any, endpoint: str) -> list[ModelEvent]:
    """A whole (non-streamed) `chat.completion` as stream events, ending with `ModelDone`."""
    choices = getattr(reply, "choices", None) or []
    if not choices:
        raise ModelError(f"model endpoint {endpoint} answered with no choices", endpoint=endpoint)
    choice = choices[0]
    message = choice.message
    extra = message.model_extra or {}
    thought = scrub(str(extra.get("reasoning_content") or extra.get("reasoning") or ""))
    text = scrub(message.content or "")
    calls = tuple(
        ToolCall(
            id=call.id or f"call_{uuid.uuid4().hex[:16]}",
            name=call.function.name or "ipython",
            arguments=scrub(call.function.arguments or ""),
        )
        for call in message.tool_calls or ()
        if getattr(call, "function", None) is not None
    )
    finish = choice.finish_reason or ("tool_calls" if calls else "stop")
    events: list[ModelEvent] = []
    if thought:
        events.append(ReasoningDelta(thought))
    if text:
        events.append(TextDelta(text))
    events.append(ModelDone(finish, text, thought, calls, parse_usage(getattr(reply, "usage", None))))
    return events
