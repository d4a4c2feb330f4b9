"""The review card of a pending proposal, as each kind of client is shown it (harness/cards.py)."""

from __future__ import annotations

from typing import Any

from acp_server.harness.cards import review_card
from agent_core.refinement.records import PendingReview
from harness_store.models import HarnessState, Proposal

PREVIEW = [
    {"path": "/data/harness/view/memory/test_command.md", "before": None, "after": "Run `make check`.\n"}
]


def pending() -> PendingReview:
    proposal = Proposal.model_validate(
        {
            "summary": "Remember the test command",
            "edits": [
                {"action": "create", "kind": "memory", "id": "test_command", "content": "Run `make check`."}
            ],
        }
    )
    return PendingReview("p-1", proposal, "local", "auto", HarnessState())


def test_a_pending_review_card_for_a_client_that_titles_edit_cards_by_path_has_no_colon_or_diff_path() -> (
    None
):
    card: dict[str, Any] = review_card(pending(), PREVIEW, path_titles=True)
    assert card["title"] == "Refine harness - Remember the test command"
    assert [c["type"] for c in card["content"]] == ["content", "content"]
    assert card["content"][0]["content"]["text"] == card["title"]
    shown = card["content"][1]["content"]["text"]
    assert shown.startswith("```diff\n") and "+Run `make check`." in shown


def test_a_pending_review_card_for_other_clients_keeps_the_colon_title_and_the_diff() -> None:
    card: dict[str, Any] = review_card(pending(), PREVIEW)
    assert card["title"] == "Refine harness: Remember the test command"
    assert [c["type"] for c in card["content"]] == ["diff"]
