"""Refinement for one `Session`: the coordinator wired to the session's stores, model and kernel.

`SessionRefinement.attach(session)` is what the agent's `on_session` seam calls. It builds the
coordinator (planner on the agent's shared `ModelClient`, the optional refine model, budgets from the
model config), hooks it after every turn, starts its background worker on the running loop, and
exposes `on_kernel` (register the `refine.*`/`harness.*` host ops on a new kernel's bridge),
`compacted()` and `aclose()`. `harness_of(session)` is the session's `HarnessSurface`.

Settings (config.toml; no env var needed): `auto_refine_every` (assistant turns between automatic
reviews, default 25, 0 = off) and `refine_cooldown_seconds` (default 300).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from agent_core.bus import AutonomousCheckpoint, Closing, Compacted, KernelReady, TurnFinished
from agent_core.refinement.completion import ModelClientCompletion, RefineBudgets, refine_model
from agent_core.refinement.coordinator import (
    DEFAULT_AUTO_EVERY,
    DEFAULT_COOLDOWN_SECONDS,
    RefinementCoordinator,
)
from agent_core.refinement.host_ops import register_host_ops
from agent_core.refinement.idle_curation import IdleCuration, applies_without_review
from agent_core.refinement.planner import RefinementPlanner
from agent_core.refinement.policy import Policy
from agent_core.refinement.records import Scope
from agent_core.refinement.surface import HarnessSurface
from agent_core.refinement.trajectory import TrajectoryItem, trajectory_from_events

if TYPE_CHECKING:
    from agent_core.autonomy.gates import Gate
    from agent_core.autonomy.tamper import TamperWatch
    from agent_core.config.loader import AgentConfig
    from agent_core.control_plane.held import HeldChange
    from agent_core.refinement.curation_model import CuratorModel
    from agent_core.refinement.replay_run import Replayer
    from agent_core.session import Session
    from agent_core.turn.hooks import RefinementHook
    from kernel_bridge import KernelSession

log = logging.getLogger(__name__)

_Number = TypeVar("_Number", int, float)


def curator_model(config: AgentConfig, planner: RefinementPlanner) -> CuratorModel | None:
    """The curator's model pass over the planner's client and budget, when `curate_model_pass` is on."""
    if not config.option("curate_model_pass"):
        return None
    from agent_core.refinement.curation_model import CuratorModel

    return CuratorModel(planner.client, planner.budgets.planner_max_tokens)


def _replayer(session: Session) -> Replayer:
    """The session's replays: its gates as autonomous mode has them now (each with the environment
    the referee gives it), children made by the session's agent (reached through the subagent hub,
    the one part of a session that knows its agent; none without a hub)."""
    from agent_core.refinement.replay_child import ChildTurns
    from agent_core.refinement.replay_run import ChildTurn, Replayer, referee_watch

    def gates() -> tuple[Gate, ...]:
        autonomy = session.autonomy
        return autonomy.gates() if autonomy is not None else ()

    def gate_env(gate: Gate) -> dict[str, str]:
        autonomy = session.autonomy
        assert autonomy is not None  # gates() gave this gate: the session has autonomous mode
        return autonomy.gate_environment(gate)

    def child_turn() -> ChildTurn | None:
        hub = session.subagents
        agent = getattr(hub, "agent", None)
        if agent is None:
            return None
        turns: ChildTurn = ChildTurns(agent, session.agent_config.home, session.model_name)
        return turns

    def watch(cwd: str, gates: Sequence[Gate]) -> TamperWatch:
        autonomy = session.autonomy
        assert autonomy is not None  # gates() gave gates: the session has autonomous mode
        return referee_watch(autonomy.settings.referee)(cwd, gates)

    return Replayer(session.cwd, gates=gates, child_turn=child_turn, gate_env=gate_env, watch=watch)


def _setting(config: AgentConfig, name: str, default: _Number, kind: type[_Number]) -> _Number:
    """`name` as checked by `config_table` (`load_config` refused a bad value at start)."""
    from agent_core.config.table import value

    return kind(value(config.extra, name))


class SessionRefinement:
    """A session's refinement: its coordinator, the harness surface over it, and the session seams.

    It is the session's `RefinementHook` (agent_core/turn/hooks.py): attaching it as `session.refinement`
    registers its `turn_failed`, so a turn that raised still releases what its cells scheduled.
    """

    def __init__(self, session: Session, coordinator: RefinementCoordinator) -> None:
        self.session = session
        self._coordinator = coordinator
        # Refinement cards go into the transcript, so `session/load` replays them.
        self.surface = HarnessSurface.of(coordinator, record=session.record_event)
        self._task: asyncio.Task[None] | None = None
        self.idle: IdleCuration | None = None  # the curator's opt-in idle run (idle_curation.py)

    @classmethod
    def attach(cls, session: Session) -> SessionRefinement:
        """Build and start refinement for `session` (call from a running event loop); a session that
        has it already (`harness_of` attached it first) keeps the one it has."""
        if isinstance(session.refinement, SessionRefinement):
            return session.refinement
        config = session.agent_config
        planner = RefinementPlanner(
            ModelClientCompletion(session.model, model=refine_model(config)),
            RefineBudgets.from_model_limit(config.max_output_tokens),
        )

        def trajectory() -> Sequence[TrajectoryItem]:
            # The transcript on disk is the record of the session (ids included, compaction or not).
            return trajectory_from_events(session.store.load(session.id).events)

        refine_verify = str(config.option("refine_verify"))

        def policy() -> Policy:
            return Policy(
                mode=session.mode,
                refine_review=str(session.config.get("refine_review", "global_only")),
                refine_verify=refine_verify,
            )

        coordinator = RefinementCoordinator(
            session_id=session.id,
            local_store=session.local_store,
            global_store=session.global_store,
            project_store=session.project_store,  # None outside a git repository
            planner=planner,
            trajectory=trajectory,
            policy=policy,
            auto_every=_setting(config, "auto_refine_every", DEFAULT_AUTO_EVERY, int),
            cooldown_seconds=_setting(config, "refine_cooldown_seconds", DEFAULT_COOLDOWN_SECONDS, float),
        )
        from agent_core.trust.skill_check import session_verifiers

        coordinator.service.skill_verifier = session_verifiers(session)
        coordinator.service.children = partial(_running_children, session)
        if refine_verify == "replay":
            coordinator.pipeline.replayer = _replayer(session)
        refinement = cls(session, coordinator)
        hook: RefinementHook = refinement  # checked by mypy: the session's hook Protocol
        session.refinement = hook  # how acp_server finds it: `harness_of(session)`
        session.bus.subscribe(TurnFinished, refinement.after_turn)
        session.bus.subscribe(KernelReady, lambda ready: refinement.on_kernel(ready.kernel))
        session.bus.subscribe(Compacted, lambda _: refinement.compacted())
        # An autonomous-mode checkpoint (published only where autonomous mode is attached) is a
        # natural point for an automatic review.
        session.bus.subscribe(
            AutonomousCheckpoint, lambda checkpoint: coordinator.checkpoint(checkpoint.reason)
        )
        session.bus.subscribe(Closing, lambda _: refinement.aclose())

        async def hold_change(held: HeldChange) -> str | None:
            return (await coordinator.service.hold_change(held)).proposal_id

        session.control_plane_hold = hold_change  # a cell's change to .continual-acp/ waits for review
        refinement.surface.curator_model = curator_model(config, planner)
        idle_seconds = _setting(config, "curate_when_idle_seconds", 0.0, float)
        if idle_seconds > 0:

            def applies(scope: Scope) -> bool:
                now = policy()
                return applies_without_review(now.mode, now.refine_review, coordinator.service.trusted)(scope)

            refinement.idle = IdleCuration(
                refinement.surface,
                home=config.home,
                seconds=idle_seconds,
                turn_running=lambda: session.turn_running,
                applies=applies,
            )
        refinement.start()
        return refinement

    def start(self) -> None:
        """Run the coordinator's worker and outbox as a task on the running loop (`aclose` ends it)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._coordinator.serve(), name=f"refinement-{self.session.id}"
            )

    async def after_turn(self, finished: TurnFinished) -> None:
        """Before `TurnEnded`: release cell-scheduled refinements and maybe queue an automatic review."""
        self._coordinator.jobs.turn_ended()
        if self.idle is not None:
            self.idle.arm()

    def turn_failed(self) -> None:
        """The session calls this when a turn raised (a model failure): no `TurnFinished` was published."""
        self._coordinator.jobs.turn_failed()

    def on_kernel(self, kernel: KernelSession) -> None:
        register_host_ops(kernel.host_bridge, self.surface)

    def compacted(self) -> None:
        self._coordinator.compacted()

    async def aclose(self) -> None:
        if self.idle is not None:
            await self.idle.aclose()
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def harness_of(session: Session) -> HarnessSurface:
    """The session's harness surface. Every session has one: a session built by an agent without
    the refinement seam gets refinement attached now (what needs a model says so when asked)."""
    refinement = session.refinement
    if not isinstance(refinement, SessionRefinement):
        refinement = SessionRefinement.attach(session)
    return refinement.surface


def _running_children(session: Session) -> int:
    """What the subagent hub (attached later, when the agent has one) reports as still queued or
    running for this session: background work the user waits on."""
    hub = session.subagents
    return hub.running_children(session.id) if hub is not None else 0
