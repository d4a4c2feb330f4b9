"""`SubagentHub`: one per server (owned by the Agent). Admission, limits, state, delivery.

* `spawn` creates the child session at once (a real session of this server: its own kernel from the
  pool, transcript and local harness) and returns at admission: the child is `running` when a slot is
  free (at most `max_running` in the server) and `queued` otherwise, never awaited to the end.
* When a child's turn ends -- answer, limit, failure, cancel -- its final message is put in the
  parent's inbox by the hub itself, marked final, saying whether the child also sent messages.
* Every state change is saved (`sessions/<child>/subagent.json`) and announced to listeners (the
  editor's cards), in order, from one delivery task.
* Cancelling the parent's prompt leaves children running; closing the parent closes them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from agent_core import events as ev
from agent_core.bus import Closing, EventBus, KernelReady, ShuttingDown
from agent_core.subagents import persistence
from agent_core.subagents.editor import ChildEditor
from agent_core.subagents.kernel_release import KernelReleases
from agent_core.subagents.limits import Limits, child_budget
from agent_core.subagents.mailbox import Inbox, RoutingError, resolve
from agent_core.subagents.records import (
    TURN,
    ChildChanged,
    ChildRecord,
    Message,
    SubagentError,
    bounded,
    final_message,
    now_iso,
)
from agent_core.subagents.runner import Activity, Ending, drive
from agent_core.subagents.session_port import SubagentAgent, SubagentSession
from agent_core.subagents.specs import Spec, first_prompt, resolve_spec

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,39}$")
CANCEL_WAIT = 5.0


class AttachedSession(SubagentSession, Protocol):
    """A session the hub attaches to: it declares the hub as its `subagents` slot."""

    subagents: SubagentHub | None


class SubagentHub:
    def __init__(self, agent: SubagentAgent, limits: Limits | None = None) -> None:
        self.agent = agent
        self.limits = limits or Limits.from_config(agent.config)
        self._records: dict[str, ChildRecord] = {}  # child session id -> its record
        self._children: dict[str, list[str]] = {}  # parent session id -> child ids, spawn order
        self._scanned = False
        self._inboxes: dict[str, Inbox] = {}
        self._activity: dict[str, Activity] = {}
        self._sessions: dict[str, SubagentSession] = {}  # child id -> its Session (while open here)
        self._queue: list[tuple[str, list[ev.PromptPart]]] = []
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._cancel_reasons: dict[str, str] = {}
        # Every state change, as `ChildChanged`, delivered in order by one task (the editor's cards).
        self.bus = EventBus("the subagent hub")
        self._events: asyncio.Queue[ChildChanged] | None = None
        self._delivery: asyncio.Task[None] | None = None
        self._stopping = False
        self._change = asyncio.Event()  # set (and replaced) on every state change
        self._releases = KernelReleases()  # kernels of ended children being stopped

    # ------------------------------------------------------------ wiring

    @classmethod
    def install(cls, agent: Any, limits: Limits | None = None) -> SubagentHub:
        """Own a hub on `agent` (`agent.subagents`), attached to every session it makes."""
        hub = cls(agent, limits)
        agent.subagents = hub
        previous = agent.on_session

        def on_session(session: AttachedSession) -> None:
            if previous is not None:
                previous(session)
            hub.attach(session)

        agent.on_session = on_session

        async def shutting_down(_: ShuttingDown) -> None:
            await hub.aclose()

        agent.bus.subscribe(ShuttingDown, shutting_down)
        return hub

    def attach(self, session: AttachedSession) -> None:
        """Per session: the `agents.*` host ops on its kernels, and closing its children with it."""
        from agent_core.subagents.host_ops import register_host_ops

        session.subagents = self  # how acp_server finds the hub (cards, /agents, session/list)
        session.bus.subscribe(
            KernelReady, lambda ready: register_host_ops(ready.kernel.host_bridge, self, session)
        )

        async def close_children(_: Closing) -> None:
            await self.close_children(session.id)

        session.bus.subscribe(Closing, close_children)

    # ------------------------------------------------------------ records

    def _sessions_root(self) -> Path:
        return Path(self.agent.config.home) / "sessions"

    def _ensure_scanned(self) -> None:
        """Load the links saved by earlier processes once (children of a restarted server)."""
        if self._scanned:
            return
        self._scanned = True
        for record in sorted(persistence.scan(self._sessions_root()), key=lambda r: r.created_at):
            if record.session_id in self._records:
                continue
            if persistence.after_restart(record):
                self._save(record)
            self._records[record.session_id] = record
            self._children.setdefault(record.parent_id, []).append(record.session_id)
            if not record.final_read:
                # Ended (or interrupted) while nobody read its final message: it arrives again.
                self._deliver_final(record)

    def record(self, session_id: str) -> ChildRecord | None:
        """The link of a child session (None for a top-level one)."""
        self._ensure_scanned()
        return self._records.get(session_id)

    def children(self, parent_id: str) -> list[ChildRecord]:
        """The direct children of `parent_id`, in spawn order."""
        self._ensure_scanned()
        return [self._records[c] for c in self._children.get(parent_id, []) if c in self._records]

    def child(self, parent_id: str, name: str) -> ChildRecord:
        for record in self.children(parent_id):
            if record.name == name:
                return record
        known = ", ".join(r.name for r in self.children(parent_id)) or "none"
        raise SubagentError(f"no child named {name!r} (children: {known})")

    def running_children(self, parent_id: str) -> int:
        """Children of `parent_id` still queued or running: background work the user waits on."""
        return sum(1 for record in self.children(parent_id) if record.active)

    def inbox(self, session_id: str) -> Inbox:
        return self._inboxes.setdefault(session_id, Inbox())

    def take(self, session_id: str) -> list[Message]:
        """Empty the inbox of `session_id`; a child's final message taken here is not delivered again
        after a restart."""
        messages = self.inbox(session_id).take()
        for message in messages:
            record = self._records.get(message.sender_session) if message.kind == "final" else None
            if record is not None and not record.final_read:
                record.final_read = True
                self._save(record)
        return messages

    def _save(self, record: ChildRecord) -> None:
        try:
            persistence.save(self.agent.store.session_dir(record.session_id), record)
        except OSError:
            log.exception("could not save the subagent link of %s", record.session_id)

    def _changed(self, record: ChildRecord) -> None:
        self._save(record)
        self._emit(ChildChanged(dataclasses.replace(record), record.state))
        changed, self._change = self._change, asyncio.Event()
        changed.set()

    async def wait_settled(self, parent_id: str, timeout: float) -> bool:
        """Wait until no child of `parent_id` is queued or running; False on timeout.

        For the quiescence report (`_harness/await_quiescence` should wait for this as well as for
        refinement: background children are work the user waits on).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.running_children(parent_id):
            change = self._change
            left = deadline - loop.time()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(change.wait(), left)
            except TimeoutError:
                return False
        return True

    def _emit(self, event: ChildChanged) -> None:
        if not self.bus.handlers(ChildChanged):
            return
        if self._events is None:
            self._events = asyncio.Queue()
        self._events.put_nowait(event)
        if self._delivery is None or self._delivery.done():
            self._delivery = asyncio.get_running_loop().create_task(self._deliver(), name="subagent-events")

    async def _deliver(self) -> None:
        assert self._events is not None
        while not self._events.empty():
            await self.bus.publish(self._events.get_nowait())

    async def flushed(self) -> None:
        """Wait until every state change so far has reached the listeners."""
        while self._delivery is not None and not self._delivery.done():
            await asyncio.wait({self._delivery})

    # ------------------------------------------------------------ spawn and admission

    def _depth_of(self, session_id: str) -> int:
        own = self.record(session_id)
        return own.depth if own is not None else 0

    async def spawn(
        self,
        parent: SubagentSession,
        task: str,
        *,
        name: str | None = None,
        spec: str | None = None,
        model: str | None = None,
        cwd: str | None = None,
    ) -> ChildRecord:
        """Start a child of `parent` working on `task`; returns at admission (queued or running)."""
        if self._stopping:
            raise SubagentError("the server is shutting down; no new subagents")
        if not isinstance(task, str) or not task.strip():
            raise SubagentError("spawn needs a non-empty task string")
        depth = self._depth_of(parent.id) + 1
        if depth > self.limits.max_depth:
            raise SubagentError(
                f"depth limit: this agent is at depth {depth - 1} and subagents may nest at most "
                f"{self.limits.max_depth} deep (subagents_max_depth); do this task yourself"
            )
        siblings = self.children(parent.id)
        if name is None:
            name = f"agent-{len(siblings) + 1}"
            while any(r.name == name for r in siblings):
                name = f"{name}x"
        if not isinstance(name, str) or not _NAME.match(name):
            raise SubagentError(
                f"name {name!r} must start with a letter and use at most 40 letters, digits, _ or -"
            )
        if any(r.name == name for r in siblings):
            raise SubagentError(f"this agent already has a child named {name!r}; choose another name")
        resolved: Spec | None = None
        if spec is not None:
            try:
                resolved = resolve_spec(parent, spec)
            except LookupError as exc:
                raise SubagentError(str(exc)) from None
        chosen_model = model or (resolved.model if resolved else None) or parent.model_name
        known = parent.available_models()
        if chosen_model and known and chosen_model not in known:
            raise SubagentError(f"unknown model {chosen_model!r}; configured models: {', '.join(known)}")
        child_cwd = str(Path(parent.cwd, cwd)) if cwd else parent.cwd
        parent_budget = self._records[parent.id].budget if parent.id in self._records else None
        editor = ChildEditor(parent, name)
        try:
            session = await self.agent.new_session(child_cwd, editor)
        except ValueError as exc:
            raise SubagentError(str(exc)) from None
        # A child asks before cells only when its parent does; it never runs autonomous gates itself.
        session.set_mode("ask" if parent.mode == "ask" else "auto")
        if chosen_model and chosen_model != session.model_name:
            session.set_config("model", chosen_model)
        record = ChildRecord(
            session_id=session.id,
            parent_id=parent.id,
            name=name,
            task=task,
            depth=depth,
            spec=spec,
            model=chosen_model,
            cwd=child_cwd,
            budget=child_budget(self.limits, parent, parent_budget),
        )
        editor.on_waiting = lambda waiting: self._waiting_for_user(record, waiting)
        editor.child_session_id = record.session_id
        self._records[record.session_id] = record
        self._children.setdefault(parent.id, []).append(record.session_id)
        self._sessions[record.session_id] = session
        self._activity[record.session_id] = Activity()
        parts: list[ev.PromptPart] = [ev.TextPart(first_prompt(task, resolved, name, parent.title))]
        if self._running_count() < self.limits.max_running:
            self._start(record, parts)
        else:
            self._queue.append((record.session_id, parts))
            self._changed(record)  # queued
        return record

    def _running_count(self) -> int:
        return sum(1 for r in self._records.values() if r.state in TURN)

    def _waiting_for_user(self, record: ChildRecord, waiting: bool) -> None:
        """The child's editor asked the user (`waiting`) or got its answer: `needs-action` while it waits."""
        if record.state not in TURN or self._stopping or record.session_id in self._cancel_reasons:
            return  # it ended, or is being cancelled, while it asked: its final state comes next
        state = "needs-action" if waiting else "running"
        if record.state != state:
            record.state = state  # type: ignore[assignment]
            self._changed(record)

    def needing_action(self, parent_id: str) -> list[ChildRecord]:
        """Children of `parent_id` waiting for the user to answer a permission request."""
        return [r for r in self.children(parent_id) if r.state == "needs-action"]

    def _start(self, record: ChildRecord, parts: list[ev.PromptPart]) -> None:
        record.state = "running"
        record.started_at = now_iso()
        self._changed(record)
        self._tasks[record.session_id] = asyncio.get_running_loop().create_task(
            self._run(record, parts), name=f"subagent-{record.name}"
        )

    def _admit_next(self) -> None:
        while self._queue and not self._stopping and self._running_count() < self.limits.max_running:
            child_id, parts = self._queue.pop(0)
            record = self._records.get(child_id)
            if record is not None and record.state == "queued":
                self._start(record, parts)

    async def _run(self, record: ChildRecord, parts: list[ev.PromptPart]) -> None:
        session = self._sessions[record.session_id]
        try:
            ending = await drive(
                session,
                parts,
                record,
                self._activity[record.session_id],
                cancel_reason=lambda: self._cancel_reasons.get(record.session_id),
                stopping=lambda: self._stopping,
                on_event=lambda event: self._forward_asked_cell(record, session, event),
            )
        except BaseException as exc:  # cancelled by shutdown, or a bug: the record still ends
            ending = Ending(
                "interrupted" if self._stopping else "failed", reason=f"{type(exc).__name__}: {exc}"
            )
            if not isinstance(exc, Exception):
                self._settle(record, ending)
                raise
        self._settle(record, ending)

    async def _forward_asked_cell(self, record: ChildRecord, session: SubagentSession, event: object) -> None:
        editor = session.editor
        if isinstance(editor, ChildEditor):
            await editor.report_asked_cell(event, lambda: self.agent.get_session(record.parent_id))

    def _settle(self, record: ChildRecord, ending: Ending) -> None:
        self._tasks.pop(record.session_id, None)
        if self._stopping and ending.state == "interrupted":
            # Left as it was on disk: the next process marks it "interrupted by restart".
            return
        record.state = ending.state  # type: ignore[assignment]
        record.reason = ending.reason
        record.answer = bounded(ending.answer) if ending.answer else None
        record.stop_reason = ending.stop_reason
        record.ended_at = now_iso()
        self._deliver_final(record)
        self._changed(record)
        self._admit_next()
        self._release_kernel(record)

    def _release_kernel(self, record: ChildRecord) -> None:
        session = self._sessions.get(record.session_id)
        if session is not None:
            self._releases.release(self.agent, session, record.name)

    async def released(self) -> None:
        """Wait until the kernels of the children that ended so far are stopped."""
        await self._releases.wait()

    def _deliver_final(self, record: ChildRecord) -> None:
        self.inbox(record.parent_id).put(final_message(record))

    # ------------------------------------------------------------ messages

    def send(self, sender: SubagentSession, message: str, to: str) -> dict[str, Any]:
        """Put `message` in the inbox of `to` (parent, a direct child, or a sibling)."""
        if not isinstance(message, str) or not message:
            raise SubagentError("send needs a non-empty message string")
        if not isinstance(to, str) or not to:
            raise SubagentError('`to` must be "parent" or the name of a child or sibling')
        try:
            target, relation = resolve(sender.id, to, record_of=self.record, children_of=self.children)
        except RoutingError as exc:
            raise SubagentError(str(exc)) from None
        own = self.record(sender.id)
        self.inbox(target).put(
            Message(
                sender=own.name if own is not None else "parent",
                sender_session=sender.id,
                to_session=target,
                text=message,
            )
        )
        if own is not None:
            own.messages_sent += 1
            self._save(own)
        return {"delivered": True, "to": to, "relation": relation}

    def observe(self, parent: SubagentSession, name: str) -> dict[str, Any]:
        """A bounded, read-only summary of one child: state, task, last cells and messages."""
        record = self.child(parent.id, name)
        activity = self._activity.get(record.session_id)
        body = record.summary()
        body.update(
            cells_run=record.cells_run,
            tokens_used=record.tokens_used,
            budget={"tokens": record.budget.tokens, "seconds": record.budget.seconds},
            last_cells=list(activity.cells) if activity else [],
            last_messages=list(activity.messages) if activity else [],
            children=[c.summary() for c in self.children(record.session_id)],
        )
        return body

    # ------------------------------------------------------------ cancel and close

    async def cancel(self, parent_id: str, name: str, reason: str = "cancelled by its parent") -> ChildRecord:
        """Stop one child (queued: never starts; running: its turn is cancelled); returns its record."""
        record = self.child(parent_id, name)
        await self._cancel(record, reason)
        return record

    async def cancel_all(self, parent_id: str, reason: str) -> list[ChildRecord]:
        """Stop every active child of `parent_id`; returns those that were stopped."""
        active = [r for r in self.children(parent_id) if r.active]
        await asyncio.gather(*(self._cancel(r, reason) for r in active))
        return active

    async def _cancel(self, record: ChildRecord, reason: str) -> None:
        # Its own children go first: a cancelled agent leaves nothing running behind it.
        await self.cancel_all(record.session_id, f"its parent {record.name} was cancelled")
        if record.state == "queued":
            self._queue = [(c, p) for c, p in self._queue if c != record.session_id]
            self._cancel_reasons[record.session_id] = reason
            self._settle(record, Ending("cancelled", reason=reason, stop_reason="cancelled"))
            return
        task = self._tasks.get(record.session_id)
        if record.state not in TURN or task is None:
            return
        self._cancel_reasons[record.session_id] = reason
        session = self._sessions.get(record.session_id)
        for _attempt in range(3):
            # Again if needed: a turn that was just starting may have missed the first cancel.
            if session is not None:
                await session.cancel()
            await asyncio.wait({task}, timeout=CANCEL_WAIT / 3)
            if task.done():
                break

    async def close_children(self, parent_id: str) -> None:
        """The parent is closing: cancel its active children, then close their sessions."""
        if self._stopping:
            return  # the agent closes every session itself at shutdown
        await self.cancel_all(parent_id, "its parent session was closed")
        for record in self.children(parent_id):
            self._sessions.pop(record.session_id, None)
            self._activity.pop(record.session_id, None)
            try:
                await self.agent.close_session(record.session_id)
            except Exception:
                log.exception("closing subagent session %s failed", record.session_id)

    async def aclose(self) -> None:
        """Server shutdown: stop admitting, cancel running turns; records stay as they were on disk."""
        self._stopping = True
        self._queue.clear()
        sessions = [self._sessions[c] for c in self._tasks if c in self._sessions]
        await asyncio.gather(*(s.cancel() for s in sessions), return_exceptions=True)
        tasks = list(self._tasks.values())
        if tasks:
            await asyncio.wait(tasks, timeout=CANCEL_WAIT)
        # A kernel being released finishes its final snapshot before the sessions close.
        await self._releases.wait(timeout=CANCEL_WAIT * 2)
        if self._delivery is not None and not self._delivery.done():
            self._delivery.cancel()


def summaries(records: Sequence[ChildRecord]) -> list[dict[str, Any]]:
    return [r.summary() for r in records]
