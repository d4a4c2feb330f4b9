"""A session: the turn queue, and the parts a turn works on.

`run_turn` runs the turn loop (turn/loop.py) in its own task and relays its events; `cancel` cancels that
task, so the model stream is closed and the cell interrupted at whatever point the turn is waiting,
and the relay answers `TurnEnded("cancelled")`. Turns are serialized by a FIFO lock: a second prompt
waits for the first to end.

The parts live in their own modules: the settings table (config/session_settings.py), the model
context and its surgery (turn/model_context.py), the kernel handle and its status (kernel/handle.py),
the refinement seam's type (turn/hooks.py). The session is a `TurnContext` (turn/loop.py) and an
`EditorOpsHost` (editor_ops.py).

Features attach to it (`Agent(on_session=...)`) into typed slots declared here -- `refinement`,
`autonomy`, `subagents`, `mcp`, `control_plane`, `control_plane_hold`, and the agent's
`kernel_wait_reason`, `hibernation_line`, `owner_lock` -- and subscribe to what it tells them on
`bus` (agent_core.bus). The slot types are named for the type checker only, so importing the
session imports no feature.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agent_core import events as ev
from agent_core.bus import Closing, Compacted, EventBus, KernelReady, OutsideTurn, TurnFailed, TurnFinished
from agent_core.config import session_settings as settings
from agent_core.config.loader import AgentConfig
from agent_core.editor_ops import EditorOps, policy_inputs
from agent_core.errors import ModelError
from agent_core.history.prompt_checkpoints import SessionCheckpoints
from agent_core.history.transcript import SessionStore, TranscriptWriter, now_iso
from agent_core.kernel.handle import KernelHandle
from agent_core.mcp.prompt_section import prompt_section as mcp_prompt_section
from agent_core.model import ModelClient, Usage
from agent_core.ports import EditorPort, SkillsPort
from agent_core.safetext import one_line
from agent_core.trust.correction import reads_as_correction
from agent_core.trust.entry_usage import TurnUsage, UsageLedger
from agent_core.turn.content import plain_text, title_from
from agent_core.turn.hooks import RefinementHook
from agent_core.turn.loop import STEER_PREFIX, TurnOutcome, run_turn_body
from agent_core.turn.model_context import SERVER_STOPPED_ANSWER, ModelContext
from agent_core.turn.recorder import TurnRecorder
from agent_core.turn.system_prompt import ClientSystemPrompt, PromptInputs, build_system_prompt, safe_section
from agent_core.user_question import UserQuestions

if TYPE_CHECKING:
    from agent_core.autonomy.controller import SessionAutonomy
    from agent_core.control_plane.guard import ControlPlaneGuard
    from agent_core.control_plane.held import HeldChange
    from agent_core.history.ownership import SessionOwnerLock
    from agent_core.mcp.registry import McpRegistry
    from agent_core.subagents.hub import SubagentHub
    from harness_store import HarnessState, HarnessStore, ProjectStore, Scopes
    from kernel_bridge import KernelSession

log = logging.getLogger(__name__)

CANCEL_WAIT = 0.9  # seconds `cancel()` waits for the turn task; the contract is `cancelled` within 1 s


class Session:
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
        self._global_store = global_store
        self._project_store: ProjectStore | None = None
        self._project_checked = False
        self._local_store: HarnessStore | None = None
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
        self._steering: list[tuple[list[ev.PromptPart], asyncio.Future[bool], str | None]] = []
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

    # ------------------------------------------------------------ mode and config

    @property
    def mode(self) -> str:
        """`ask`, `auto` or `autonomous` (settings.MODE)."""
        return str(self.config["mode"])

    def set_mode(self, mode: str) -> None:
        """Same as `set_config("mode", mode)`."""
        self.set_config("mode", mode)

    @property
    def model_name(self) -> str | None:
        """The model that answers prompts; None when none is configured."""
        return self.config.get("model") or None

    @property
    def model_accepts_images(self) -> bool:
        """False once the endpoint refused images (or `images = false` in config.toml)."""
        return bool(self.config.get("images", self.agent_config.extra.get("images", True)))

    @property
    def max_turn_requests(self) -> int:
        """Model requests one prompt may make: the session's setting, else the configured limit."""
        return max(1, int(self.config.get("max_turn_requests") or self.agent_config.max_turn_requests))

    def available_models(self) -> list[str]:
        """The configured models (main, extra choices, refine model), for the model picker."""
        return self.agent_config.session_models()

    def set_config(self, key: str, value: Any) -> None:
        """Change one setting (agent_core.config.session_settings); raises ValueError with a readable message on a bad key or value."""
        value = settings.validate(key, value, models=self.available_models())
        self.config[key] = value
        if key == "mode" and value == "ask":
            # Selecting `ask` (again) revokes "Allow always (this session)": the user asked to be asked.
            self.always_allowed = False
        self._writer.append({"type": "config", "key": key, "value": value})

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

    # ------------------------------------------------------------ harness

    @property
    def global_store(self) -> HarnessStore:
        if self._global_store is None:
            from harness_store import HarnessStore

            self._global_store = HarnessStore(self.agent_config.home / "harness")
        return self._global_store

    @property
    def local_store(self) -> HarnessStore:
        if self._local_store is None:
            from harness_store import HarnessStore

            self._local_store = HarnessStore(self.store.session_dir(self.id) / "harness")
        return self._local_store

    @property
    def project_store(self) -> ProjectStore | None:
        """The `ProjectStore` of the git repository around the cwd, or None outside one."""
        if not self._project_checked:
            from agent_core.trust.project_scope import session_project_store

            self._project_store = session_project_store(self.cwd)
            self._project_checked = True
        return self._project_store

    @property
    def scopes(self) -> Scopes:
        """The session's stores: local, global and the project's (None outside a git repository)."""
        from harness_store import Scopes

        return Scopes(self.local_store, self.global_store, self.project_store)

    def harness_overview(self, query: str | None) -> str:
        from harness_store import render_overview

        view = self.scopes.states().prompt_view()
        overview = str(render_overview(view, query=query, order=self._prompt_order()))
        if self._turn_usage is not None:
            self._turn_usage.expect(_predictions(view))
            self._turn_usage.saw(overview)  # which entries this turn's prompt showed (entry_usage.py)
        return overview

    @property
    def turn_running(self) -> bool:
        """True while a prompt's turn runs (the idle curator waits for none to run)."""
        return self._turn_task is not None or self._turn_usage is not None

    def _prompt_order(self) -> dict[str, int]:
        """Helpful entries first, harmful ones last (entry_counters.py); none when unreadable."""
        from agent_core.trust.entry_counters import home_counters, prompt_order

        try:
            return prompt_order(home_counters(self.agent_config.home))
        except Exception:  # the counters order the prompt; they must never stop it
            log.exception("could not read the harness entry counters")
            return {}

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

    # ------------------------------------------------------------ model context (turn/model_context.py)

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
                    await self._check_control_plane_at_start(emit)
                    if self.mode == "autonomous" and self.autonomy is not None:
                        outcome = await self._autonomous_body(parts, emit)
                    else:
                        outcome = await run_turn_body(self, parts, emit)
                    await self._check_control_plane_at_end(emit)
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
                self._drop_steering()
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
        """Send a message into the running turn: it joins at the turn's next model request (the turn
        does not end before it). The future is True once it entered, False if the turn ended first.

        With `queue`, a message sent while no turn runs yet waits for the next turn's first request
        (the caller knows a prompt is on its way to a turn, and calls `drop_steering` when it is
        answered without one). `message_id` names the message where it enters (a v2 prompt answered
        with that id before it entered); else one is made. Raises `RuntimeError` when no turn is
        running and `queue` is False."""
        if not self.busy and not queue:
            raise RuntimeError("no turn is running")
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._steering.append((list(parts), future, message_id))
        log.info("session %s: a steering message waits for the next model request", self.id)
        return future

    def take_steering(self) -> list[tuple[Sequence[ev.PromptPart], str | None]]:
        taken, self._steering = self._steering, []
        for _, future, _ in taken:
            if not future.done():
                future.set_result(True)
        return [(parts, message_id) for parts, _, message_id in taken]

    @property
    def steering_waiting(self) -> bool:
        return bool(self._steering)

    def drop_steering(self) -> None:
        """Answer every waiting steering message False (no turn will take it)."""
        self._drop_steering()

    def _drop_steering(self) -> None:
        dropped, self._steering = self._steering, []
        for _, future, _ in dropped:
            if not future.done():
                future.set_result(False)

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

    def record_event(self, event: ev.TurnEvent) -> None:
        """Append an event that happened outside a turn (a background refinement) to the transcript,
        so a later `session/load` replays it."""
        try:
            self._writer.event(event)
        except ValueError:
            log.warning("session %s is closed; event %s not recorded", self.id, type(event).__name__)

    async def publish(self, event: ev.TurnEvent) -> None:
        """Show an event now: into the running turn when there is one, else recorded (a notice is
        live information and is not) and published as `OutsideTurn` (the editor connection shows it)."""
        if self.emit_into_turn(event):
            return
        if not isinstance(event, ev.Notice):
            self.record_event(event)
        await self.bus.publish(OutsideTurn(event))

    async def notify_user(
        self,
        severity: ev.NoticeSeverity,
        title: str,
        description: str | None = None,
        *,
        fallback: bool = True,
    ) -> None:
        """Tell the user something that is not part of the answer: an ACP `notice` in clients that
        advertise `session.notices`, else (when `fallback`) an agent message. Use it for what the user
        should know but the model need not: a failed MCP server, a sandbox not in force, a gate not
        rerun. Inside a turn, turn.py emits `ev.Notice` itself (it has no session, only TurnContext)."""
        await self.publish(ev.Notice(severity, title, description, fallback))

    def emit_into_turn(self, event: ev.TurnEvent) -> bool:
        """Add an event to the running turn's stream (host-bridge handlers); False when no turn runs."""
        if self._emit is None:
            return False
        self._emit(event)
        return True

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

    # ------------------------------------------------------------ kernel (kernel/handle.py)

    async def cells_need_approval(self) -> bool:
        """A `sandbox` kernel was asked for but no sandbox tier works here: every cell is approved by
        the user (ask mode's prompt), never run silently unconfined. Other backends: False."""
        if self.agent_config.kernel_backend.kind != "sandbox":
            return False
        try:
            kernel = await self.kernel()
        except Exception:
            return True  # the start failed: the cell will fail too, but never without consent
        return bool(kernel.guarantees.approval_required)

    async def _check_control_plane_at_start(self, emit: Callable[[ev.TurnEvent], None]) -> None:
        """Between prompts nothing of the agent's may land unseen (a process a cell left running
        writes later): the whole tree by content, held unless `control_plane_outside_changes` accepts."""
        if self.control_plane is None:
            return
        try:
            held = await asyncio.to_thread(self.control_plane.refresh)
        except Exception:
            log.exception("the control-plane check failed at the start of a prompt")
            return
        if held is not None:
            from agent_core.control_plane.cells import hold

            await hold(self, held, emit)

    async def _check_control_plane_at_end(self, emit: Callable[[ev.TurnEvent], None]) -> None:
        """A change to .continual-acp/ after the prompt's last cell (a process a cell left
        running) is the agent's too: the whole tree by content, off the event loop."""
        if self.control_plane is None:
            return
        guard = self.control_plane
        try:
            held = await asyncio.to_thread(
                guard.check, "", "", when="after the prompt's last cell", full=True
            )
        except Exception:
            log.exception("the control-plane check failed at the end of a prompt")
            return
        if held is not None:
            from agent_core.control_plane.cells import hold

            await hold(self, held, emit)

    async def hold_control_plane_change(self, held: HeldChange) -> str | None:
        """Keep a change a cell made to .continual-acp/ as a pending review; its id."""
        if self.control_plane_hold is None:
            return None
        return await self.control_plane_hold(held)

    def _guard_control_plane(self, kernel: KernelSession) -> None:
        if self.control_plane is not None or kernel.guarantees.confined:
            return  # the sandbox tiers mount .continual-acp read-only: nothing to detect
        from agent_core.control_plane.guard import CONTROL_DIR, ControlPlaneGuard
        from agent_core.trust.project_scope import find_repo

        repo = find_repo(self.cwd)
        roots = [Path(self.cwd) / CONTROL_DIR] + ([repo / CONTROL_DIR] if repo is not None else [])
        lock = repo / CONTROL_DIR / "harness" / ".lock" if repo is not None else None
        outside = str(self.agent_config.option("control_plane_outside_changes"))
        self.control_plane = ControlPlaneGuard(roots, lock_path=lock, outside_changes=outside)
        self.bus.subscribe(Closing, self._close_control_plane)

    def _close_control_plane(self, _: Closing) -> None:
        if self.control_plane is not None:
            self.control_plane.close()

    async def judge_host_call(self, op: str, access: Literal["read", "write"], path: str) -> str:
        """`path` as the host-call policy resolved it (agent_core/trust/host_call_policy.py);
        PermissionError when the policy refuses `op` that access."""
        return (await self.editor_ops.judge(op, access, path)).requested

    def kernel_ready(self, kernel: KernelSession) -> None:
        """Called by the agent once the kernel is acquired, before any model cell runs in it."""
        bridge = kernel.host_bridge
        policy = policy_inputs(self.cwd, self.agent_config, kernel.guarantees, bridge.runtime_dir)
        self.editor_ops.register(bridge, policy)
        self.user_questions.register(bridge)
        guarantees = kernel.guarantees
        try:
            self._guard_control_plane(kernel)
        except Exception:
            log.exception("no control-plane guard for session %s", self.id)
        if guarantees.approval_required and not self._sandbox_warned:
            # Said once per session: the user asked for a sandbox and must know it is not in force.
            self._sandbox_warned = True
            asyncio.get_running_loop().create_task(
                self.notify_user(
                    "warning",
                    "The kernel is not sandboxed: every cell needs your approval",
                    guarantees.describe(),
                )
            )
        self.bus.emit(KernelReady(kernel))

    @property
    def current_cell(self) -> str | None:
        """The id of the cell running now, if any."""
        return self.kernel_handle.current_cell

    @property
    def cells_run(self) -> int:
        """Cells started in this process."""
        return self.kernel_handle.cells_run

    def take_kernel_note(self) -> str | None:
        """What the next prompt tells the model about the kernel (once)."""
        return self.kernel_handle.take_note()

    def set_kernel_note(self, note: str | None) -> None:
        """Tell the model `note` with the next prompt (e.g. which names a load restored)."""
        self.kernel_handle.set_note(note)

    async def kernel(self) -> KernelSession:
        """The session's kernel (waits for a cold start; a dead kernel is replaced by kernel_bridge)."""
        if self._closed:
            raise RuntimeError(f"session {self.id} is closed")
        return await self.kernel_handle.get()

    async def kernel_status(self) -> str:
        """The `/kernel status` text (while the kernel waits for a slot under `max_kernels`, why)."""
        line = self.hibernation_line() if self.hibernation_line is not None else None
        status = await self.kernel_handle.status(self.cwd, line)
        waiting = self.kernel_wait_reason  # set by the agent (max_kernels)
        text = str(waiting) if status == "starting" and waiting else status
        prompt = self.client_system_prompt
        in_force = (
            prompt.status_line()
            if prompt is not None
            else "system prompt: the base (no instructions from the editor)"
        )
        return f"{text}\n- {self.checkpoints.status_line()}\n- {in_force}"

    def keep_kernel(self, keep: bool = True) -> str:
        """`/kernel keep` (pin: never hibernated) and `/kernel keep off`."""
        handle = self.kernel_handle
        handle.pinned = keep
        if not keep:
            return "Kernel unpinned: it may hibernate again when idle or to make room under max_kernels."
        if handle.hibernation is not None:
            return "Kernel pinned: it is hibernated now, revives with the next cell and then stays live."
        return "Kernel pinned: it stays live (never hibernated) until `/kernel keep off`."

    async def interrupt_kernel(self) -> str:
        """Interrupt the running cell now (never queued behind the turn); says what happened."""
        return await self.kernel_handle.interrupt()

    async def restart_kernel(self) -> str:
        """Restart the kernel; kernel_bridge's report of what came back."""
        return await self.kernel_handle.restart()

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


_PREDICTIONS: dict[int, tuple[object, dict[str, str]]] = {}


def _predictions(view: HarnessState) -> dict[str, str]:
    """The prompt view's predictions (entry_counters.predictions), once per view: the view object
    is reused while no store changed, so 10,000 entries are scanned once per harness change."""
    from agent_core.trust.entry_counters import predictions

    hit = _PREDICTIONS.get(id(view))
    if hit is not None and hit[0] is view:
        return hit[1]
    found = predictions(view.entries)
    _PREDICTIONS.clear()
    _PREDICTIONS[id(view)] = (view, found)
    return found
