"""A child's editor: the parent's editor, with every request naming the child.

Children have no editor of their own; a permission request from a child's cell goes to the
editor of the parent (looked up at each call: the parent may have been reopened by another client
connection), as the same request with its title prefixed by the child's name, and a card id that
cannot collide with the parent's own cells. That cell's start and end are then reported to the parent
(`report_asked_cell`, called by the hub), so the card follows it. File reads and writes go through the parent's editor too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from agent_core import events as ev
from agent_core.ports import EditorPort, PermissionDecision, PermissionRequest

if TYPE_CHECKING:
    from agent_core.subagents.session_port import SubagentSession


class ChildEditor:
    def __init__(self, parent: SubagentSession, name: str) -> None:
        self._parent = parent  # the parent Session
        self.name = name
        self.asked: set[str] = set()  # the child's cell ids whose card is in the parent's thread
        # Set by the hub: told True while a request waits for the user, False once it is answered
        # (the child's `needs-action` state).
        self.on_waiting: Callable[[bool], None] | None = None
        self.child_session_id: str | None = None

    def card_id(self, cell_id: str) -> str:
        return f"{self.name}-{cell_id}"

    def card_title(self, title: str) -> str:
        return f"[subagent {self.name}] {title}"

    @property
    def _editor(self) -> EditorPort:
        editor: EditorPort = self._parent.editor
        return editor

    @property
    def can_read_files(self) -> bool:
        return bool(self._editor.can_read_files)

    @property
    def can_write_files(self) -> bool:
        return bool(self._editor.can_write_files)

    async def request_permission(self, request: PermissionRequest) -> PermissionDecision:
        named = PermissionRequest(
            cell_id=self.card_id(request.cell_id),
            title=self.card_title(request.title),
            code=request.code,
            purpose=request.purpose,
            subagent=self.name,
            subagent_session=self.child_session_id,
        )
        self.asked.add(request.cell_id)
        self._waiting(True)
        try:
            decision = await self._editor.request_permission(named)
        finally:
            self._waiting(False)
        if decision == "cancelled":
            # The client cancels every pending request of the parent's session when the user cancels
            # the parent's prompt; that must not end the child (it outlives the parent's prompt): the
            # cell was not approved, so it is not run and the child goes on.
            return "reject"
        return decision

    def _waiting(self, waiting: bool) -> None:
        if self.on_waiting is not None:
            self.on_waiting(waiting)

    async def read_text_file(self, path: str) -> str:
        return await self._editor.read_text_file(path)

    async def write_text_file(self, path: str, content: str) -> None:
        await self._editor.write_text_file(path, content)

    async def report_asked_cell(self, event: object, parent: Callable[[], SubagentSession | None]) -> None:
        """A child cell the user was asked about (its card is in the parent's thread) reports its
        start and end to the parent -- into its running turn, or, between the parent's turns, to its
        editor (and transcript) at once -- so that card follows the cell."""
        if not isinstance(event, ev.CellStarted | ev.CellFinished) or event.cell_id not in self.asked:
            return
        session = parent()
        if session is None:
            return
        card_id = self.card_id(event.cell_id)
        if isinstance(event, ev.CellStarted):
            await session.publish(ev.CellStarted(card_id, event.code, self.card_title(event.title)))
        else:
            self.asked.discard(event.cell_id)
            await session.publish(
                ev.CellFinished(card_id, event.status, event.error, event.output, event.duration)
            )
