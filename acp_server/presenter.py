"""Turn events (agent_core records) -> ACP `session/update`s.

Output is coalesced: the first chunk after a quiet period goes out at once, later chunks are merged
and flushed at most every `COALESCE_SECONDS` (ACP.md: ~50 ms), and `close()` flushes everything, so
every update of a turn is written before the prompt response.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from acp_server.cells import CellCard, cell_title
from agent_core.events import (
    CellClear,
    CellDisplay,
    CellFinished,
    CellOutput,
    CellStarted,
    FileEdited,
    GateFinished,
    GateOutput,
    GateStarted,
    GoalChanged,
    ImagePart,
    MessageChunk,
    PlanChanged,
    RefinementReported,
    ResourceLinkPart,
    ResourcePart,
    TextPart,
    ThoughtChunk,
    TitleChanged,
    TurnEnded,
    UsageReport,
    UserMessage,
)

log = logging.getLogger(__name__)

COALESCE_SECONDS = 0.05
SendUpdate = Callable[[dict[str, Any]], Awaitable[None]]


def prompt_part_block(part: Any) -> dict[str, Any]:
    """A prompt part as an ACP content block (for `user_message_chunk` replays)."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        block: dict[str, Any] = {"type": "image", "data": part.data, "mimeType": part.mime_type}
        if part.uri:
            block["uri"] = part.uri
        return block
    if isinstance(part, ResourcePart):
        resource: dict[str, Any] = {"uri": part.uri}
        if part.blob is not None:
            resource["blob"] = part.blob
        else:
            resource["text"] = part.text or ""
        if part.mime_type:
            resource["mimeType"] = part.mime_type
        return {"type": "resource", "resource": resource}
    if isinstance(part, ResourceLinkPart):
        link: dict[str, Any] = {"type": "resource_link", "uri": part.uri, "name": part.name}
        if part.mime_type:
            link["mimeType"] = part.mime_type
        return link
    return {"type": "text", "text": str(part)}


class TurnPresenter:
    """Presents one session's events; cards persist across turns so permission cards can precede cells."""

    def __init__(self, send: SendUpdate, *, cwd: str, terminal_output: bool) -> None:
        self._send = send
        self._cwd = cwd
        self._terminal = terminal_output
        self._cards: dict[str, CellCard] = {}
        self._task_group: TaskGroup | None = None
        self._flush_scheduled: set[str] = set()
        self._last_flush: dict[str, float] = {}
        self.stop_reason: str | None = None
        self._edits = 0
        self._replay = False

    # ------------------------------------------------------------ lifecycle

    def attach(self, task_group: TaskGroup | None, *, replay: bool = False) -> None:
        """Delayed flushes run in this task group (the prompt handler's); None = flush inline.

        `replay` (session/load): recorded output is not streamed chunk by chunk -- each card is
        sent once when it starts and once, complete, when it finishes.
        """
        self._task_group = task_group
        self._replay = replay

    async def close(self) -> None:
        """Flush pending output and settle every card still open (call before answering the prompt).

        A cancelled turn stops without `CellFinished`, and a rejected permission leaves a card that
        never ran; both would spin forever in the editor, so they are closed here as failed.
        """
        for card in list(self._cards.values()):
            self._flush_scheduled.discard(card.cell_id)
            if not card.started:
                continue
            if self.stop_reason == "cancelled":
                status, error = "cancelled", None
            elif card.running:
                status, error = "failed", "the turn ended before the cell finished"
            else:
                status, error = "failed", "not run"
            await self._send(card.final_update(status, error, ""))
        self._cards.clear()
        self._task_group = None
        self._replay = False

    # ------------------------------------------------------------ permission cards

    async def announce_cell(self, cell_id: str, code: str, title: str) -> dict[str, Any]:
        """Show a pending card (before a permission request) and return the ToolCallUpdate to ask with."""
        card = self._card(cell_id, code, title)
        if not card.started:
            card.started = True
            await self._send(card.start_update())
        return {
            "toolCallId": cell_id,
            "title": card.title,
            "kind": "execute",
            "status": "pending",
            "content": card.content()[:1],
            "rawInput": {"code": code},
        }

    async def announce_gates(self, request_id: str, title: str, commands: str) -> dict[str, Any]:
        """A pending card listing the gate commands to confirm; returns the ToolCallUpdate to ask with."""
        content = [{"type": "content", "content": {"type": "text", "text": f"```sh\n{commands}\n```"}}]
        await self._send(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": request_id,
                "title": title,
                "kind": "execute",
                "status": "pending",
                "content": content,
                "rawInput": {"commands": commands.splitlines()},
            }
        )
        return {
            "toolCallId": request_id,
            "title": title,
            "kind": "execute",
            "status": "pending",
            "content": content,
        }

    async def settle_gates(self, request_id: str, confirmed: bool) -> None:
        """Close the confirmation card: nothing runs from it, the answer is its outcome."""
        text = "Confirmed: autonomous mode uses these gates." if confirmed else "Not confirmed."
        await self._send(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": request_id,
                "status": "completed" if confirmed else "failed",
                "content": [{"type": "content", "content": {"type": "text", "text": text}}],
            }
        )

    def _card(self, cell_id: str, code: str, title: str) -> CellCard:
        card = self._cards.get(cell_id)
        if card is None:
            card = CellCard(cell_id, code, cell_title(code, title), self._cwd, self._terminal)
            self._cards[cell_id] = card
        return card

    # ------------------------------------------------------------ events

    async def present(self, event: Any) -> None:
        """Send the updates for one event. A malformed event is logged and skipped: one bad record
        must not abort the turn (or a whole load replay) it belongs to."""
        try:
            await self._present(event)
        except Exception:
            log.exception("could not present turn event %r; skipped", type(event).__name__)

    async def _present(self, event: Any) -> None:
        if isinstance(event, MessageChunk):
            await self._chunk("agent_message_chunk", event.text, event.message_id)
        elif isinstance(event, ThoughtChunk):
            await self._chunk("agent_thought_chunk", event.text, event.message_id)
        elif isinstance(event, UserMessage):
            for part in event.parts:
                await self._send(
                    {
                        "sessionUpdate": "user_message_chunk",
                        "content": prompt_part_block(part),
                        "messageId": event.message_id,
                    }
                )
        elif isinstance(event, CellStarted):
            card = self._card(event.cell_id, event.code, event.title)
            card.running = True
            if not card.started:
                card.started = True
                await self._send(card.start_update())
            await self._send(
                {"sessionUpdate": "tool_call_update", "toolCallId": event.cell_id, "status": "in_progress"}
            )
        elif isinstance(event, CellOutput | CellDisplay | CellClear):
            open_card = self._cards.get(event.cell_id)
            if open_card is not None:
                if isinstance(event, CellOutput):
                    open_card.add_output(event.text)
                elif isinstance(event, CellDisplay):
                    open_card.add_display(dict(event.data), event.is_result)
                else:
                    open_card.clear_output()
                await self._output_changed(open_card)
        elif isinstance(event, FileEdited):
            edited_card = self._cards.get(event.cell_id)
            if edited_card is not None:
                edited_card.add_diff(event.path, event.old_text, event.new_text)
                await self._flush(edited_card)
            else:
                await self._standalone_edit(event)
        elif isinstance(event, CellFinished):
            finished = self._cards.pop(event.cell_id, None)
            if finished is not None:
                self._flush_scheduled.discard(finished.cell_id)
                await self._send(finished.final_update(event.status, event.error, event.output))
        elif isinstance(event, UsageReport):
            await self._send({"sessionUpdate": "usage_update", "used": event.used, "size": event.size})
        elif isinstance(event, TitleChanged):
            await self._send({"sessionUpdate": "session_info_update", "title": event.title})
        elif isinstance(event, PlanChanged):
            entries = [
                {"content": e.content, "priority": e.priority, "status": e.status} for e in event.entries
            ]
            await self._send({"sessionUpdate": "plan", "entries": entries})
        elif isinstance(event, RefinementReported):
            await self._refinement(event)
        elif isinstance(event, GateStarted | GateOutput | GateFinished):
            await self._gate(event)
        elif isinstance(event, GoalChanged):
            goal = None
            if event.objective is not None:
                goal = {"objective": event.objective, "state": event.state, "status": event.status_line}
            await self._send(
                {"sessionUpdate": "session_info_update", "_meta": {"continual-acp": {"goal": goal}}}
            )
        elif isinstance(event, TurnEnded):
            self.stop_reason = event.stop_reason
        else:
            log.warning("no ACP mapping for turn event %r; skipped", type(event).__name__)

    async def _gate(self, event: GateStarted | GateOutput | GateFinished) -> None:
        """An autonomous-mode gate: a live execute card `Gate: <command>` ending with its exit code."""
        if isinstance(event, GateStarted):
            card = CellCard(
                event.gate_id,
                event.command,
                f"Gate: {cell_title(event.command, event.command)}",
                self._cwd,
                False,
                language="sh",
                raw_input_key="command",
            )
            card.started = card.running = True
            self._cards[event.gate_id] = card
            await self._send(card.start_update())
            await self._send(
                {"sessionUpdate": "tool_call_update", "toolCallId": event.gate_id, "status": "in_progress"}
            )
        elif isinstance(event, GateOutput):
            open_card = self._cards.get(event.gate_id)
            if open_card is not None:
                open_card.add_output(event.text)
                await self._output_changed(open_card)
        else:
            finished = self._cards.pop(event.gate_id, None)
            if finished is None:
                return
            self._flush_scheduled.discard(finished.cell_id)
            if self._replay and event.output and not finished.output_text():
                finished.add_output(
                    event.output
                )  # a replay streams nothing: the card shows the recorded output
            error = None if event.status == "completed" else event.summary
            update = finished.final_update(event.status, error, "")
            update["rawOutput"] = {
                "exitCode": event.exit_code,
                "summary": event.summary,
                "notRerun": event.not_rerun,
            }
            await self._send(update)

    async def _chunk(self, kind: str, text: str, message_id: str) -> None:
        if text:
            await self._send(
                {"sessionUpdate": kind, "content": {"type": "text", "text": text}, "messageId": message_id}
            )

    async def _output_changed(self, card: CellCard) -> None:
        if not card.started or self._replay:
            return
        now = time.monotonic()
        if now - self._last_flush.get(card.cell_id, 0.0) >= COALESCE_SECONDS or self._task_group is None:
            await self._flush(card)
        elif card.cell_id not in self._flush_scheduled:
            self._flush_scheduled.add(card.cell_id)
            self._task_group.start_soon(self._flush_later, card)

    async def _flush_later(self, card: CellCard) -> None:
        # A coalescing delay, not a wait for a condition: output arriving meanwhile rides along.
        await anyio.sleep(COALESCE_SECONDS)
        if card.cell_id in self._flush_scheduled:
            self._flush_scheduled.discard(card.cell_id)
            if card.dirty:
                await self._flush(card)

    async def _flush(self, card: CellCard) -> None:
        self._last_flush[card.cell_id] = time.monotonic()
        await self._send(card.progress_update())

    async def _standalone_edit(self, event: FileEdited) -> None:
        """A file edit outside any known cell still reaches the editor as an edit card with its diff."""
        self._edits += 1
        await self._send(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": f"edit-{event.cell_id or 'turn'}-{self._edits}",
                "title": f"Edit {os.path.basename(event.path) or event.path}",
                "kind": "edit",
                "status": "completed",
                "content": [
                    {"type": "diff", "path": event.path, "oldText": event.old_text, "newText": event.new_text}
                ],
                "locations": [{"path": event.path}],
            }
        )

    async def _refinement(self, event: RefinementReported) -> None:
        content: list[dict[str, Any]] = []
        for edit in event.edits:
            path = edit.get("path")
            if isinstance(path, str) and ("after" in edit or "before" in edit):
                before = edit.get("before")
                after = edit.get("after")
                content.append(
                    {
                        "type": "diff",
                        "path": path,
                        "oldText": before if isinstance(before, str) else None,
                        "newText": after if isinstance(after, str) else "",
                    }
                )
            else:
                described = " ".join(str(edit.get(k)) for k in ("action", "kind", "id") if edit.get(k))
                content.append(
                    {"type": "content", "content": {"type": "text", "text": described or str(dict(edit))}}
                )
        if event.error:
            content.append(
                {"type": "content", "content": {"type": "text", "text": f"**Error:** {event.error}"}}
            )
        await self._send(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": f"refinement-{event.refinement_id}",
                "title": f"Refine harness: {event.summary}",
                "kind": "edit",
                "status": "completed" if event.applied else "failed",
                "content": content,
                "rawOutput": {
                    "refinementId": event.refinement_id,
                    "scope": event.scope,
                    "applied": event.applied,
                },
            }
        )
        verb = "applied" if event.applied else "was refused"
        undo = f" Undo it with `/rollback {event.refinement_id}`." if event.applied else ""
        await self._send(
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": f"refinement-{event.refinement_id}",
                "content": {
                    "type": "text",
                    "text": f"\n\nHarness refinement `{event.refinement_id}` ({event.scope}) {verb}: {event.summary}.{undo}\n",
                },
            }
        )
