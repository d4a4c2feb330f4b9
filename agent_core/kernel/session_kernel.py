"""The session's kernel side: the kernel handle's commands as the session offers them (`/kernel
status`, keep, interrupt, restart, the note for the next prompt), what a ready kernel is wired to
(editor ops, user questions, the control-plane guard, the warning that no sandbox is in force), and
whether cells need approval because a sandbox was asked for and none works.

`SessionKernel` is a part of `Session` (session.py): it names what it uses of the session below,
and the session supplies it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

from agent_core.bus import Closing, EventBus, KernelReady
from agent_core.config.loader import AgentConfig
from agent_core.editor_ops import EditorOps, policy_inputs
from agent_core.history.prompt_checkpoints import SessionCheckpoints
from agent_core.kernel.handle import KernelHandle
from agent_core.turn.system_prompt import ClientSystemPrompt
from agent_core.user_question import UserQuestions

if TYPE_CHECKING:
    from agent_core import events as ev
    from agent_core.control_plane.guard import ControlPlaneGuard
    from agent_core.control_plane.held import HeldChange
    from kernel_bridge import KernelSession

log = logging.getLogger(__name__)


class SessionKernel:
    # What this part uses of the session (set by `Session.__init__`).
    id: str
    cwd: str
    agent_config: AgentConfig
    bus: EventBus
    kernel_handle: KernelHandle
    checkpoints: SessionCheckpoints
    editor_ops: EditorOps
    user_questions: UserQuestions
    client_system_prompt: ClientSystemPrompt | None
    control_plane: ControlPlaneGuard | None
    control_plane_hold: Callable[[HeldChange], Awaitable[str | None]] | None
    hibernation_line: Callable[[], str] | None
    kernel_wait_reason: str | None
    _closed: bool
    _sandbox_warned: bool

    if TYPE_CHECKING:

        async def notify_user(
            self,
            severity: ev.NoticeSeverity,
            title: str,
            description: str | None = None,
            *,
            fallback: bool = True,
        ) -> None: ...

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

    async def hold_control_plane_change(self, held: HeldChange) -> str | None:
        """Keep a change a cell made to .continual-acp/ as a pending review; its id."""
        if self.control_plane_hold is None:
            return None
        return await self.control_plane_hold(held)

    def _guard_control_plane(self, kernel: KernelSession) -> None:
        if self.control_plane is not None or kernel.guarantees.confined:
            return  # the sandbox tiers mount .continual-acp read-only: nothing to detect
        from agent_core.control_plane.prompt_checks import new_guard

        outside = str(self.agent_config.option("control_plane_outside_changes"))
        self.control_plane = new_guard(self.cwd, outside)
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
