"""The model context of one session and the surgery done on it: what the model sees next.

`ModelContext` keeps the messages in step with the transcript (every change is also a record, so a
load rebuilds the same context), counts the usage they cost, answers dangling tool calls (a
cancelled or cut-off cell leaves a call without a result, and endpoints reject a request with one),
replaces images by a note for a model that cannot see them, and compacts older turns.
"""

from __future__ import annotations

from typing import Any

from agent_core import events as ev
from agent_core.history.transcript import TranscriptWriter
from agent_core.model import ModelClient
from agent_core.model_events import Usage
from agent_core.turn.compaction import compact_messages, split_point
from agent_core.turn.content import IMAGE_NOT_SEEN

Message = dict[str, Any]

CANCELLED_ANSWER = "Cancelled by the user before it finished."
SERVER_STOPPED_ANSWER = "Not finished: the session ended (server stopped) while this cell ran."


class ModelContext:
    """The messages of one session (system prompt excluded) and the tokens the last request used."""

    def __init__(
        self,
        writer: TranscriptWriter,
        *,
        context_window: int,
        messages: list[Message] | None = None,
        last_prompt_tokens: int = 0,
    ) -> None:
        self._writer = writer
        self.context_window = context_window
        self.messages: list[Message] = list(messages or [])
        self.last_prompt_tokens = last_prompt_tokens
        self.usage_totals = Usage()

    def reset(self, messages: list[Message], last_prompt_tokens: int) -> None:
        """Replace the context by one the transcript already holds (after a rewind cut it)."""
        self.messages = list(messages)
        self.last_prompt_tokens = last_prompt_tokens

    def append(self, message: Message) -> None:
        """Add a message to the context and to the transcript."""
        self.messages.append(message)
        self._writer.message(message)

    # ------------------------------------------------------------ usage

    def usage_event(self, usage: Usage) -> ev.UsageReport:
        """Count one request's usage; the report says how full the window is and the session's totals."""
        totals = self.usage_totals
        self.usage_totals = Usage(
            totals.input_tokens + usage.input_tokens,
            totals.output_tokens + usage.output_tokens,
            totals.cache_read_tokens + usage.cache_read_tokens,
            totals.cache_write_tokens + usage.cache_write_tokens,
        )
        self.last_prompt_tokens = usage.prompt_tokens + usage.output_tokens
        return ev.UsageReport(
            used=self.last_prompt_tokens,
            size=self.context_window,
            input_tokens=self.usage_totals.input_tokens,
            output_tokens=self.usage_totals.output_tokens,
            cache_read_tokens=self.usage_totals.cache_read_tokens,
            cache_write_tokens=self.usage_totals.cache_write_tokens,
        )

    def over(self, fraction: float) -> bool:
        """Whether the last request used at least `fraction` of the context window."""
        return bool(self.last_prompt_tokens) and self.last_prompt_tokens >= fraction * self.context_window

    # ------------------------------------------------------------ surgery

    def drop_images(self) -> bool:
        """Replace image parts by a note (recorded); False if there were none."""
        changed = False
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, list) and any(b.get("type") == "image_url" for b in content):
                message["content"] = [
                    {"type": "text", "text": IMAGE_NOT_SEEN} if b.get("type") == "image_url" else b
                    for b in content
                ]
                changed = True
        if changed:
            self._writer.append({"type": "context", "reason": "images removed", "messages": self.messages})
        return changed

    def answer_dangling_tool_calls(self, answer: str = CANCELLED_ANSWER) -> None:
        """Give every tool call of the last assistant message without a result `answer` as its result."""
        for index in range(len(self.messages) - 1, -1, -1):
            message = self.messages[index]
            if message.get("role") == "assistant":
                answered = {
                    m.get("tool_call_id") for m in self.messages[index + 1 :] if m.get("role") == "tool"
                }
                for call in message.get("tool_calls") or ():
                    if call.get("id") not in answered:
                        self.append({"role": "tool", "tool_call_id": call["id"], "content": answer})
                return
            if message.get("role") == "user":
                return

    def can_compact(self, keep_recent_turns: int) -> bool:
        """Whether anything is older than the turns compaction keeps."""
        return split_point(self.messages, keep_recent_turns) != 0

    async def compact(
        self,
        model: ModelClient,
        *,
        model_name: str | None,
        keep_recent_turns: int,
        instructions: str | None,
    ) -> str | None:
        """Summarize older turns with the model (recorded); the summary, or None when nothing is old enough.

        Raises `ModelError` when the summary request fails (the context is then unchanged).
        """
        result = await compact_messages(
            model,
            self.messages,
            model=model_name,
            keep_recent_turns=keep_recent_turns,
            instructions=instructions,
        )
        if result is None:
            return None
        self.messages = result.messages
        self.last_prompt_tokens = 0
        self._writer.append({"type": "compaction", "summary": result.summary, "messages": result.messages})
        return result.summary
