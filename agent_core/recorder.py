"""Writes a turn's events into the transcript as they happen.

Message and thought deltas are coalesced into one record per message (flushed when anything else
happens or the turn ends), so a replay shows whole messages and a 10,000-delta answer is one line.
Usage goes into a `usage` record (the context size survives a reload) rather than the replay list.
"""

from __future__ import annotations

from agent_core import events as ev
from agent_core.transcript import TranscriptWriter


class TurnRecorder:
    def __init__(self, writer: TranscriptWriter) -> None:
        self._writer = writer
        self._kind: type[ev.MessageChunk] | type[ev.ThoughtChunk] | None = None
        self._message_id = ""
        self._parts: list[str] = []

    def record(self, event: ev.TurnEvent) -> None:
        if isinstance(event, ev.MessageChunk | ev.ThoughtChunk):
            if type(event) is not self._kind or event.message_id != self._message_id:
                self.flush()
                self._kind, self._message_id = type(event), event.message_id
            self._parts.append(event.text)
            return
        self.flush()
        if isinstance(event, ev.UsageReport):
            self._writer.append({"type": "usage", "prompt_tokens": event.used})
            return
        self._writer.event(event)

    def flush(self) -> None:
        if self._kind is not None and self._parts:
            self._writer.event(self._kind(text="".join(self._parts), message_id=self._message_id))
        self._kind, self._message_id, self._parts = None, "", []
