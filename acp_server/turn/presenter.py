"""Turn events (agent_core records) -> ACP `session/update`s.

Output is coalesced: the first chunk after a quiet period goes out at once, later chunks are merged
and flushed at most every `COALESCE_SECONDS` (~50 ms: fast enough to look live, few enough frames for a slow client), and `close()` flushes everything, so
every update of a turn is written before the prompt response.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup

from acp_server.harness.cards import replay_blocks
from acp_server.protocol import client_quirks, frames
from acp_server.protocol.frames import Frame
from acp_server.turn.cell_cards import CellCard
from acp_server.turn.gate_cards import GateCard, goal_meta
from acp_server.turn.subagent_cards import updates_for
from agent_core.events import (
    CellClear,
    CellDisplay,
    CellFinished,
    CellOutput,
    CellStarted,
    CompactionChanged,
    FileEdited,
    GateFinished,
    GateOutput,
    GateStarted,
    GoalChanged,
    ImagePart,
    MessageChunk,
    Notice,
    PlanChanged,
    RefinementReported,
    ResourceLinkPart,
    ResourcePart,
    SubagentChanged,
    TextPart,
    ThoughtChunk,
    TitleChanged,
    TurnEnded,
    UsageReport,
    UserMessage,
)

log = logging.getLogger(__name__)

COALESCE_SECONDS = 0.05
SendUpdate = Callable[[Frame], Awaitable[None]]


def prompt_part_block(part: object) -> Frame:
    """A prompt part as an ACP content block (for `user_message_chunk` replays)."""
    if isinstance(part, TextPart):
        return frames.text_block(part.text)
    if isinstance(part, ImagePart):
        return frames.image_block(part.data, part.mime_type, part.uri)
    if isinstance(part, ResourcePart):
        return frames.resource_block(part.uri, text=part.text, blob=part.blob, mime_type=part.mime_type)
    if isinstance(part, ResourceLinkPart):
        return frames.resource_link_block(part.uri, part.name, part.mime_type)
    return frames.text_block(str(part))


class TurnPresenter:
    """Presents one session's events; cards persist across turns so permission cards can precede cells."""

    def __init__(
        self,
        send: SendUpdate,
        *,
        cwd: str,
        terminal_output: bool,
        notices: bool = False,
        compaction: bool = False,
        plan_by_id: bool = False,
        path_titles: bool = False,
        subagent_updates: bool = False,
    ) -> None:
        self._send = send
        self._cwd = cwd
        self._terminal = terminal_output
        self._notices = notices  # the client advertised `session.notices`
        self._compaction = compaction  # the client advertised `session.compaction`
        self._plan_by_id = plan_by_id  # the client advertised `plan` (unstable): `plan_update` by id
        self._open_compactions: set[str] = set()
        self._path_titles = path_titles  # the client titles edit cards by diff path (client_quirks.py)
        # The client advertised `subagents` (unstable): a replayed child is `subagent_update`, no card.
        self._subagent_updates = subagent_updates
        # Paragraphs: clients that ignore `messageId` (toad, CodeCompanion) join the agent messages
        # of a turn (across the cards between them); each message after the first starts with a
        # blank line.
        self._last_message_id: str | None = None
        self._shown = False
        self._cards: dict[str, CellCard] = {}
        # Cards of a subagent's cells (asked in this thread): they follow the child, not this
        # session's turn, so the end of a turn leaves them open.
        self._detached: set[str] = set()
        self._gates: dict[str, GateCard] = {}  # autonomous-mode gate runs in flight
        self._task_group: TaskGroup | None = None
        self._flush_scheduled: set[str] = set()
        self._last_flush: dict[str, float] = {}
        self.stop_reason: str | None = None
        self._edits = 0
        self._replay = False
        self._subagents_shown: set[str] = set()  # children whose replayed card is open
        self.replayed_subagents: dict[str, str] = {}  # child session id -> last replayed state

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
        for compaction_id in sorted(self._open_compactions):
            # A compaction the turn's cancellation cut short never reports its end.
            await self._send(frames.compaction_update(compaction_id, "cancelled"))
        self._open_compactions.clear()
        kept = {cell_id: card for cell_id, card in self._cards.items() if cell_id in self._detached}
        for card in list(self._cards.values()):
            if card.cell_id in kept:
                continue
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
        self._cards = kept
        for gate in list(self._gates.values()):
            # A gate still running when the turn ended was cancelled with it (its process group killed).
            self._flush_scheduled.discard(gate.cell_id)
            summary = (
                "cancelled (the gate was stopped)" if self.stop_reason == "cancelled" else "did not finish"
            )
            await self._send(
                gate.final_update(
                    passed=False, exit_code=None, summary=summary, not_rerun=False, recorded_output=""
                )
            )
        self._gates.clear()
        self._last_message_id, self._shown = None, False  # paragraphs are counted per turn
        self._task_group = None
        self._replay = False

    # ------------------------------------------------------------ permission cards

    async def announce_cell(self, cell_id: str, code: str, title: str, *, detached: bool = False) -> Frame:
        """Show a pending card (before a permission request) and return the ToolCallUpdate to ask with.

        `detached`: a subagent's cell; the card stays open when this session's turn ends."""
        card = self._card(cell_id, code, title)
        if detached:
            self._detached.add(cell_id)
        if not card.started:
            card.started = True
            await self._send(card.start_update())
        return card.permission_tool_call()

    async def settle_detached(self, cell_id: str, status: str, error: str | None) -> None:
        """Close a subagent's card that no `CellFinished` will close (the child stopped asking)."""
        if cell_id not in self._detached:
            return
        self._detached.discard(cell_id)
        card = self._cards.pop(cell_id, None)
        if card is not None and card.started:
            self._flush_scheduled.discard(cell_id)
            await self._send(card.final_update(status, error, ""))

    def _card(self, cell_id: str, code: str, title: str) -> CellCard:
        card = self._cards.get(cell_id)
        if card is None:
            # The title is agent_core's `cell_title` (the model's, a comment or the first statement).
            card = CellCard(cell_id, code, title, self._cwd, self._terminal)
            self._cards[cell_id] = card
        return card

    # ------------------------------------------------------------ events

    async def present(self, event: object) -> None:
        """Send the updates for one event. A malformed event is logged and skipped: one bad record
        must not abort the turn (or a whole load replay) it belongs to."""
        try:
            await self._present(event)
        except Exception:
            log.exception("could not present turn event %r; skipped", type(event).__name__)

    async def _present(self, event: object) -> None:
        if isinstance(event, MessageChunk):
            if event.text:
                await self._send(frames.agent_message_update(self._paragraph(event), event.message_id))
        elif isinstance(event, ThoughtChunk):
            if event.text:
                await self._send(frames.agent_thought_update(event.text, event.message_id))
        elif isinstance(event, UserMessage):
            self._last_message_id, self._shown = None, False  # a replayed turn starts: paragraphs restart
            for part in event.parts:
                await self._send(frames.user_message_update(prompt_part_block(part), event.message_id))
        elif isinstance(event, CellStarted):
            card = self._card(event.cell_id, event.code, event.title)
            card.running = True
            if not card.started:
                card.started = True
                await self._send(card.start_update())
            await self._send(frames.cell_running_update(event.cell_id))
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
            self._detached.discard(event.cell_id)
            if finished is not None:
                self._flush_scheduled.discard(finished.cell_id)
                await self._send(finished.final_update(event.status, event.error, event.output))
        elif isinstance(event, UsageReport):
            await self._send(frames.usage_update(event.used, event.size))
        elif isinstance(event, TitleChanged):
            await self._send(frames.session_title_update(event.title))
        elif isinstance(event, PlanChanged):
            if self._plan_by_id:
                await self._send(frames.plan_update_by_id(frames.SESSION_PLAN_ID, event.entries))
            else:
                await self._send(frames.plan_update(event.entries))
        elif isinstance(event, RefinementReported):
            await self._refinement(event)
        elif isinstance(event, GateStarted | GateOutput | GateFinished):
            await self._gate(event)
        elif isinstance(event, GoalChanged):
            await self._send(
                frames.goal_info_update(goal_meta(event.objective, event.state, event.status_line))
            )
        elif isinstance(event, Notice):
            await self._notice(event)
        elif isinstance(event, CompactionChanged):
            await self._compaction_changed(event)
        elif isinstance(event, SubagentChanged):
            # Recorded by subagent_cards (live cards are sent there); here on a session/load replay.
            self.replayed_subagents[event.child_session_id] = event.state
            for update in updates_for(event, self._subagents_shown, subagent_update=self._subagent_updates):
                await self._send(update)
        elif isinstance(event, TurnEnded):
            self.stop_reason = event.stop_reason
        else:
            log.warning("no ACP mapping for turn event %r; skipped", type(event).__name__)

    async def _gate(self, event: GateStarted | GateOutput | GateFinished) -> None:
        """An autonomous-mode gate: a live execute card `Gate: <command>` ending with its verdict."""
        if isinstance(event, GateStarted):
            card = GateCard(event.gate_id, event.command, source=event.source)
            self._gates[event.gate_id] = card
            await self._send(card.start_update())
        elif isinstance(event, GateOutput):
            open_card = self._gates.get(event.gate_id)
            if open_card is not None:
                open_card.add_output(event.text)
                await self._output_changed(open_card)
        else:
            finished = self._gates.pop(event.gate_id, None)
            if finished is not None:
                self._flush_scheduled.discard(finished.cell_id)
                await self._send(
                    finished.final_update(
                        passed=event.status == "completed",
                        exit_code=event.exit_code,
                        summary=event.summary,
                        not_rerun=event.not_rerun,
                        recorded_output=event.output if self._replay else "",
                    )
                )

    async def announce_gates(self, request_id: str, title: str, commands: list[str]) -> Frame:
        """A pending card listing gate commands to confirm; returns the `toolCall` to ask with."""
        tool_call = frames.gates_confirm_tool_call(request_id, title, commands)
        await self._send(frames.tool_call_update(tool_call))
        return tool_call

    async def settle_gates(self, request_id: str, confirmed: bool) -> None:
        await self._send(frames.gates_confirm_settled_update(request_id, confirmed=confirmed))

    async def _output_changed(self, card: CellCard | GateCard) -> None:
        if not card.started or self._replay:
            return
        now = time.monotonic()
        if now - self._last_flush.get(card.cell_id, 0.0) >= COALESCE_SECONDS or self._task_group is None:
            await self._flush(card)
        elif card.cell_id not in self._flush_scheduled:
            self._flush_scheduled.add(card.cell_id)
            self._task_group.start_soon(self._flush_later, card)

    async def _flush_later(self, card: CellCard | GateCard) -> None:
        # A coalescing delay, not a wait for a condition: output arriving meanwhile rides along.
        await anyio.sleep(COALESCE_SECONDS)
        if card.cell_id in self._flush_scheduled:
            self._flush_scheduled.discard(card.cell_id)
            if card.dirty:
                await self._flush(card)

    async def _flush(self, card: CellCard | GateCard) -> None:
        self._last_flush[card.cell_id] = time.monotonic()
        await self._send(card.progress_update())

    async def _standalone_edit(self, event: FileEdited) -> None:
        """A file edit outside any known cell still reaches the editor as an edit card with its diff."""
        self._edits += 1
        await self._send(
            frames.edit_card_update(
                f"edit-{event.cell_id or 'turn'}-{self._edits}",
                f"Edit {os.path.basename(event.path) or event.path}",
                event.path,
                event.old_text,
                event.new_text,
            )
        )

    async def _refinement(self, event: RefinementReported) -> None:
        content: list[Frame] = []
        for edit in event.edits:
            path = edit.get("path")
            if isinstance(path, str) and ("after" in edit or "before" in edit):
                before = edit.get("before")
                after = edit.get("after")
                content.append(
                    frames.tool_diff(
                        path,
                        before if isinstance(before, str) else None,
                        after if isinstance(after, str) else "",
                    )
                )
            else:
                described = " ".join(str(edit.get(k)) for k in ("action", "kind", "id") if edit.get(k))
                content.append(frames.tool_text(described or str(dict(edit))))
            check = edit.get("check")
            if isinstance(check, str) and check:  # trust: what the skill check said
                content.append(frames.tool_text(f"**Skill check ({edit.get('id')}):** {check}"))
        if event.error:
            content.append(frames.tool_text(f"Error: {event.error}"))  # plain: shown literally by some
        content += replay_blocks(event.replay)  # the replays that decided it, when there were any
        title = None
        if self._path_titles:
            # A client that titles edit cards by the diff's path (client_quirks.py): keep the words.
            title, content = client_quirks.path_free_card(f"Refine harness: {event.summary}", content)
        await self._send(
            frames.refinement_card_update(
                event.refinement_id,
                event.summary,
                event.scope,
                applied=event.applied,
                content=content,
                title=title,
            )
        )
        await self._send(
            frames.refinement_message_update(
                event.refinement_id,
                event.summary,
                event.scope,
                applied=event.applied,
                failure=(event.error or "unknown error") if event.failed else None,
            )
        )

    async def _notice(self, event: Notice) -> None:
        """A `notice` for clients that show them; else an agent message (when it has a fallback).
        Notices are live information: a load replay shows none."""
        if self._replay:
            return
        if self._notices:
            await self._send(frames.notice_update(event.severity, event.title, event.description))
        elif event.fallback:
            text = f"{event.title}: {event.description}" if event.description else event.title
            await self._send(
                frames.agent_message_update(f"\n\n{text}\n\n", f"notice_{uuid.uuid4().hex[:12]}")
            )

    async def _compaction_changed(self, event: CompactionChanged) -> None:
        """ACP compaction updates for clients that advertise them; others see what they always did
        (nothing for an automatic compaction; `/compact` answers with its own message)."""
        if not self._compaction:
            return
        if event.status == "in_progress":
            self._open_compactions.add(event.compaction_id)
        else:
            self._open_compactions.discard(event.compaction_id)
        if event.summary:
            await self._send(frames.compaction_summary_chunk_update(event.compaction_id, event.summary))
        await self._send(frames.compaction_update(event.compaction_id, event.status, event.error))

    @property
    def path_titles(self) -> bool:
        """The client titles edit cards by diff path (client_quirks.py): review cards adapt too."""
        return self._path_titles

    async def send_update(self, update: dict[str, object]) -> None:
        """An update built outside the turn's events (a review card asked by form) on this session."""
        await self._send(update)

    def _paragraph(self, event: MessageChunk) -> str:
        """The chunk's text, with a blank line first when it opens a new message after another one."""
        text = event.text
        if event.message_id != self._last_message_id:
            self._last_message_id = event.message_id
            if self._shown and not text.startswith("\n\n"):
                text = "\n\n" + text.lstrip("\n")
        self._shown = True
        return text
