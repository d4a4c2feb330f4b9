"""Replay of a proposed fix (`refine_verify = "replay"`): the decision rule, the scratch checkouts, and
the replayer with a stand-in child turn running real gates in a real git repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest

from agent_core.autonomy.gates import Gate
from agent_core.refinement.replay import ReplayRun, decide
from agent_core.refinement.replay_child import ChildCost, as_local_entries
from agent_core.refinement.replay_run import Replayer
from agent_core.refinement.scratch_worktree import checkout, scratch_checkout
from agent_core.refinement.trajectory import TrajectoryItem
from harness_store import Proposal
from tests.git_project import failing_calc_project

# The project's own gate is pytest (seconds to start on a busy machine); this one judges the same fix.
ADD_GATE = Gate("grep -q 'a + b' calc.py && echo fixed || { echo still broken; exit 1; }", 30)


def _run(with_edit: bool, passed: bool) -> ReplayRun:
    return ReplayRun(with_edit, passed, gate_tail="out", requests=2, tokens=10, seconds=1.0)


@pytest.mark.parametrize(
    ("with_passes", "without_passes", "verdict"),
    [
        (True, False, "helps"),
        (False, True, "does_not_help"),
        (True, True, "both_pass"),
        (False, False, "both_fail"),
    ],
)
def test_edit_helps_only_when_it_passes_with_and_fails_without(
    with_passes: bool, without_passes: bool, verdict: str
) -> None:
    report = decide("cell-1", _run(True, with_passes), _run(False, without_passes))
    assert report.verdict == verdict
    assert report.helps is (verdict == "helps")
    assert (report.requests, report.tokens) == (4, 20)


def test_a_run_that_could_not_be_made_proves_nothing() -> None:
    broken = ReplayRun(False, False, error="no checkout")
    report = decide("cell-1", _run(True, True), broken)
    assert report.verdict == "not_run"
    assert "without the edit could not run: no checkout" in report.reason


def _status(repo: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True, check=True
    ).stdout


def _worktrees(repo: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "worktree", "list", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_scratch_checkout_is_head_elsewhere_and_is_removed_with_its_record(tmp_path: Path) -> None:
    repo = failing_calc_project(tmp_path)
    (repo / "calc.py").write_text("uncommitted\n")  # the task's working tree: never touched
    with checkout(repo) as path:
        assert not path.is_relative_to(repo)
        assert (path / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
        (path / "calc.py").write_text("changed in the replay\n")
        assert str(path) in _worktrees(repo)
    assert not path.exists() and not path.parent.exists()
    assert str(path) not in _worktrees(repo)
    assert (repo / "calc.py").read_text() == "uncommitted\n"
    assert _status(repo) == " M calc.py\n"


def test_scratch_checkout_is_removed_when_the_replay_raises(tmp_path: Path) -> None:
    repo = failing_calc_project(tmp_path)

    async def main() -> Path:
        with pytest.raises(RuntimeError):
            async with scratch_checkout(repo) as path:
                raise RuntimeError("the child failed")
        return path

    path = anyio.run(main)
    assert not path.parent.exists()
    assert str(path) not in _worktrees(repo)


FIXED = "def add(a, b):\n    return a + b\n"


def test_replayer_runs_the_task_with_and_without_the_edit_then_the_gates_in_checkouts(
    tmp_path: Path,
) -> None:
    repo = failing_calc_project(tmp_path)
    seen: list[tuple[str, str, bool]] = []

    async def child_turn(cwd: str, task: str, edits: Proposal | None) -> ChildCost:
        # The stand-in model: only with the edit in its harness does it fix the code.
        seen.append((cwd, task, edits is not None))
        if edits is not None:
            Path(cwd, "calc.py").write_text(FIXED)
        return ChildCost(requests=3, tokens=30)

    items = [
        TrajectoryItem("m-1", "user", "make the tests pass"),
        TrajectoryItem("cell-1", "tool_call", "run tests"),
        TrajectoryItem("cell-1", "tool_result", "1 failed", status="failed"),
    ]
    proposal = Proposal.model_validate(
        {
            "summary": "add adds",
            "edits": [{"action": "create", "kind": "memory", "title": "t", "content": "c"}],
        }
    )
    replayer = Replayer(str(repo), gates=lambda: (ADD_GATE,), child_turn=lambda: child_turn)
    report = anyio.run(lambda: replayer.replay(proposal, fixes="cell-1", items=items))
    assert report is not None
    assert report.verdict == "helps", report
    assert report.with_edit is not None and report.without_edit is not None
    assert "fixed" in report.with_edit.gate_tail and "still broken" in report.without_edit.gate_tail
    assert [(task, has) for _, task, has in seen] == [
        ("make the tests pass", True),
        ("make the tests pass", False),
    ]
    assert all(not Path(cwd).is_relative_to(repo) and not Path(cwd).exists() for cwd, _, _ in seen)
    assert (report.requests, report.tokens) == (6, 60)
    assert _status(repo) == ""  # the task's repository is as it was


def test_a_replay_that_weakens_the_tests_proves_nothing(tmp_path: Path) -> None:
    """The referee's tamper watch: a child turn that rewrites a test so the gate passes is no proof."""
    import sys

    from agent_core.control_plane.settings import RefereeSettings
    from agent_core.refinement.replay_run import referee_watch

    repo = failing_calc_project(tmp_path)

    async def cheat(cwd: str, task: str, edits: Proposal | None) -> ChildCost:
        if edits is not None:
            Path(cwd, "test_calc.py").write_text("def test_add():\n    pass\n")
        return ChildCost(1, 1)

    gate = Gate(f'{sys.executable} -c "import test_calc; test_calc.test_add()"', 30)
    items = [
        TrajectoryItem("m-1", "user", "make the tests pass"),
        TrajectoryItem("cell-1", "tool_result", "AssertionError", status="failed"),
    ]
    replayer = Replayer(
        str(repo), gates=lambda: (gate,), child_turn=lambda: cheat, watch=referee_watch(RefereeSettings())
    )
    report = anyio.run(lambda: replayer.replay(_memory("m"), fixes="cell-1", items=items))
    assert report is not None and report.verdict == "not_run", report
    assert report.with_edit is not None and report.with_edit.passed  # the gate itself was fooled
    assert "changed what the gates judge by (test_calc.py)" in report.reason


def test_a_claim_that_names_no_failed_cell_is_not_replayed(tmp_path: Path) -> None:
    async def never(cwd: str, task: str, edits: Proposal | None) -> ChildCost:
        raise AssertionError("no replay for a claim that points at nothing")

    items = [TrajectoryItem("cell-1", "tool_result", "ok", status="completed")]
    replayer = Replayer(str(tmp_path), gates=lambda: (Gate("true"),), child_turn=lambda: never)
    assert anyio.run(lambda: replayer.replay(Proposal(), fixes="cell-1", items=items)) is None


def test_replay_harness_holds_the_created_and_updated_entries_only() -> None:
    proposal = Proposal.model_validate(
        {
            "edits": [
                {"action": "create", "kind": "memory", "title": "A", "content": "use +"},
                {"action": "update", "kind": "prompt", "id": "p1", "title": "B", "content": "check"},
                {"action": "delete", "kind": "memory", "id": "gone"},
            ]
        }
    )
    entries = as_local_entries(proposal)
    assert [(e.action, e.kind, e.content) for e in entries.edits] == [
        ("create", "memory", "use +"),
        ("create", "prompt", "check"),
    ]


def _memory(entry_id: str) -> Proposal:
    return Proposal.model_validate(
        {
            "summary": f"remember {entry_id}",
            "edits": [
                {"action": "create", "kind": "memory", "id": entry_id, "title": "t", "content": entry_id}
            ],
        }
    )


@pytest.mark.parametrize(
    ("helps", "refine_review", "status"),
    [
        (True, "global_only", "applied"),
        (False, "global_only", "rejected"),
        (False, "always", "pending_review"),
    ],
)
def test_an_unproven_fix_never_applies_unseen(
    tmp_path: Path, helps: bool, refine_review: str, status: str
) -> None:
    """Helps: applies as the policy says. Does not: refused where the policy would apply it at once,
    held (with its replays, also on disk) where a person reviews it anyway."""
    from agent_core.events import RefinementReported
    from agent_core.refinement import HarnessService, Policy
    from agent_core.refinement.outbox import CoordinatorEvent
    from agent_core.refinement.pending_reviews import PendingReviews
    from harness_store import HarnessStore, Scopes

    scopes = Scopes(
        HarnessStore(tmp_path / "sessions" / "s1" / "harness"), HarnessStore(tmp_path / "harness")
    )
    service = HarnessService(
        scopes, session_id="s1", policy=lambda: Policy(mode="auto", refine_review=refine_review)
    )
    replay = decide("cell-1", _run(True, True), _run(False, not helps))
    events: list[CoordinatorEvent] = []

    async def listen(event: CoordinatorEvent) -> None:
        events.append(event)

    async def main() -> str:
        service.outbox.add_listener(listen)
        async with anyio.create_task_group() as tg:
            tg.start_soon(service.outbox.deliver)
            outcome = await service.submit(
                _memory("one"), scope="local", trigger="user", baseline=None, items=[], replay=replay
            )
            assert await service.outbox.flushed(10)
            tg.cancel_scope.cancel()
        assert outcome.replay is replay
        return outcome.status

    assert anyio.run(main) == status
    assert (scopes.local.load().get("memory", "one") is not None) is (status == "applied")
    cards = [e for e in events if isinstance(e, RefinementReported)]
    if status == "pending_review":
        [waiting] = PendingReviews(scopes, "s1").refresh().values()  # read back from its file
        assert waiting.replay == replay
    else:
        [card] = cards
        assert card.replay == replay.to_json()


def test_review_card_shows_both_replays_their_gate_tails_and_the_cost() -> None:
    from acp_server.harness.cards import replay_blocks

    report = decide(
        "cell-1",
        ReplayRun(True, True, "1 passed", requests=2, tokens=100, seconds=1.5),
        ReplayRun(False, False, "1 failed", requests=3, tokens=120, seconds=2.0),
    )
    lines = [block["content"]["text"] for block in replay_blocks(report.to_json())]  # type: ignore[index]
    assert lines[0] == "**Replay verdict:** helps — the gates pass with the edit and fail without it"
    assert (
        lines[1]
        == "**Replay with the edit:** gates passed (2 model requests, 100 tokens, 1.5 s)\n```\n1 passed\n```"
    )
    assert lines[2].startswith(
        "**Replay without the edit:** gates failed (3 model requests, 120 tokens, 2.0 s)"
    )
    assert lines[3] == "**Replay cost:** 5 model requests, 220 tokens, 3.5 s"
    assert replay_blocks(None) == []

    from acp_server.harness.cards import review_card
    from agent_core.refinement.records import PendingReview
    from harness_store import HarnessState

    pending = PendingReview("p-1", _memory("one"), "local", "user", HarnessState(), replay=report)
    card = review_card(pending, [])
    shown = [c["content"]["text"] for c in card["content"]]  # type: ignore[attr-defined]
    assert shown == lines
    assert card["rawInput"]["replay"]["verdict"] == "helps"  # type: ignore[index]


def test_a_failed_autonomous_gate_is_a_step_a_proposal_may_claim_to_fix() -> None:
    from agent_core.events import GateFinished, GateStarted, TextPart, UserMessage
    from agent_core.refinement.replay import failed_step, task_of
    from agent_core.refinement.trajectory import render_trajectory, trajectory_from_events

    items = trajectory_from_events(
        [
            UserMessage((TextPart("fix add"),), "u-1"),
            GateStarted("gate-1", "pytest -q"),
            GateFinished("gate-1", "pytest -q", "failed", "failed (exit code 1)", 1, "1 failed"),
            GateFinished("gate-2", "ruff check", "completed", "passed", 0),
        ]
    )
    step = failed_step(items, "gate-1")
    assert step is not None and task_of(items, step) == "fix add"
    assert failed_step(items, "gate-2") is None  # it passed: nothing to fix
    assert "[gate-1] gate `pytest -q` (failed):\nfailed (exit code 1)\n1 failed" in render_trajectory(
        items, max_chars=10_000
    )
