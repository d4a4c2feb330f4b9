"""`HarnessService` on its own: built from three stores, no `Session`, no model."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agent_core.refinement import HarnessService, Policy, ReviewDecided, ReviewRequested
from agent_core.refinement.outbox import CoordinatorEvent
from harness_store import HarnessStore, Proposal, Scopes

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _memory(entry_id: str) -> Proposal:
    return Proposal.model_validate(
        {
            "summary": f"remember {entry_id}",
            "edits": [
                {"action": "create", "kind": "memory", "id": entry_id, "title": "t", "content": entry_id}
            ],
        }
    )


async def test_a_service_without_a_session_holds_decides_and_rolls_back_with_its_cards(
    tmp_path: Path,
) -> None:
    scopes = Scopes(
        HarnessStore(tmp_path / "sessions" / "s1" / "harness"), HarnessStore(tmp_path / "harness")
    )
    service = HarnessService(
        scopes, session_id="s1", policy=lambda: Policy(mode="ask", refine_review="always")
    )
    events: list[CoordinatorEvent] = []

    async def listen(event: CoordinatorEvent) -> None:
        events.append(event)

    service.outbox.add_listener(listen)
    async with anyio.create_task_group() as tg:
        tg.start_soon(service.outbox.deliver)
        held = await service.submit(
            _memory("one"), scope="local", trigger="model", baseline=None, source="agent"
        )
        assert held.status == "pending_review"
        assert list(service.pending.refresh()) == [held.proposal_id]
        decided = await service.decide(held.proposal_id, "apply")
        assert decided.status == "applied" and decided.refinement_id is not None
        assert scopes.local.load().get("memory", "one") is not None
        undone = await service.rollback(decided.refinement_id)
        assert undone.result is not None and undone.result.applied
        again = await service.rollback(decided.refinement_id)
        assert again.result is None and again.rolled_back_by == undone.result.id
        assert await service.outbox.flushed(10)
        tg.cancel_scope.cancel()
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ReviewRequested") < kinds.index("ReviewDecided")
    assert any(isinstance(e, ReviewRequested) for e in events)
    assert [e.proposal_id for e in events if isinstance(e, ReviewDecided)] == [held.proposal_id]
    assert scopes.local.load().get("memory", "one") is None


async def test_quiescence_is_refinement_idle_and_no_child_running(tmp_path: Path) -> None:
    running = [1]
    scopes = Scopes(
        HarnessStore(tmp_path / "sessions" / "s1" / "harness"), HarnessStore(tmp_path / "harness")
    )
    service = HarnessService(scopes, session_id="s1", children=lambda: running[0])
    now = service.quiescence()
    assert now.refinement_idle and now.children == 1 and not now.quiescent
    running[0] = 0
    assert service.quiescence().quiescent
    async with service.jobs.busy():
        assert not service.quiescence().quiescent
        assert service.quiescence().in_flight == 1


async def test_pending_reviews_read_the_disk_only_when_refreshed(tmp_path: Path) -> None:
    from agent_core.refinement.pending_reviews import PendingReviews

    scopes = Scopes(
        HarnessStore(tmp_path / "sessions" / "s1" / "harness"), HarnessStore(tmp_path / "harness")
    )
    mine = PendingReviews(scopes, "s1")
    other = HarnessService(scopes, session_id="s2", policy=lambda: Policy(mode="ask", refine_review="always"))
    held = await other.submit(
        _memory("shared"), scope="global", trigger="model", baseline=None, source="agent"
    )
    assert held.proposal_id not in mine.reviews  # another session's proposal: not read yet
    assert held.proposal_id in mine.refresh()
    assert other.pending.claim(held.proposal_id) is not None  # decided there: its file is gone
    assert held.proposal_id in mine.reviews
    assert held.proposal_id not in mine.refresh()
