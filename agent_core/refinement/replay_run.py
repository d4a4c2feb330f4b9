"""`Replayer`: replays a failed step with and without a proposal's edit and reads the verdict.

For each of the two runs: a scratch checkout of the repository at HEAD (scratch_worktree.py), a
child turn given the user's task (replay_child.py; its harness holds the edit or not), then every
gate of the session, run through the same launch seam as the referee's gates
(`agent_core.autonomy.runner.run_gate`) in the checkout. The runs go one after the other (the
second never races the first for a kernel or the model), entirely off the event loop's blocking
path: git in worker threads, the child and the gates as async processes. The verdict is
`replay.decide`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from agent_core.refinement.replay import (
    GATE_TAIL_CHARS,
    ReplayReport,
    ReplayRun,
    decide,
    failed_step,
    not_run,
    task_of,
)
from agent_core.refinement.replay_child import ChildCost, ReplayChildError
from agent_core.refinement.scratch_worktree import WorktreeError, repository_root, scratch_checkout
from agent_core.refinement.trajectory import TrajectoryItem
from harness_store import Proposal

if TYPE_CHECKING:
    from agent_core.autonomy.gates import Gate
    from agent_core.autonomy.tamper import TamperWatch
    from agent_core.control_plane.settings import RefereeSettings

ChildTurn = Callable[[str, str, Proposal | None], Awaitable[ChildCost]]
GateEnv = Callable[["Gate"], Mapping[str, str]]


def referee_watch(referee: RefereeSettings) -> Callable[[str, Sequence[Gate]], TamperWatch]:
    """The referee's tamper watch for a checkout: the tests, protected paths, runner files and the
    files a gate names, as an autonomous loop watches them (agent_core/autonomy/tamper.py)."""
    from agent_core.autonomy.pinning import gate_modules
    from agent_core.autonomy.tamper import TamperWatch, runner_patterns

    def start(cwd: str, gates: Sequence[Gate]) -> TamperWatch:
        modules = [m for g in gates for m in gate_modules(g.command)] if referee.protect_runner_files else []
        return TamperWatch.start(
            cwd,
            patterns=referee.test_patterns,
            gates=gates,
            protected=referee.protected_paths,
            shadowing=runner_patterns(referee.runner_files, modules),
        )

    return start


class Replayer:
    """Replays for one session: its `cwd`, its gates now (`gates`), the environment each gate runs
    with (`gate_env`), the child turn (`child_turn`, None: the session's agent cannot make one),
    and the referee's tamper watch (`watch`: a child turn that changes what the gates judge by --
    a test, a protected path, a runner file -- makes its run prove nothing, as a loop's pass would
    not count)."""

    def __init__(
        self,
        cwd: str,
        *,
        gates: Callable[[], Sequence[Gate]],
        child_turn: Callable[[], ChildTurn | None],
        gate_env: GateEnv | None = None,
        watch: Callable[[str, Sequence[Gate]], TamperWatch] | None = None,
    ) -> None:
        self.cwd = cwd
        self._gates = gates
        self._child_turn = child_turn
        self._gate_env = gate_env
        self._watch = watch

    async def replay(
        self, proposal: Proposal, *, fixes: str, items: Sequence[TrajectoryItem]
    ) -> ReplayReport | None:
        """Both replays of `proposal` and the verdict; None when `fixes` names no failed step of
        `items` (the proposal claims to fix nothing, so there is nothing to replay)."""
        step = failed_step(items, fixes)
        if step is None:
            return None
        task = task_of(items, step)
        if task is None:
            return not_run(fixes, "no user prompt precedes the failed step: there is no task to replay")
        # The gates file is the repository's: read off the event loop.
        gates = tuple(await anyio.to_thread.run_sync(self._gates))
        if not gates:
            return not_run(fixes, "the session has no gates: nothing can judge a replay")
        child_turn = self._child_turn()
        if child_turn is None:
            return not_run(fixes, "this server cannot start a replay session")
        repo = await anyio.to_thread.run_sync(repository_root, self.cwd)
        if repo is None:
            return not_run(fixes, "the session's directory is not in a git repository")
        relative = os.path.relpath(os.path.realpath(self.cwd), os.path.realpath(repo))
        with_edit = await self._run(repo, relative, task, gates, child_turn, proposal)
        without_edit = await self._run(repo, relative, task, gates, child_turn, None)
        return decide(fixes, with_edit, without_edit)

    def _env(self, gate: Gate) -> dict[str, str] | None:
        return dict(self._gate_env(gate)) if self._gate_env is not None else None

    async def _run(
        self,
        repo: Path,
        relative: str,
        task: str,
        gates: Sequence[Gate],
        child_turn: ChildTurn,
        edits: Proposal | None,
    ) -> ReplayRun:
        from agent_core.autonomy.runner import run_gate

        with_edit = edits is not None
        started = time.monotonic()
        cost = ChildCost(0, 0)
        try:
            async with scratch_checkout(repo) as checkout:
                cwd = os.path.normpath(checkout / relative)
                watch = await anyio.to_thread.run_sync(self._watch, cwd, gates) if self._watch else None
                cost = await child_turn(cwd, task, edits)
                tampered = await anyio.to_thread.run_sync(watch.changes) if watch is not None else None
                results = []
                for gate in gates:
                    env = await anyio.to_thread.run_sync(self._env, gate)  # looks at the workspace
                    results.append(await run_gate(gate, cwd, env=env))
        except (WorktreeError, ReplayChildError, OSError) as exc:
            return ReplayRun(
                with_edit,
                False,
                requests=cost.requests,
                tokens=cost.tokens,
                seconds=time.monotonic() - started,
                error=str(exc),
            )
        output = "\n".join(f"$ {r.command}\n{r.output.rstrip()}\n[{r.summary()}]" for r in results)
        changed = ", ".join(c.path for c in tampered.changed) if tampered is not None else ""
        return ReplayRun(
            with_edit,
            all(r.passed for r in results),
            gate_tail=output[-GATE_TAIL_CHARS:],
            requests=cost.requests,
            tokens=cost.tokens,
            seconds=time.monotonic() - started,
            error=f"the replay's turn changed what the gates judge by ({changed})" if changed else None,
        )
