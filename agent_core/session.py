"""A session: the turn queue, and the parts a turn works on.

`run_turn` runs the turn loop (turn/loop.py) in its own task and relays its events; `cancel` cancels that
task, so the model stream is closed and the cell interrupted at whatever point the turn is waiting,
and the relay answers `TurnEnded("cancelled")`. Turns are serialized by a FIFO lock: a second prompt
waits for the first to end.

The parts live in their own modules: the settings (config/session_config.py, its table
config/session_settings.py), the model context and compaction (turn/session_context.py over
turn/model_context.py), the kernel side (kernel/session_kernel.py over kernel/handle.py), showing
events (turn/session_publish.py), steering (turn/steering.py), the harness stores and prompt section
(session_harness.py), the control-plane checks at a prompt's edges (control_plane/prompt_checks.py),
the refinement seam's type (turn/hooks.py). The `Session*` parts are its bases: each names what it
uses of the session. The session is a `TurnContext` (turn/loop.py) and an `EditorOpsHost`
(editor_ops.py).

Features attach to it (`Agent(on_session=...)`) into typed slots declared here -- `refinement`,
`autonomy`, `subagents`, `mcp`, `control_plane`, `control_plane_hold`, and the agent's
`kernel_wait_reason`, `hibernation_line`, `owner_lock` -- and subscribe to what it tells them on
`bus` (agent_core.bus). The slot types are named for the type checker only, so importing the
session imports no feature.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_core import events as ev
from agent_core.bus import Closing, EventBus, TurnFailed, TurnFinished
from agent_core.config.loader import AgentConfig
from agent_core.config.session_config import SessionConfig
from agent_core.editor_ops import EditorOps
from agent_core.history.prompt_checkpoints import SessionCheckpoints
from agent_core.history.transcript import SessionStore, TranscriptWriter, now_iso
from agent_core.kernel.handle import KernelHandle
from agent_core.kernel.session_kernel import SessionKernel
from agent_core.mcp.prompt_section import prompt_section as mcp_prompt_section
from agent_core.model import ModelClient
from agent_core.ports import EditorPort, SkillsPort
from agent_core.safetext import one_line
from agent_core.session_harness import SessionHarness
from agent_core.trust.correction import reads_as_correction
from agent_core.trust.entry_usage import TurnUsage, UsageLedger
from agent_core.turn.content import plain_text, title_from
from agent_core.turn.hooks import RefinementHook
from agent_core.turn.loop import STEER_PREFIX, TurnOutcome, run_turn_body
from agent_core.turn.model_context import SERVER_STOPPED_ANSWER, ModelContext
from agent_core.turn.recorder import TurnRecorder
from agent_core.turn.session_context import SessionContext
from agent_core.turn.session_publish import SessionPublishing
from agent_core.turn.steering import SteeringQueue
from agent_core.turn.system_prompt import ClientSystemPrompt, PromptInputs, build_system_prompt, safe_section
from agent_core.user_question import UserQuestions

if TYPE_CHECKING:
    from agent_core.autonomy.controller import SessionAutonomy
    from agent_core.control_plane.guard import ControlPlaneGuard
    from agent_core.control_plane.held import HeldChange
    from agent_core.history.ownership import SessionOwnerLock
    from agent_core.mcp.registry import McpRegistry
    from agent_core.subagents.hub import SubagentHub
    from harness_store import HarnessStore, ProjectStore, Scopes
    from kernel_bridge import KernelSession

log = logging.getLogger(__name__)

CANCEL_WAIT = 0.9  # seconds `cancel()` waits for the turn task; the contract is `cancelled` within 1 s


class Session(SessionConfig, SessionContext, SessionKernel, SessionPublishing):
    def __init__(
        self,
        *,
        session_id: str,
        cwd: str,
        editor: EditorPort,
        agent_config: AgentConfig,
        model: ModelClient,
        store: SessionStore,
        writer: TranscriptWriter,
        global_store: HarnessStore | None,
        skills: SkillsPort,
        kernel_factory: Callable[[Session], Coroutine[Any, Any, KernelSession]],
        created_at: str,
        messages: list[dict[str, Any]] | None = None,
        title: str | None = None,
        config: dict[str, Any] | None = None,
        last_prompt_tokens: int = 0,
    ) -> None:
        self.id = session_id
        self.cwd = cwd
        self.editor = editor
        self.agent_config = agent_config
        self.model = model
        self.store = store
        self._writer = writer
        self.harness = SessionHarness(
            home=agent_config.home,
            local_dir=store.session_dir(session_id) / "harness",
            cwd=cwd,
            global_store=global_store,
        )
        self.skills = skills
        self.created_at = created_at
        self.context = ModelContext(
            writer,
            context_window=agent_config.context_window,
            messages=messages,
            last_prompt_tokens=last_prompt_tokens,
        )
        self.title = title
        self._meta_title = title  # the title meta.json holds
        self.config: dict[str, Any] = agent_config.session_defaults()
        self.config.update(config or {})
        self.always_allowed = False  # "Allow always (this session)" was chosen; `ask` again revokes it
        self.stream_fallback_told = False  # the user knows answers come unstreamed (turn/loop.py)
        self.owner_lock: SessionOwnerLock | None = None  # released by close(), after the final snapshot
        # What the session tells its features and the editor connection (agent_core.bus): a kernel
        # is ready, a turn finished or failed, the context was compacted, it closes, an event
        # happened outside a turn. Features subscribe when they attach (`Agent(on_session=...)`).
        self.bus = EventBus(f"session {session_id}")
        self._refinement: RefinementHook | None = None
        self._refinement_failed: Callable[[TurnFailed], None] | None = None
        self._turn_usage: TurnUsage | None = None  # the running turn's entries and outcome
        # the `started` stamp of the last turn in the usage ledger: the next prompt may correct it
        self._last_recorded_turn: str | None = None
        # The features' slots: each is set by the feature when it attaches (None until then, or
        # when this agent has no such feature) and read by acp_server and the other features.
        self.autonomy: SessionAutonomy | None = None  # goals + autonomous mode (agent_core.autonomy)
        self.subagents: SubagentHub | None = None  # the server's hub (agent_core.subagents)
        self.mcp: McpRegistry | None = None  # this session's MCP servers (agent_core.mcp)
        self._sandbox_warned = False
        # The control-plane guard (agent_core.control_plane): set when an unconfined kernel is ready.
        self.control_plane: ControlPlaneGuard | None = None
        # Where a held control-plane change goes (refinement sets it: a pending review).
        self.control_plane_hold: Callable[[HeldChange], Awaitable[str | None]] | None = None
        # Whether and when this session's live kernel hibernates (set by the agent's Hibernator).
        self.hibernation_line: Callable[[], str] | None = None
        self.kernel_wait_reason: str | None = None  # why its kernel waits for a slot (max_kernels)
        self._turn_lock = asyncio.Lock()  # FIFO: queued prompts run in arrival order
        self._turn_task: asyncio.Task[TurnOutcome] | None = None
        self._cancel_generation = 0
        self._emit: Callable[[ev.TurnEvent], None] | None = None
        # Messages sent into the running turn (`steer`), each with the future its sender awaits:
        # True once the turn took it at a model request, False when the turn ended first.
        self._steering = SteeringQueue()
        self._closed = False
        # The editor's own instructions for this session (unstable ACP `systemPrompt`), as the last
        # session/new, load, resume or fork that opened it here said; None: the base alone.
        self.client_system_prompt: ClientSystemPrompt | None = None
        self.editor_ops = EditorOps(self)
        self.user_questions = UserQuestions(self)
        self.kernel_handle = KernelHandle(lambda: kernel_factory(self), label=session_id)
        self.checkpoints = SessionCheckpoints(
            store.session_dir(session_id),
            cwd,
            max_count=agent_config.checkpoint_max_count,
            max_bytes=agent_config.checkpoint_max_bytes,
        )
        if agent_config.eager_kernel:
            self.kernel_handle.start()

    # ------------------------------------------------------------ refinement

    @property
    def refinement(self) -> RefinementHook | None:
        """The refinement attached to this session (set by agent_core.refinement; acp_server reads it)."""
        return self._refinement

    @refinement.setter
    def refinement(self, hook: RefinementHook | None) -> None:
        """Attach `hook`: it is told when a turn fails (a `TurnFailed` subscriber, like any other)."""
        if self._refinement_failed is not None:
            self.bus.unsubscribe(TurnFailed, self._refinement_failed)
            self._refinement_failed = None
        self._refinement = hook
        if hook is not None:
            told = hook

            def failed(_: TurnFailed) -> None:
                told.turn_failed()

            self._refinement_failed = failed
            self.bus.subscribe(TurnFailed, failed)

    # ------------------------------------------------------------ harness (session_harness.py)

    @property
    def global_store(self) -> HarnessStore:
        return self.harness.global_store

    @property
    def local_store(self) -> HarnessStore:
        return self.harness.local_store

    @property
    def project_store(self) -> ProjectStore | None:
        """The `ProjectStore` of the git repository around the cwd, or None outside one."""
        return self.harness.project_store

    @property
    def scopes(self) -> Scopes:
        """The session's stores: local, global and the project's (None outside a git repository)."""
        return self.harness.scopes

    def harness_overview(self, query: str | None) -> str:
        return self.harness.overview(query, self._turn_usage)

    @property
    def turn_running(self) -> bool:
        """True while a prompt's turn runs (the idle curator waits for none to run)."""
        return self._turn_task is not None or self._turn_usage is not None

    def system_prompt(self, parts: Sequence[ev.PromptPart] = ()) -> str:
        query = plain_text(parts) or None
        return build_system_prompt(
            PromptInputs(
                cwd=self.cwd,
                harness_overview=safe_section("harness", lambda: self.harness_overview(query)),
                skill_index=safe_section("skills", lambda: self.skills.index_text(self.cwd)),
                mcp_servers=safe_section("mcp", lambda: mcp_prompt_section(self.mcp)),
                client=self.client_system_prompt,
            )
        )

    # ------------------------------------------------------------ turns

    def run_turn(self, parts: Sequence[ev.PromptPart]) -> AsyncIterator[ev.TurnEvent]:
        """Run one prompt; yields turn events, the last always `TurnEnded`. May raise `ModelError`.

        A `cancel()` after this call and before the turn starts (it may be queued behind another)
        cancels it too: the prompt was sent before the cancel.
        """
        return self._turn(list(parts), self._cancel_generation)

    async def _turn(self, parts: Sequence[ev.PromptPart], generation: int) -> AsyncIterator[ev.TurnEvent]:
        async with self._turn_lock:
            if self._closed:
                raise RuntimeError(f"session {self.id} is closed")
            recorder = TurnRecorder(self._writer)
            if generation != self._cancel_generation:
                # Cancelled while it waited behind another prompt: it never starts.
                ended = ev.TurnEnded("cancelled")
                recorder.record(ended)
                yield ended
                return
            queue: asyncio.Queue[ev.TurnEvent | None] = asyncio.Queue()  # None: the turn task ended
            # The prompt's checkpoint: where the transcript stands now; its kernel state is taken
            # right before the prompt's first cell (the kernel handle's one-shot hook).
            checkpoints = self.checkpoints
            checkpoints.begin(self._writer.size())
            self.kernel_handle.before_cell = checkpoints.before_cell

            usage = self._turn_usage = TurnUsage()
            if self._last_recorded_turn is not None and reads_as_correction(plain_text(parts)):
                usage.corrects = self._last_recorded_turn  # its followed entries: `corrected`

            def emit(event: ev.TurnEvent) -> None:
                recorder.record(event)
                usage.note(event)
                if isinstance(event, ev.UserMessage) and not event.message_id.startswith(STEER_PREFIX):
                    checkpoints.note_message(event.message_id)  # the editor shows the prompt; replays only
                else:  # a steering message is shown where it entered the turn
                    queue.put_nowait(event)

            async def drive() -> TurnOutcome:
                try:
                    # Before anything reads the harness or the gates for this prompt (the system
                    # prompt, the loop's pinned gates): what changed since the last verified state.
                    guard = self.control_plane
                    if guard is not None:
                        from agent_core.control_plane.prompt_checks import check_at_prompt_start

                        await check_at_prompt_start(guard, self, emit)
                    if self.mode == "autonomous" and self.autonomy is not None:
                        outcome = await self._autonomous_body(parts, emit)
                    else:
                        outcome = await run_turn_body(self, parts, emit)
                    if self.control_plane is not None:
                        from agent_core.control_plane.prompt_checks import check_at_prompt_end

                        await check_at_prompt_end(self.control_plane, self, emit)
                    return outcome
                finally:
                    queue.put_nowait(None)

            self._emit = emit
            task = asyncio.create_task(drive())
            self._turn_task = task
            try:
                while True:
                    item = await queue.get()
                    if item is None:
                        break
                    yield item
                if task.cancelled():
                    outcome = TurnOutcome("cancelled")
                else:
                    error = task.exception()
                    if error is not None:
                        recorder.flush()
                        self.context.answer_dangling_tool_calls()
                        self._turn_failed()
                        self._record_usage(usage, "error")
                        raise error
                    outcome = task.result()
                self.context.answer_dangling_tool_calls()
                for event in await self._after_turn(parts, outcome):
                    recorder.record(event)
                    yield event
                ended = ev.TurnEnded(outcome.stop_reason, outcome.message)
                recorder.record(ended)
                self._record_usage(usage, outcome.stop_reason)
                yield ended
            finally:
                self._turn_usage = None
                if not task.done():
                    task.cancel()
                    await asyncio.wait({task}, timeout=2)
                self._turn_task = None
                self._emit = None
                self.kernel_handle.before_cell = None
                checkpoints.end()
                self._steering.drop()
                recorder.flush()
                self._touch()

    async def _autonomous_body(
        self, parts: Sequence[ev.PromptPart], emit: Callable[[ev.TurnEvent], None]
    ) -> TurnOutcome:
        """Autonomous mode: model turns and gates in one prompt until the gates pass or a limit hits."""
        assert self.autonomy is not None

        async def model_turn(turn_parts: Sequence[ev.PromptPart]) -> ev.StopReason:
            outcome = await run_turn_body(self, turn_parts, emit)
            self.context.answer_dangling_tool_calls()
            return outcome.stop_reason

        result = await self.autonomy.run(parts, emit, model_turn)
        return TurnOutcome(result.stop_reason, result.message)

    def set_title(self, title: str) -> str:
        """The user's title for the session (kept over the derived one); returns it as stored:
        whitespace collapsed, control characters dropped (`safetext.one_line`), at most 200
        characters. Raises ValueError for an empty title."""
        cleaned = one_line(title)[:200]
        if not cleaned:
            raise ValueError("title must not be empty")
        self.title = cleaned
        self._writer.append({"type": "title", "title": cleaned})
        self._touch()
        return cleaned

    def steer(
        self, parts: Sequence[ev.PromptPart], *, queue: bool = False, message_id: str | None = None
    ) -> asyncio.Future[bool]:
        """Send a message into the running turn (turn/steering.py's `SteeringQueue.add`)."""
        future = self._steering.add(parts, message_id, running=self.busy, queue=queue)
        log.info("session %s: a steering message waits for the next model request", self.id)
        return future

    def take_steering(self) -> list[tuple[Sequence[ev.PromptPart], str | None]]:
        return self._steering.take()

    @property
    def steering_waiting(self) -> bool:
        return self._steering.waiting

    def drop_steering(self) -> None:
        """Answer every waiting steering message False (no turn will take it)."""
        self._steering.drop()

    def turn_context(self) -> str | None:
        """Short per-turn context for the model (the goal block), or None."""
        return self.autonomy.context_block() if self.autonomy is not None else None

    async def _after_turn(self, parts: Sequence[ev.PromptPart], outcome: TurnOutcome) -> list[ev.TurnEvent]:
        events: list[ev.TurnEvent] = []
        if self.title is None:
            self.title = title_from(parts)
            self._writer.append({"type": "title", "title": self.title})
            events.append(ev.TitleChanged(self.title))
        finished = TurnFinished(outcome)
        await self.bus.publish(finished)
        return events + finished.events

    def _record_usage(self, usage: TurnUsage, stop_reason: str) -> None:
        """One line in the entry-usage ledger; a failure to write it never fails the turn."""
        record = usage.record(self.id, stop_reason)
        self._last_recorded_turn = str(record["started"]) if record["entries"] else None
        try:
            UsageLedger(self.agent_config.home).append(record)
        except OSError as exc:
            log.warning("could not record harness entry usage for session %s: %s", self.id, exc)

    def _turn_failed(self) -> None:
        # No `TurnFinished` on this path; subscribers (refinement) must still let go of what the
        # turn's cells scheduled, or the session never becomes quiescent again.
        self.bus.emit(TurnFailed())

    def append_raw_records(self, lines: bytes) -> None:
        """Append already-encoded transcript records (a rewind keeps its own command's records)."""
        self._writer.append_raw(lines)

    def repair_after_load(self) -> None:
        """A transcript cut off mid-cell (the server died) ends in an unanswered tool call; answer it."""
        self.context.answer_dangling_tool_calls(SERVER_STOPPED_ANSWER)

    def _touch(self) -> None:
        if self.title == self._meta_title:
            return  # listing takes the last activity from the transcript's mtime
        self._meta_title = self.title
        try:
            self.store.write_meta(
                self.id, cwd=self.cwd, title=self.title, created_at=self.created_at, updated_at=now_iso()
            )
        except OSError:
            log.exception("could not update the metadata of session %s", self.id)

    async def cancel(self) -> None:
        """End the running turn (and any queued one) with `cancelled`; idempotent."""
        self._cancel_generation += 1
        task = self._turn_task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=CANCEL_WAIT)

    @property
    def busy(self) -> bool:
        return self._turn_task is not None and not self._turn_task.done()

    # ------------------------------------------------------------ lifecycle

    async def close(self, *, snapshot_timeout: float = 10.0) -> None:
        """Cancel, take a final snapshot (bounded), shut the kernel down, close the transcript."""
        if self._closed:
            return
        await self.cancel()
        self._closed = True
        await self.bus.publish(Closing(), timeout=10)
        try:
            await self._close_kernel_and_transcript(snapshot_timeout)
        finally:
            if self.owner_lock is not None:
                self.owner_lock.release()  # after the final snapshot: another process may open it now

    async def _close_kernel_and_transcript(self, snapshot_timeout: float) -> None:
        try:
            await self.kernel_handle.shutdown(snapshot_timeout)
        finally:
            self._writer.close()

    @property
    def session_dir(self) -> Path:
        """`<home>/sessions/<id>`: transcript, snapshot, cell outputs, local harness."""
        return self.store.session_dir(self.id)


if TYPE_CHECKING:
    from agent_core.autonomy.controller import AutonomySession
    from agent_core.control_plane.cells import GuardedSession
    from agent_core.subagents.hub import AttachedSession
    from agent_core.turn.loop import TurnContext

    def _features_see_a_session(
        session: Session,
    ) -> tuple[AttachedSession, AutonomySession, GuardedSession, TurnContext]:
        """For mypy only: a `Session` is what each feature's Protocol of it asks (they cannot import it)."""
        return session, session, session, session
