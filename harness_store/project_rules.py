"""The project scope's rule for refinement-written edits: only facts about this repository.

A project entry is committed with the code and read by everyone who works on the repository, so
the planner (an edit whose `source` is `refine`) may write one only when the edit shows what in
the repository it is about. The rule is mechanical, so the store can check it:

1. the edit cites evidence (at least one message id; apply also checks that each id is in the
   transcript when the caller passes an evidence checker), and
2. a `create` or `update` names, in `metadata.about`, at least one path relative to the repository
   root (a file or directory, e.g. `Makefile`, `tests/`) that exists in the working tree. Every
   named path must: be relative, stay inside the repository after resolving `..` and symlinks,
   and not lie under `.git` or `.continual-acp` (the harness is not a fact about the code).

A `delete` needs only the evidence. Edits a person wrote (`source` `user`: `/promote`, the CLI, a
conflict resolution) and cell writes (`agent`, reviewed edit by edit) are not checked here. A
violating edit is refused with `project scope is only for facts about this repository: <why>`,
like every other refusal (the edit stays in the record with its error).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from harness_store.models import Edit

RULE = "project scope is only for facts about this repository"
ABOUT_KEY = "about"
CHECKED_SOURCES = ("refine",)
_EXCLUDED_TOPS = (".git", ".continual-acp")


def about_paths(edit: Edit) -> list[str]:
    """The repository paths an edit says it is about (`metadata.about`: one string or a list)."""
    raw = (edit.metadata or {}).get(ABOUT_KEY)
    items = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    return [item.strip() for item in items if isinstance(item, str) and item.strip()]


def _path_error(repo: Path, name: str) -> str | None:
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute():
        return f"{name!r} is not relative to the repository root"
    if pure.parts and pure.parts[0] in _EXCLUDED_TOPS:
        return f"{name!r} is the repository's metadata, not its code"
    try:
        root = repo.resolve()
        target = (root / pure).resolve()
    except OSError:
        return f"{name!r} is not a path in this repository"
    if target != root and root not in target.parents:
        return f"{name!r} is outside this repository"
    if not target.exists():
        return f"{name!r} is not a path in this repository"
    return None


def edit_error(edit: Edit, repo: Path, source: str | None) -> str | None:
    """Why `edit` breaks the project rule (None when it keeps it or is not checked)."""
    if source not in CHECKED_SOURCES:
        return None
    if not edit.evidence:
        return f"{RULE}: the edit cites no evidence from the conversation"
    if edit.action == "delete":
        return None
    paths = about_paths(edit)
    if not paths:
        return (
            f'{RULE}: the edit names no repository path it is about (metadata.{ABOUT_KEY}: e.g. ["Makefile"])'
        )
    for name in paths:
        problem = _path_error(repo, name)
        if problem is not None:
            return f"{RULE}: {problem}"
    return None


def rule_errors(edits: Sequence[Edit], repo: Path, source: str | None) -> list[str | None]:
    """One entry per edit: its rule violation or None."""
    return [edit_error(edit, repo, source) for edit in edits]
