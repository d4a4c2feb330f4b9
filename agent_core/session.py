"""A session: its model context, transcript, kernel, mode/config, and the turn queue.

`run_turn` runs the turn loop (turn.py) in its own task and relays its events; `cancel` cancels that
task, so the model stream is closed and the cell interrupted at whatever point the turn is waiting,
and the relay answers `TurnEnded("cancelled")`. Turns are serialized by a FIFO lock: a second prompt
waits for the first to end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_core import events as ev
from agent_core.compaction import compact_messages, split_point
from agent_core.config import MODES, REFINE_REVIEW, AgentConfig
from agent_core.content import plain_text, title_from
from agent_core.editor_ops import EditorOps
from agent_core.errors import ModelError
from agent_core.model import ModelClient, Usage
from agent_core.ports import EditorPort, SkillsPort
from agent_core.prompt import PromptInputs, build_system_prompt, safe_section
from agent_core.recorder import TurnRecorder
from agent_core.transcript import SessionStore, TranscriptWriter, now_iso
from agent_core.turn import TurnOutcome, run_turn_body

if TYPE_CHECKING:
    from harness_store import HarnessStore
    from kernel_bridge import KernelSession

log = logging.getLogger(__name__)

# An after-turn hook (the refinement seam): called after every turn, before `TurnEnded`; the events
# it returns (e.g. `RefinementReported`) are part of the turn. Background work should spawn its own task.
AfterTurnHook = Callable[["Session", TurnOutcome], Awaitable[Sequence[ev.TurnEvent]]]

_END = object()
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
        self._local_store: HarnessStore | None = None
        self.skills = skills
        self.created_at = created_at
        self.messages: list[dict[str, Any]] = list(messages or [])
        self.title = title
        self._meta_title = title  # the title meta.json holds
        self.config: dict[str, Any] = {
            "mode": agent_config.mode,
            "model": agent_config.model,
            "refine_review": agent_config.refine_review,
        }
        self.config.update(config or {})
        self.last_prompt_tokens = last_prompt_tokens
        self.usage_totals = Usage()
        self.always_allowed = False
        self.current_cell: str | None = None
        self.cells_run = 0  # cells started in this process (for `/kernel status`)
        self.owner_lock: Any = None  # agent_core.ownership.SessionOwnerLock, released by close()
        self.after_turn_hooks: list[AfterTurnHook] = []
        # Seams for refinement/autonomous mode (attached via `Agent(on_session=...)`):
        self.kernel_hooks: list[Callable[[KernelSession], None]] = []  # a kernel is ready (host ops)
        self.compaction_hooks: list[Callable[[], None]] = []  # the context was just compacted
        self.close_hooks: list[Callable[[], Awaitable[None]]] = []  # the session is closing
        self.refinement: Any = None  # set by the refinement package; acp_server reads it
        self._kernel_note: str | None = None
        self._turn_lock = asyncio.Lock()  # FIFO: queued prompts run in arrival order
        self._turn_task: asyncio.Task[TurnOutcome] | None = None
        self._cancel_generation = 0
        self._emit: Callable[[ev.TurnEvent], None] | None = None
        self._closed = False
        self.editor_ops = EditorOps(self)
        self._kernel_factory = kernel_factory
        self._kernel_task: asyncio.Task[KernelSession] | None = None
        if agent_config.eager_kernel:
            self._start_kernel()

    # ------------------------------------------------------------ mode and config

    @property
    def mode(self) -> str:
        return str(self.config["mode"])

    def set_mode(self, mode: str) -> None:
        self.set_config("mode", mode)

    @property
    def model_name(self) -> str | None:
        return self.config.get("model") or None

    @property
    def model_accepts_images(self) -> bool:
        return bool(self.config.get("images", self.agent_config.extra.get("images", True)))

    def available_models(self) -> list[str]:
        models: list[str] = []
        for name in (self.agent_config.model, *self.agent_config.models, self.agent_config.refine_model):
            if name and name not in models:
                models.append(name)
        return models

    def set_config(self, key: str, value: Any) -> None:
        """Change one option; raises ValueError with a readable message on a bad key or value."""
        if key == "mode":
            if value not in MODES:
                raise ValueError(f"mode must be one of {', '.join(MODES)}; got {value!r}")
        elif key == "refine_review":
            if value not in REFINE_REVIEW:
                raise ValueError(f"refine_review must be one of {', '.join(REFINE_REVIEW)}; got {value!r}")
        elif key == "model":
            if not isinstance(value, str) or not value.strip():
                raise ValueError("model must be a non-empty model id")
            known = self.available_models()
            if known and value not in known:
                raise ValueError(f"unknown model {value!r}; configured models: {', '.join(known)}")
        elif key == "max_turn_requests":
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"max_turn_requests must be a positive integer; got {value!r}")
        elif key == "wait_for_refinement":
            # Editors send config values as strings; scripts may send a JSON boolean.
            flags = {True: True, False: False, "true": True, "false": False}
            if not isinstance(value, bool | str) or value not in flags:
                raise ValueError(f"wait_for_refinement must be true or false; got {value!r}")
            value = flags[value]
        else:
            raise ValueError(
                f"unknown config option {key!r}; options: mode, model, refine_review, max_turn_requests, "
                "wait_for_refinement"
            )
        self.config[key] = value
        if key == "mode" and value == "ask":
            # Selecting `ask` (again) revokes "Allow always (this session)": the user asked to be asked.
            self.always_allowed = False
        self._writer.append({"type": "config", "key": key, "value": value})

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

    def harness_overview(self, query: str | None) -> str:
        from harness_store import merge, render_overview

        merged = merge(self.global_store.load(), self.local_store.load())
        return str(render_overview(merged, query=query))

    def system_prompt(self, parts: Sequence[ev.PromptPart] = ()) -> str:
        query = plain_text(parts) or None
        return build_system_prompt(
            PromptInputs(
                cwd=self.cwd,
                harness_overview=safe_section("harness", lambda: self.harness_overview(query)),
                skill_index=safe_section("skills", lambda: self.skills.index_text(self.cwd)),
            )
        )

    # ------------------------------------------------------------ model context

    def append_message(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self._writer.message(message)

    def usage_event(self, usage: Usage) -> ev.UsageReport:
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
            size=self.agent_config.context_window,
            input_tokens=self.usage_totals.input_tokens,
            output_tokens=self.usage_totals.output_tokens,
            cache_read_tokens=self.usage_totals.cache_read_tokens,
            cache_write_tokens=self.usage_totals.cache_write_tokens,
        )

    async def maybe_compact(self) -> None:
        threshold = self.agent_config.compact_threshold * self.agent_config.context_window
        if self.last_prompt_tokens and self.last_prompt_tokens >= threshold:
            try:
                await self._compact(None)
            except ModelError as exc:
                # The turn can still try with the full context; the user sees the model's own
                # error if it really no longer fits.
                log.warning("automatic compaction of session %s failed: %s", self.id, exc)

    def drop_images(self) -> bool:
        """Replace image parts in the context by a note and stop sending images; False if there were none."""
        from agent_core.content import IMAGE_NOT_SEEN

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
            self.config["images"] = False
            self._writer.append({"type": "context", "reason": "images removed", "messages": self.messages})
            self._writer.append({"type": "config", "key": "images", "value": False})
        return changed

    async def compact_for_overflow(self) -> bool:
        """Compact after the endpoint said the context does not fit; False when nothing could be cut."""
        if split_point(self.messages, self.agent_config.keep_recent_turns) == 0:
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
        result = await compact_messages(
            self.model,
            self.messages,
            model=self.model_name,
            keep_recent_turns=self.agent_config.keep_recent_turns,
            instructions=instructions,
        )
        if result is None:
            return "Nothing to compact yet: the conversation is only the most recent turns."
        self.messages = result.messages
        self.last_prompt_tokens = 0
        self._writer.append({"type": "compaction", "summary": result.summary, "messages": result.messages})
        for hook in list(self.compaction_hooks):
            try:
                hook()
            except Exception:
                log.exception("compaction hook %r failed in session %s", hook, self.id)
        return result.summary

    def _answer_dangling_tool_calls(self, answer: str = "Cancelled by the user before it finished.") -> None:
        """A cancelled cell leaves a tool call without a result; the next request needs one for each."""
        for index in range(len(self.messages) - 1, -1, -1):
            message = self.messages[index]
            if message.get("role") == "assistant":
                answered = {
                    m.get("tool_call_id") for m in self.messages[index + 1 :] if m.get("role") == "tool"
                }
                for call in message.get("tool_calls") or ():
                    if call.get("id") not in answered:
                        self.append_message(
                            {
                                "role": "tool",
                                "tool_call_id": call["id"],
                                "content": answer,
                            }
                        )
                return
            if message.get("role") == "user":
                return

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
            queue: asyncio.Queue[Any] = asyncio.Queue()

            def emit(event: ev.TurnEvent) -> None:
                recorder.record(event)
                if not isinstance(event, ev.UserMessage):  # the editor already shows the prompt; replays only
                    queue.put_nowait(event)

            async def drive() -> TurnOutcome:
                try:
                    return await run_turn_body(self, parts, emit)
                finally:
                    queue.put_nowait(_END)

            self._emit = emit
            task = asyncio.create_task(drive())
            self._turn_task = task
            try:
                while True:
                    item = await queue.get()
                    if item is _END:
                        break
                    yield item
                if task.cancelled():
                    outcome = TurnOutcome("cancelled")
                else:
                    error = task.exception()
                    if error is not None:
                        recorder.flush()
                        self._answer_dangling_tool_calls()
                        if self.refinement is not None:
                            # No after-turn hook runs on this path; refinement must still let go of
                            # what the turn's cells scheduled.
                            self.refinement.turn_failed()
                        raise error
                    outcome = task.result()
                self._answer_dangling_tool_calls()
                for event in await self._after_turn(parts, outcome):
                    recorder.record(event)
                    yield event
                ended = ev.TurnEnded(outcome.stop_reason, outcome.message)
                recorder.record(ended)
                yield ended
            finally:
                if not task.done():
                    task.cancel()
                    await asyncio.wait({task}, timeout=2)
                self._turn_task = None
                self._emit = None
                recorder.flush()
                self._touch()

    async def _after_turn(self, parts: Sequence[ev.PromptPart], outcome: TurnOutcome) -> list[ev.TurnEvent]:
        events: list[ev.TurnEvent] = []
        if self.title is None:
            self.title = title_from(parts)
            self._writer.append({"type": "title", "title": self.title})
            events.append(ev.TitleChanged(self.title))
        for hook in list(self.after_turn_hooks):
            try:
                events.extend(await hook(self, outcome))
            except Exception:
                log.exception("after-turn hook %r failed in session %s", hook, self.id)
        return events

    def record_event(self, event: ev.TurnEvent) -> None:
        """Append an event that happened outside a turn (a background refinement) to the transcript,
        so a later `session/load` replays it."""
        try:
            self._writer.event(event)
        except ValueError:
            log.warning("session %s is closed; event %s not recorded", self.id, type(event).__name__)

    def emit_into_turn(self, event: ev.TurnEvent) -> bool:
        """Add an event to the running turn's stream (host-bridge handlers); False when no turn runs."""
        if self._emit is None:
            return False
        self._emit(event)
        return True

    def repair_after_load(self) -> None:
        """A transcript cut off mid-cell (the server died) ends in an unanswered tool call; answer it."""
        self._answer_dangling_tool_calls(
            "Not finished: the session ended (server stopped) while this cell ran."
        )

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

    # ------------------------------------------------------------ kernel

    def kernel_ready(self, kernel: KernelSession) -> None:
        """Called by the agent once the kernel is acquired, before any model cell runs in it."""
        self.editor_ops.register(kernel.host_bridge)
        for hook in list(self.kernel_hooks):
            try:
                hook(kernel)
            except Exception:
                log.exception("kernel hook %r failed in session %s", hook, self.id)

    def take_kernel_note(self) -> str | None:
        note, self._kernel_note = self._kernel_note, None
        return note

    def set_kernel_note(self, note: str | None) -> None:
        self._kernel_note = note

    def _start_kernel(self) -> asyncio.Task[KernelSession]:
        task = self._kernel_task
        if task is not None and task.done() and (task.cancelled() or task.exception() is not None):
            task = None  # the last start failed (reported on that cell); the next cell tries again
        if task is None:
            task = self._kernel_task = asyncio.create_task(self._kernel_factory(self))
        return task

    async def kernel(self) -> KernelSession:
        """The session's kernel (waits for a cold start; a dead kernel is replaced by kernel_bridge)."""
        if self._closed:
            raise RuntimeError(f"session {self.id} is closed")
        return await asyncio.shield(self._start_kernel())

    async def kernel_status(self) -> str:
        task = self._kernel_task
        if task is None:
            return "not started (starts with the first cell)"
        if not task.done():
            waiting = getattr(self, "kernel_wait_reason", None)  # set by the agent (max_kernels)
            return str(waiting) if waiting else "starting"
        if task.cancelled():
            return "stopped"
        if task.exception() is not None:
            return f"failed to start: {task.exception()}"
        kernel = task.result()
        if not kernel.alive:
            return "dead (the next cell starts a fresh kernel and restores the last snapshot)"
        state = f"busy (running cell {self.current_cell})" if self.current_cell else "idle"
        lines = [
            state,
            f"- cwd: {self.cwd}",
            f"- cells run in this session: {self.cells_run}",
            f"- names defined (as of the last snapshot): {_snapshot_names(kernel)}",
            f"- kernel pid: {getattr(kernel, 'kernel_pid', None) or 'unknown'}",
        ]
        return "\n".join(lines)

    async def interrupt_kernel(self) -> str:
        """Interrupt the running cell now (never queued behind the turn); says what happened."""
        task = self._kernel_task
        if task is None or not task.done() or task.cancelled() or task.exception() is not None:
            return "Nothing to interrupt: the kernel is not running."
        if self.current_cell is None:
            return "Nothing to interrupt: no cell is running (the kernel is idle)."
        cell = self.current_cell
        await task.result().interrupt()
        return f"Interrupted the running cell {cell}; the turn goes on with its output."

    async def restart_kernel(self) -> str:
        kernel = await self.kernel()
        return str(await kernel.restart())

    # ------------------------------------------------------------ lifecycle

    async def close(self, *, snapshot_timeout: float = 10.0) -> None:
        """Cancel, take a final snapshot (bounded), shut the kernel down, close the transcript."""
        if self._closed:
            return
        await self.cancel()
        self._closed = True
        for close_hook in list(self.close_hooks):
            try:
                await asyncio.wait_for(close_hook(), 10)
            except Exception:
                log.exception("close hook %r failed in session %s", close_hook, self.id)
        try:
            await self._close_kernel_and_transcript(snapshot_timeout)
        finally:
            if self.owner_lock is not None:
                self.owner_lock.release()  # after the final snapshot: another process may open it now

    async def _close_kernel_and_transcript(self, snapshot_timeout: float) -> None:
        task = self._kernel_task
        if task is None:
            self._writer.close()
            return
        if not task.done():
            # Let a starting kernel finish starting so it can be shut down (never orphaned).
            await asyncio.wait({task}, timeout=60)
        if task.done() and not task.cancelled() and task.exception() is None:
            try:
                # kernel_bridge takes the final snapshot (bounded) before it stops the kernel.
                await task.result().shutdown(timeout=snapshot_timeout)
            except Exception:
                log.exception("kernel shutdown of session %s failed", self.id)
        self._writer.close()

    @property
    def session_dir(self) -> Path:
        return self.store.session_dir(self.id)


def _snapshot_names(kernel: Any) -> str:
    manifest = getattr(kernel, "last_snapshot", None) or {}
    names = sorted({*manifest.get("saved", {}), *manifest.get("skipped", {})})
    if not manifest:
        return "unknown (no snapshot taken yet)"
    return ", ".join(names) if names else "none"
