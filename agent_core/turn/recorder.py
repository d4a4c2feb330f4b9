"""Writes a turn's events into the transcript as they happen.

Deltas are coalesced: message and thought chunks into one record per message, consecutive cell
output of one stream into one record (flushed when anything else happens, at 64 KB, or at the end of
the turn), so a replay shows whole messages and a 10,000-delta answer is one line. A cell's output
kept in the transcript is bounded (`CELL_OUTPUT_KEPT`): a cell that prints 10 MB must not make every
later load replay 10 MB; the rest is counted in a marker (the model's head+tail text is in
`CellFinished.output`). Usage goes into a `usage` record (the context size survives a reload)
rather than the replay list.
"""

from __future__ import annotations

from agent_core import events as ev
from agent_core.history.transcript import TranscriptWriter

CELL_OUTPUT_KEPT = 200_000  # characters of one cell's streamed output kept for replay
FLUSH_AT = 65_536  # characters buffered before a coalesced record is written anyway

_Key = tuple[type, str, str]  # (event type, message or cell id, stream)


class TurnRecorder:
    def __init__(self, writer: TranscriptWriter) -> None:
        self._writer = writer
        self._key: _Key | None = None
        self._parts: list[str] = []
        self._size = 0
        self._cell_chars: dict[str, int] = {}
        self._cell_dropped: dict[str, int] = {}

    def record(self, event: ev.TurnEvent) -> None:
        if isinstance(event, ev.MessageChunk | ev.ThoughtChunk):
            self._buffer((type(event), event.message_id, ""), event.text)
            return
        if isinstance(event, ev.CellOutput):
            kept = self._cell_chars.get(event.cell_id, 0)
            room = CELL_OUTPUT_KEPT - kept
            if room <= 0:
                self._cell_dropped[event.cell_id] = self._cell_dropped.get(event.cell_id, 0) + len(event.text)
                return
            text = event.text[:room]
            if len(text) < len(event.text):
                self._cell_dropped[event.cell_id] = (
                    self._cell_dropped.get(event.cell_id, 0) + len(event.text) - len(text)
                )
            self._cell_chars[event.cell_id] = kept + len(text)
            self._buffer((ev.CellOutput, event.cell_id, event.stream), text)
            return
        self.flush()
        if isinstance(event, ev.UsageReport):
            self._writer.append({"type": "usage", "prompt_tokens": event.used})
            return
        if isinstance(event, ev.CellFinished) and self._cell_dropped.get(event.cell_id):
            dropped = self._cell_dropped.pop(event.cell_id)
            marker = f"\n[... {dropped} more characters of output were not kept in the transcript ...]\n"
            self._writer.event(ev.CellOutput(event.cell_id, "stdout", marker))
        self._writer.event(event)

    def _buffer(self, key: _Key, text: str) -> None:
        if key != self._key:
            self.flush()
            self._key = key
        self._parts.append(text)
        self._size += len(text)
        if self._size >= FLUSH_AT:
            self.flush()
            self._key = key

    def flush(self) -> None:
        key, parts = self._key, self._parts
        self._key, self._parts, self._size = None, [], 0
        if key is None or not parts:
            return
        kind, ident, stream = key
        text = "".join(parts)
        if kind is ev.CellOutput:
            self._writer.event(ev.CellOutput(ident, "stderr" if stream == "stderr" else "stdout", text))
        elif kind is ev.ThoughtChunk:
            self._writer.event(ev.ThoughtChunk(text=text, message_id=ident))
        else:
            self._writer.event(ev.MessageChunk(text=text, message_id=ident))
