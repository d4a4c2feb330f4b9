"""`/why`: the refinements that wrote an entry and the transcript messages they cite, across sessions."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core import events as ev
from agent_core.history.transcript import SessionStore
from agent_core.trust.why import render_why, why
from harness_store import HarnessStore


def _session(sessions: SessionStore, sid: str, cwd: Path, said: str, message_id: str) -> None:
    writer = sessions.create(sid, str(cwd))
    writer.event(ev.UserMessage(parts=(ev.TextPart(said),), message_id=message_id))
    writer.event(ev.MessageChunk(text="Understood.", message_id=f"{message_id}-reply"))
    writer.close()


@pytest.fixture
def two_sessions(tmp_path: Path) -> tuple[SessionStore, HarnessStore, str, str]:
    """Session A creates a global memory citing its message; session B updates it via review."""
    sessions = SessionStore(tmp_path / "home")
    _session(sessions, "sa", tmp_path, "We always run make check.", "m-a1")
    _session(sessions, "sb", tmp_path, "Actually it is make test now.", "m-b1")
    glob = HarnessStore(tmp_path / "home" / "harness")
    created = {
        "action": "create",
        "kind": "memory",
        "id": "checks",
        "title": "Checks",
        "content": "make check",
    }
    first = glob.apply(
        {"summary": "Remember checks", "edits": [{**created, "evidence": ["m-a1"]}]},
        scope="global",
        trigger="user",
        session_id="sa",
    )
    second = glob.apply(
        {
            "summary": "Checks changed",
            "edits": [{**created, "action": "update", "content": "make test", "evidence": ["m-b1"]}],
        },
        scope="global",
        trigger="auto",
        session_id="sb",
    )
    glob.record_review(second.id, "apply")
    return sessions, glob, first.id, second.id


def test_why_lists_each_writer_with_scope_trust_and_approval(
    two_sessions: tuple[SessionStore, HarnessStore, str, str],
) -> None:
    sessions, glob, first, second = two_sessions
    answer = why("checks", stores=[("global", glob)], sessions=sessions)
    assert [(w.refinement_id, w.scope, w.action, w.trust) for w in answer.writers] == [
        (first, "global", "create", "verified"),
        (second, "global", "update", "candidate"),
    ]
    assert answer.writers[0].approved_by == "a user (written or approved directly)"
    assert answer.writers[1].approved_by.startswith("a user, approved in review ")


def test_why_quotes_the_cited_messages_of_both_sessions(
    two_sessions: tuple[SessionStore, HarnessStore, str, str],
) -> None:
    sessions, glob, _, _ = two_sessions
    answer = why("checks", stores=[("global", glob)], sessions=sessions)
    quotes = [q for w in answer.writers for q in w.quotes]
    assert [(q.session_id, q.role, q.text) for q in quotes] == [
        ("sa", "user", "We always run make check."),
        ("sb", "user", "Actually it is make test now."),
    ]
    assert all(q.session_started for q in quotes)
    text = render_why(answer)
    assert "> We always run make check." in text and "session sb" in text


def test_why_says_when_a_cited_transcript_was_deleted(
    two_sessions: tuple[SessionStore, HarnessStore, str, str],
) -> None:
    sessions, glob, _, _ = two_sessions
    sessions.delete("sa")
    answer = why("checks", stores=[("global", glob)], sessions=sessions)
    assert answer.writers[0].quotes[0].missing == "the transcript of session sa was deleted"
    assert answer.writers[1].quotes[0].text == "Actually it is make test now."
    assert "Evidence `m-a1`: the transcript of session sa was deleted." in render_why(answer)


def test_why_says_when_a_message_is_not_in_the_transcript(tmp_path: Path) -> None:
    sessions = SessionStore(tmp_path / "home")
    _session(sessions, "sa", tmp_path, "hello", "m-1")
    store = HarnessStore(tmp_path / "home" / "harness")
    store.apply(
        {
            "edits": [
                {"action": "create", "kind": "memory", "title": "X", "content": "y", "evidence": ["m-404"]}
            ]
        },
        scope="global",
        trigger="user",
        session_id="sa",
    )
    [writer] = why("x", stores=[("global", store)], sessions=sessions).writers
    assert writer.quotes[0].missing == "message m-404 is not in the transcript of session sa"


def test_why_of_an_unknown_entry_says_so(tmp_path: Path) -> None:
    answer = why("ghost", stores=[("global", HarnessStore(tmp_path / "h"))], sessions=None)
    assert render_why(answer) == "No harness entry or refinement mentions `ghost`."


def test_why_payload_for_panels_is_json(two_sessions: tuple[SessionStore, HarnessStore, str, str]) -> None:
    import json

    sessions, glob, first, _ = two_sessions
    payload = why("checks", stores=[("global", glob)], sessions=sessions).to_json()
    decoded = json.loads(json.dumps(payload))
    assert decoded["writers"][0]["refinement_id"] == first
    assert decoded["current"][0]["scope"] == "global"
