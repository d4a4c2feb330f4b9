"""Proposal builders shared by the harness_store tests.

A module of its own, not conftest: `from conftest import ...` resolves to whichever conftest was
imported last, which broke collection when another test directory was given on the same command
line (`pytest tests/harness_store tests/kernel_bridge`).
"""

from __future__ import annotations

from typing import Any


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
