"""review_form: a pending proposal as an elicitation form, and the form's answer read back."""

from __future__ import annotations

from acp_server.harness.review_form import FormDecision, read_review_form, review_form
from agent_core.control_plane.held import HeldChange, HeldFile
from agent_core.refinement.records import PendingReview
from harness_store.models import HarnessState, Proposal

PREVIEW = [
    {"action": "create", "kind": "memory", "id": "release", "after": "x"},
    {"action": "delete", "kind": "memory", "id": "old"},
]


def pending() -> PendingReview:
    proposal = Proposal.model_validate(
        {
            "summary": "release notes",
            "edits": [
                {"action": "create", "kind": "memory", "id": "release", "content": "Ship with --sign."},
                {"action": "delete", "kind": "memory", "id": "old"},
            ],
        }
    )
    return PendingReview("p-1", proposal, "local", "auto", HarnessState())


def test_the_form_has_a_choice_per_edit_a_text_for_edits_with_content_a_reason_and_remember() -> None:
    message, schema = review_form(pending(), PREVIEW)
    assert message == "Review the harness edits: release notes"
    properties = schema["properties"]
    assert isinstance(properties, dict)
    assert list(properties) == ["edit_0", "edit_0_text", "edit_1", "reason", "remember"]
    assert properties["edit_0_text"]["default"] == "Ship with --sign."
    assert schema["required"] == ["edit_0", "edit_1"]


def test_accepting_one_edit_rewritten_applies_only_it_with_the_new_text() -> None:
    answer = {"edit_0": "accept", "edit_0_text": "Ship with --sign, never by hand.", "edit_1": "reject"}
    assert read_review_form(answer, pending(), PREVIEW) == FormDecision(
        "apply", ("release",), {"release": "Ship with --sign, never by hand."}, None
    )


def test_accepting_every_edit_unchanged_applies_the_whole_proposal() -> None:
    answer = {"edit_0": "accept", "edit_0_text": "Ship with --sign.", "edit_1": "accept", "remember": True}
    assert read_review_form(answer, pending(), PREVIEW) == FormDecision("apply_always", None, {}, None)


def test_rejecting_every_edit_rejects_with_the_reason() -> None:
    answer = {"edit_0": "reject", "edit_1": "reject", "reason": "  not ours  ", "remember": True}
    assert read_review_form(answer, pending(), PREVIEW) == FormDecision("reject_forever", reason="not ours")


def test_an_answer_without_every_choice_decides_nothing() -> None:
    assert read_review_form({"edit_0": "accept"}, pending(), PREVIEW) is None
    assert read_review_form({"edit_0": "accept", "edit_1": "maybe"}, pending(), PREVIEW) is None


def test_a_held_change_is_one_choice() -> None:
    held = HeldChange(
        (HeldFile("/w/.continual-acp/gates.toml", b"a", b"b"),), "call_1", "code", "while the cell ran"
    )
    waiting = PendingReview("p-2", Proposal(summary="gates"), "local", "model", HarnessState(), held=held)
    _message, schema = review_form(waiting, [])
    assert schema["required"] == ["decision"]
    assert read_review_form({"decision": "accept"}, waiting, []) == FormDecision("apply")
    assert read_review_form({}, waiting, []) is None
