"""Stores filled by real refinements (HarnessStore.apply / rollback / record_review) and real
transcripts (agent_core's SessionStore), for the panel tests, its screenshot and its benchmark."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_core.events import CellFinished, CellStarted, MessageChunk, TextPart, UserMessage
from agent_core.history.transcript import SessionStore
from harness_store import HarnessStore

SKILL_REF = {"type": "python", "import": "project_tools.checks", "callable": "run_checks"}


def create(kind: str, title: str, content: str, **extra: Any) -> dict[str, Any]:
    edit: dict[str, Any] = {"action": "create", "kind": kind, "title": title, "content": content}
    if kind == "skill":
        edit.setdefault("reference", SKILL_REF)
        edit.setdefault("arguments", {"target": {"type": "string"}})
    edit.update(extra)
    return edit


def update(kind: str, entry_id: str, title: str, content: str, **extra: Any) -> dict[str, Any]:
    edit = create(kind, title, content, **extra)
    edit.update(action="update", id=entry_id)
    return edit


def proposal(*edits: dict[str, Any], summary: str, rationale: str = "") -> dict[str, Any]:
    return {
        "summary": summary,
        "rationale": rationale or summary,
        "expected_outcome": "",
        "edits": list(edits),
    }


def write_transcript(
    home: Path, session_id: str, cwd: str, title: str, turns: list[tuple[str, str, str]]
) -> None:
    """A real transcript: each turn is (message id, role, text); `cell` turns are a call + result."""
    store = SessionStore(home)
    writer = store.create(session_id, cwd)
    for message_id, role, text in turns:
        if role == "user":
            writer.event(UserMessage((TextPart(text),), message_id))
        elif role == "assistant":
            writer.event(MessageChunk(text, message_id))
        else:
            writer.event(CellStarted(message_id, text, "Run the checks"))
            writer.event(CellFinished(message_id, "completed", output="all 12 checks passed"))
    writer.close()
    store.write_meta(
        session_id, cwd=cwd, title=title, created_at="2026-12-01T08:00:00Z", updated_at="2026-12-01T08:00:00Z"
    )


@dataclass
class Populated:
    home: Path
    ids: dict[str, str] = field(default_factory=dict)  # name -> refinement id
    sessions: list[str] = field(default_factory=list)

    def store(self, key: str) -> HarnessStore:
        return HarnessStore(
            self.home / "harness" if key == "global" else self.home / "sessions" / key / "harness"
        )


def populate(home: Path) -> Populated:
    """Two sessions and the global store, with creates, updates, a refused edit, a review, a
    rollback, a tombstone and a pending review — all through the store's own write paths."""
    out = Populated(home)
    s1, s2 = "sess-web-checkout", "sess-data-pipeline"
    out.sessions = [s1, s2]
    write_transcript(
        home,
        s1,
        "/work/shop",
        "Fix the checkout rounding bug",
        [
            ("u-1", "user", "Please run the tests; we always use `make check` here, never bare pytest."),
            ("a-1", "assistant", "Understood — I'll run `make check`."),
            ("cell-1", "cell", "!make check"),
            ("u-2", "user", "Prices are in cents everywhere. Never use floats for money."),
            ("a-2", "assistant", "Noted: integer cents only; I'll fix `total()` to sum cents."),
        ],
    )
    write_transcript(
        home,
        s2,
        "/work/pipeline",
        "Nightly ETL keeps timing out",
        [
            ("u-1", "user", "The warehouse is Postgres 15; keep queries under 30 s or the job is killed."),
            ("a-1", "assistant", "I'll batch the inserts in 5,000-row chunks."),
        ],
    )
    glob, local1, local2 = out.store("global"), out.store(s1), out.store(s2)
    r = glob.apply(
        proposal(
            create("memory", "Test command", "Run `make check`, not bare pytest.", evidence=["u-1"]),
            create("skill", "Run checks", "Runs `make check` and returns its exit code.", id="run_checks"),
            summary="Remember how this project runs its tests",
            rationale="The user stated the project's test command explicitly and it worked.",
        ),
        scope="global",
        trigger="auto",
        session_id=s1,
        evidence_checker={"u-1", "a-1", "cell-1", "u-2", "a-2"},
    )
    out.ids["tests"] = r.id
    r = local1.apply(
        proposal(
            create(
                "memory",
                "Money is integer cents",
                "Prices are integer cents; never floats for money.",
                evidence=["u-2", "a-2"],
            ),
            create("prompt", "Answer style", "Keep answers short; show the diff before explaining it."),
            summary="Money conventions for the checkout code",
            rationale="A convention the user stated while fixing the rounding bug.",
        ),
        scope="local",
        trigger="model",
        session_id=s1,
        evidence_checker={"u-1", "a-1", "cell-1", "u-2", "a-2"},
    )
    out.ids["money"] = r.id
    r = glob.record_review(out.ids["tests"], "apply")
    out.ids["review"] = r.id
    r = glob.apply(
        proposal(
            update(
                "memory",
                "test_command",
                "Test command",
                "Run `make check` (it runs ruff, mypy and pytest); never bare pytest.",
                evidence=["u-1"],
            ),
            {
                "action": "update",
                "kind": "prompt",
                "id": "base_system_prompt",
                "title": "Base prompt",
                "content": "Always run make check before answering.",
            },
            summary="Say what make check runs",
            rationale="make check turned out to run ruff and mypy too; also tried to edit the base prompt.",
        ),
        scope="global",
        trigger="user",
        session_id=s1,
    )
    out.ids["refused"] = r.id
    r = local2.apply(
        proposal(
            create(
                "memory",
                "Warehouse limits",
                "Postgres 15; every query must finish within 30 s.",
                evidence=["u-1"],
            ),
            create(
                "subagent",
                "Query reviewer",
                "Reviews SQL for full scans before it runs against the warehouse.",
            ),
            summary="Warehouse constraints",
            rationale="Hard limits of the warehouse that broke the nightly job.",
        ),
        scope="local",
        trigger="auto",
        session_id=s2,
        evidence_checker={"u-1", "a-1"},
    )
    out.ids["warehouse"] = r.id
    r = local2.apply(
        proposal(
            create("memory", "Batch size", "Insert in 50,000-row chunks."), summary="Guess a batch size"
        ),
        scope="local",
        trigger="auto",
        session_id=s2,
    )
    out.ids["batch"] = r.id
    r = local2.rollback(out.ids["batch"])
    out.ids["batch_rollback"] = r.id
    local2.reject_proposal(
        proposal(create("memory", "Skip tests", "Skip the tests when in a hurry."), summary="x")
    )
    out.ids["rejected"] = local2.history()[-1].id  # a rejection before apply is a record of its own
    write_pending(
        home,
        s1,
        "local",
        "p-20261201-093000-0badf00d",
        proposal(
            update(
                "prompt",
                "answer_style",
                "Answer style",
                "Keep answers short; lead with the fix, then the diff.",
            ),
            summary="Tighten the answer style",
        ),
    )
    return out


def write_pending(home: Path, session_id: str, scope: str, proposal_id: str, body: dict[str, Any]) -> Path:
    """A pending review on disk in the layout agent_core/refinement/pending_files.py writes."""
    root = home / "harness" if scope == "global" else home / "sessions" / session_id / "harness"
    store = HarnessStore(root)
    directory = root / "pending"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / f"{proposal_id}.json"
    record = {
        "format": 1,
        "proposal_id": proposal_id,
        "scope": scope,
        "trigger": "auto",
        "source": "refine",
        "created_at": time.time(),
        "session_id": session_id,
        "proposal": body,
        "baseline": store.load().model_dump(mode="json"),
    }
    path.write_text(json.dumps(record), encoding="utf-8")
    os.chmod(path, 0o600)
    return path
