"""Shared fixtures for the harness_store tests: a fresh store in a temp dir and proposal builders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness_store import HarnessStore


@pytest.fixture
def store(tmp_path: Path) -> HarnessStore:
    return HarnessStore(tmp_path / "harness")


def create(kind: str, title: str, content: str, **extra: Any) -> dict[str, Any]:
    """A valid create edit of any kind (skills get a python reference and arguments)."""
    edit: dict[str, Any] = {"action": "create", "kind": kind, "title": title, "content": content}
    if kind == "skill":
        edit.setdefault("reference", {"type": "python", "import": "skills.demo", "callable": "run"})
        edit.setdefault("arguments", {"path": {"type": "string"}})
    edit.update(extra)
    return edit


def update(kind: str, entry_id: str, title: str, content: str, **extra: Any) -> dict[str, Any]:
    edit: dict[str, Any] = {
        "action": "update",
        "kind": kind,
        "id": entry_id,
        "title": title,
        "content": content,
    }
    if kind == "skill":
        edit.setdefault("reference", {"type": "python", "import": "skills.demo", "callable": "run"})
        edit.setdefault("arguments", {})
    edit.update(extra)
    return edit


def delete(kind: str, entry_id: str) -> dict[str, Any]:
    return {"action": "delete", "kind": kind, "id": entry_id}


def proposal(*edits: dict[str, Any], summary: str = "test") -> dict[str, Any]:
    return {"summary": summary, "rationale": "because", "expected_outcome": "better", "edits": list(edits)}
