"""Every validation rule of harness_store.validation, its verbatim message, and untrusted-proposal normalization."""

from __future__ import annotations

from typing import Any

import pytest
from harness_edits import create, proposal

from harness_store import HarnessStore, Proposal

SKILL_REF = {"type": "python", "import": "skills.demo", "callable": "run"}

RULES: list[tuple[str, dict[str, Any], str]] = [
    ("unknown action", {"action": "rename", "kind": "memory", "id": "x"}, "unsupported action rename"),
    (
        "unknown kind",
        {"action": "create", "kind": "tool", "title": "t", "content": "c"},
        "unsupported kind tool",
    ),
    (
        "base prompt by id",
        {"action": "update", "kind": "prompt", "id": "base_system_prompt", "title": "t", "content": "c"},
        "base system prompt is not editable",
    ),
    (
        "base prompt by derived id",
        {"action": "create", "kind": "prompt", "title": "Base System Prompt", "content": "c"},
        "base system prompt is not editable",
    ),
    (
        "base prompt by id spelled differently",
        {"action": "create", "kind": "prompt", "id": "Base-System-Prompt", "title": "t", "content": "c"},
        "base system prompt is not editable",
    ),
    (
        "update without id",
        {"action": "update", "kind": "memory", "title": "t", "content": "c"},
        "update requires id",
    ),
    ("delete without id", {"action": "delete", "kind": "memory"}, "delete requires id"),
    (
        "create without content",
        {"action": "create", "kind": "memory", "title": "t", "content": "  "},
        "create requires title and content",
    ),
    (
        "update without title",
        {"action": "update", "kind": "memory", "id": "x", "content": "c"},
        "update requires title and content",
    ),
    (
        "skill without arguments",
        {"action": "create", "kind": "skill", "title": "t", "content": "c", "reference": SKILL_REF},
        "create skill requires arguments",
    ),
    (
        "skill without reference",
        {"action": "create", "kind": "skill", "title": "t", "content": "c", "arguments": {}},
        "create skill requires python reference",
    ),
    (
        "skill reference of another type",
        {
            "action": "update",
            "kind": "skill",
            "id": "s",
            "title": "t",
            "content": "c",
            "arguments": {},
            "reference": {"type": "shell", "import": "m", "callable": "f"},
        },
        "update skill reference.type must be python",
    ),
    (
        "skill reference without import",
        {
            "action": "create",
            "kind": "skill",
            "title": "t",
            "content": "c",
            "arguments": {},
            "reference": {"type": "python", "import": " ", "callable": "f"},
        },
        "create skill requires python import",
    ),
    (
        "skill reference without callable",
        {
            "action": "create",
            "kind": "skill",
            "title": "t",
            "content": "c",
            "arguments": {},
            "reference": {"type": "python", "import": "m"},
        },
        "create skill requires callable",
    ),
]


@pytest.mark.parametrize(("case", "edit", "message"), RULES, ids=[r[0] for r in RULES])
def test_each_rule_refuses_with_its_verbatim_message(
    store: HarnessStore, case: str, edit: dict[str, Any], message: str
) -> None:
    result = store.apply(proposal(edit), scope="global", trigger="model")
    [applied] = result.applied_edits
    assert applied.applied is False
    assert applied.error == message
    assert store.state.count() == 0


def test_first_failing_rule_wins(store: HarnessStore) -> None:
    # Both the kind and the missing id are wrong: the kind rule comes first.
    result = store.apply(proposal({"action": "update", "kind": "nope"}), scope="global", trigger="model")
    assert result.applied_edits[0].error == "unsupported kind nope"


def test_skill_with_empty_arguments_object_is_valid(store: HarnessStore) -> None:
    result = store.apply(
        proposal(create("skill", "Plot", "plots a csv", arguments={})), scope="local", trigger="model"
    )
    assert result.applied_edits[0].applied, result.errors
    assert store.state.get("skill", "plot") is not None


def test_create_without_id_derives_a_slug_from_the_title(store: HarnessStore) -> None:
    result = store.apply(
        proposal(create("memory", "  Prefer UV -- for installs!! ", "x")), scope="local", trigger="model"
    )
    assert result.applied_edits[0].id == "prefer_uv_for_installs"


def test_slug_is_capped_at_80_chars_and_falls_back_to_the_kind(store: HarnessStore) -> None:
    long_title = "word " * 40
    result = store.apply(
        proposal(create("memory", long_title, "a"), create("subagent", "!!!", "b")),
        scope="local",
        trigger="model",
    )
    first, second = result.applied_edits
    assert first.id is not None and len(first.id) <= 80 and not first.id.endswith("_")
    assert second.id == "subagent"


def test_untrusted_proposal_is_normalized_not_rejected() -> None:
    raw = {
        "summary": 42,
        "rationale": "ok",
        "edits": [
            "not an object",
            7,
            {
                "action": "create",
                "kind": "memory",
                "title": "T",
                "content": "C",
                "metadata": "wrong type",
                "path": 3,
            },
            {"action": "explode", "kind": "memory"},
            {"kind": 5},
        ],
    }
    parsed = Proposal.model_validate(raw)
    assert parsed.summary == "" and parsed.rationale == "ok"
    assert [e.action for e in parsed.edits] == ["create", "explode", "(missing)"]
    assert parsed.edits[0].metadata is None and parsed.edits[0].path is None
    assert parsed.edits[2].kind == "5"


def test_invalid_actions_from_untrusted_input_are_refused_with_a_reason(store: HarnessStore) -> None:
    result = store.apply(
        {"edits": [{"action": "explode", "kind": "memory"}, {"kind": "memory"}]},
        scope="local",
        trigger="model",
    )
    assert [e.error for e in result.applied_edits] == [
        "unsupported action explode",
        "unsupported action (missing)",
    ]


def test_a_non_object_proposal_becomes_an_empty_one() -> None:
    assert Proposal.model_validate(["edits"]).edits == []


EMPTY_LESSONS = [
    ("dots", "Remember", "...", "punctuation"),
    ("more dots", "Remember", "....", "punctuation"),
    ("dots and comma", "Remember", "..., ", "punctuation"),
    ("title again", "Run make check", "run make-check!", "repeats the title"),
]


@pytest.mark.parametrize(
    ("case", "title", "content", "why"), EMPTY_LESSONS, ids=[e[0] for e in EMPTY_LESSONS]
)
@pytest.mark.parametrize("trigger", ["user", "model", "auto"])
def test_an_empty_lesson_is_refused_at_write_time_for_every_writer(
    store: HarnessStore, case: str, title: str, content: str, why: str, trigger: str
) -> None:
    result = store.apply(proposal(create("memory", title, content)), scope="local", trigger=trigger)
    assert not result.applied
    assert result.applied_edits[0].error is not None and why in result.applied_edits[0].error
    assert store.state.count() == 0


def test_an_update_to_an_empty_lesson_is_refused_and_the_entry_kept(store: HarnessStore) -> None:
    store.apply(proposal(create("memory", "Tests", "Run make check.")), scope="local", trigger="user")
    result = store.apply(
        proposal({"action": "update", "kind": "memory", "id": "tests", "title": "Tests", "content": " .,; "}),
        scope="local",
        trigger="model",
    )
    assert (
        result.applied_edits[0].error
        == "empty lesson: the content has nothing but punctuation and whitespace"
    )
    assert store.state.get("memory", "tests").content == "Run make check."  # type: ignore[union-attr]


def test_a_short_lesson_that_says_something_is_kept(store: HarnessStore) -> None:
    result = store.apply(proposal(create("memory", "Linter", "Use ruff.")), scope="local", trigger="model")
    assert result.applied, result.errors


def test_a_prediction_is_normalized_and_lands_on_the_entries_the_proposal_creates(
    store: HarnessStore,
) -> None:
    assert Proposal.model_validate({"prediction": {"command": "  "}}).prediction is None
    assert Proposal.model_validate({"prediction": "make check"}).prediction is None
    assert Proposal.model_validate({"prediction": {"command": "a\nb"}}).prediction is None
    store.apply(proposal(create("memory", "Old", "Keep this.")), scope="local", trigger="user")
    raw = {
        "prediction": {"command": "make check", "expect": "passes", "extra": 1},
        "edits": [
            create("memory", "Tests", "Run `make check`."),
            {"action": "update", "kind": "memory", "id": "old", "title": "Old", "content": "Keep this too."},
        ],
    }
    result = store.apply(raw, scope="local", trigger="model")
    assert result.applied, result.errors
    state = store.state
    assert state.get("memory", "tests").metadata["prediction"] == {
        "command": "make check",
        "expect": "passes",
    }  # type: ignore[union-attr]
    assert "prediction" not in state.get("memory", "old").metadata  # type: ignore[union-attr]
