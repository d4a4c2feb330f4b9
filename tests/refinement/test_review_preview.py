"""A pending review's diff shows each entry as it will be stored."""

from __future__ import annotations

from agent_core.refinement.records import PendingReview
from agent_core.refinement.reporting import preview_edits
from harness_store.models import HarnessState, Proposal


def test_a_pending_create_without_an_id_shows_the_id_its_title_gives_it() -> None:
    edit = {"action": "create", "kind": "memory", "title": "Test command", "content": "Run `make check`."}
    proposal = Proposal.model_validate({"summary": "remember the test command", "edits": [edit]})
    pending = PendingReview(
        proposal_id="p1", proposal=proposal, scope="local", trigger="user", baseline=HarnessState()
    )
    [preview] = preview_edits(pending, HarnessState())
    assert preview["id"] == "test_command"
    lines = preview["after"].splitlines()
    assert "- id: test_command" in lines
    assert [line for line in lines if line.rstrip() == "- id:"] == []
