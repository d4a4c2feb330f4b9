"""The session's model context as the turn loop sees it: messages and usage (turn/model_context.py),
images dropped after the endpoint refused them, and compaction (automatic, after a context
overflow, and `/compact`), announced with `CompactionChanged` and `Compacted`.

`SessionContext` is a part of `Session` (session.py): it names what it uses of the session below,
and the session supplies it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from agent_core import events as ev
from agent_core.bus import Compacted, EventBus
from agent_core.config.loader import AgentConfig
from agent_core.errors import ModelError
from agent_core.history.transcript import TranscriptWriter
from agent_core.model import ModelClient
from agent_core.model_events import Usage
from agent_core.turn.model_context import ModelContext

log = logging.getLogger(__name__)


class SessionContext:
    # What this part uses of the session (set by `Session.__init__`).
    id: str
    agent_config: AgentConfig
    model: ModelClient
    config: dict[str, Any]
    context: ModelContext
    bus: EventBus
    _writer: TranscriptWriter
    _turn_lock: asyncio.Lock

    if TYPE_CHECKING:

        @property
        def model_name(self) -> str | None: ...

        async def publish(self, event: ev.TurnEvent) -> None: ...

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The model context (system prompt excluded), as the next request sends it."""
        return self.context.messages

    @property
    def last_prompt_tokens(self) -> int:
        """Tokens the last request used (prompt + output); 0 after a compaction."""
        return self.context.last_prompt_tokens

    @property
    def usage_totals(self) -> Usage:
        """Tokens used by this session in this process."""
        return self.context.usage_totals

    def append_message(self, message: dict[str, Any]) -> None:
        """Add a message to the model context (and the transcript)."""
        self.context.append(message)

    def usage_event(self, usage: Usage) -> ev.UsageReport:
        """Count one request's usage; the `UsageReport` the turn shows."""
        return self.context.usage_event(usage)

    async def maybe_compact(self) -> None:
        """Compact when the last request passed `compact_threshold` of the window; a failure is only logged."""
        if self.context.over(self.agent_config.compact_threshold):
            try:
                await self._compact(None)
            except ModelError as exc:
                # The turn can still try with the full context; the user sees the model's own
                # error if it really no longer fits.
                log.warning("automatic compaction of session %s failed: %s", self.id, exc)

    def drop_images(self) -> bool:
        """Replace image parts in the context by a note and stop sending images; False if there were none."""
        if not self.context.drop_images():
            return False
        self.config["images"] = False
        self._writer.append({"type": "config", "key": "images", "value": False})
        return True

    async def compact_for_overflow(self) -> bool:
        """Compact after the endpoint said the context does not fit; False when nothing could be cut."""
        if not self.context.can_compact(self.agent_config.keep_recent_turns):
            return False
        try:
            await self._compact(None)
        except ModelError as exc:
            log.warning("compaction after a context overflow in session %s failed: %s", self.id, exc)
            return False
        return True

    async def compact(self, instructions: str | None = None) -> str:
        """Summarize older turns with the model; recent turns and kernel variables are kept."""
        async with self._turn_lock:
            return await self._compact(instructions)

    async def _compact(self, instructions: str | None) -> str:
        nothing = "Nothing to compact yet: the conversation is only the most recent turns."
        if not self.context.can_compact(self.agent_config.keep_recent_turns):
            return nothing
        # Shown as ACP compaction updates where the client advertises them (acp_server/turn/presenter.py).
        compaction_id = f"compaction_{uuid.uuid4().hex[:12]}"
        await self.publish(ev.CompactionChanged(compaction_id, "in_progress"))
        try:
            summary = await self.context.compact(
                self.model,
                model_name=self.model_name,
                keep_recent_turns=self.agent_config.keep_recent_turns,
                instructions=instructions,
            )
        except Exception as exc:
            await self.publish(ev.CompactionChanged(compaction_id, "failed", error=str(exc)))
            raise
        await self.publish(ev.CompactionChanged(compaction_id, "completed", summary=summary))
        if summary is None:
            return nothing
        self.bus.emit(Compacted())
        return summary
