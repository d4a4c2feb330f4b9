"""What the page shows for an action's answer (acp_server/panel/results.py)."""

from __future__ import annotations

from acp_server.panel.results import promoted
from agent_core.trust.promotion import Promotion
from harness_store.models import HarnessEntry


def _entry() -> HarnessEntry:
    return HarnessEntry(
        id="build",
        kind="memory",
        title="Build",
        content="make all",
        created_at="2026-01-01T00:00:00Z",
        updated_at="2026-01-01T00:00:00Z",
    )


def test_a_project_promotion_held_for_review_is_answered_with_its_proposal() -> None:
    held = Promotion(_entry(), "project", None, None, proposal_id="p-1")
    result = promoted("memory", "build", "project", held, via="s1")
    assert result.ok and result.refinement_id is None and result.refinement_ids == []
    assert "waits for review: proposal p-1" in result.message and result.via_session == "s1"
