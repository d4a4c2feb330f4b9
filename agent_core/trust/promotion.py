"""Promotion: moving a local entry up to the project or global scope, as ordinary refinements.

`promote` writes the entry into the target store first (a `create`, trigger `user`: a person asked
for it, so it goes through validation, tombstones and the skill check like any write) and only
when that applied removes the local copy (a `delete` whose reason names the target refinement).
Both are history records, so both show as refinement cards; rolling either back
(`HarnessSurface.rollback`, the one rollback) rolls back the other too (`local_removal_of` and
`promoted_as` pair them).

`promote` works on stores directly, without review: it is a building block. The `/promote` command goes through `HarnessSurface.promote`, which reports both halves and
holds a project promotion for review like every project edit. `deletion_notice` is what
the reply to deleting a session says about the local entries that go with it (and it saves them as
a proposal file that `continual-acp harness import` can bring back into another scope).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_store import KINDS, HarnessEntry, Proposal, RefinementResult, Store
from host_base.private_files import write_atomic

TARGETS = ("project", "global")
REASON_PREFIX = "promoted to"


class PromotionError(ValueError):
    """A promotion that cannot start (unknown entry, ambiguous id, no such target store)."""


@dataclass(frozen=True)
class Promotion:
    """What a promotion did: the entry, the target's create and (if it applied) the local delete
    -- or, for a reviewed target (project), the proposal waiting for review (`proposal_id`)."""

    entry: HarnessEntry
    target: str
    created: RefinementResult | None
    removed: RefinementResult | None
    proposal_id: str | None = None

    @property
    def applied(self) -> bool:
        """True when the entry now lives in the target scope and no longer locally."""
        return (
            self.created is not None
            and self.created.applied
            and self.removed is not None
            and self.removed.applied
        )


def find_local(local_store: Store, entry_id: str, kind: str | None) -> HarnessEntry:
    """The visible local entry `entry_id` (of `kind` if given); `PromotionError` when none or ambiguous."""
    state = local_store.load()
    kinds = [kind] if kind else list(KINDS)
    found = [state.get(k, entry_id) for k in kinds]
    matches: list[HarnessEntry] = [e for e in found if e is not None and e.trust != "rejected"]
    if not matches:
        raise PromotionError(f"no local entry {entry_id!r} in this session; /harness lists them")
    if len(matches) > 1:
        raise PromotionError(
            f"{entry_id!r} names local entries of several kinds ({', '.join(e.kind for e in matches)}); "
            "name the kind: /promote <kind>/<id>"
        )
    return matches[0]


def create_proposal(entry: HarnessEntry, to: str, session_id: str | None) -> Proposal:
    """The target store's half of a promotion: create the entry there (every field kept)."""
    create = {
        "action": "create",
        "kind": entry.kind,
        "id": entry.id,
        "title": entry.title,
        "content": entry.content,
        "path": entry.path,
        "reference": entry.reference,
        "arguments": entry.arguments,
        "metadata": entry.metadata,
        "evidence": entry.evidence,
        "examples": entry.examples,
        "reason": f"promoted from the local harness of session {session_id or '?'}",
    }
    return Proposal.model_validate(
        {
            "summary": f"Promote {entry.kind} {entry.id} to {to}",
            "rationale": f"A user promoted the local entry {entry.id} of session {session_id or '?'}.",
            "expected_outcome": f"The entry is shared in the {to} harness.",
            "edits": [create],
        }
    )


def removal_proposal(entry: HarnessEntry, to: str, created_id: str) -> Proposal:
    """The local half of a promotion: delete the local copy, naming the target refinement."""
    return removal_proposal_for(entry.kind, entry.id, to, created_id)


def removal_proposal_for(kind: str, entry_id: str, to: str, created_id: str) -> Proposal:
    """`removal_proposal` by kind and id (a reviewed promotion keeps only these until approved)."""
    return Proposal.model_validate(
        {
            "summary": f"Promoted {kind} {entry_id} to {to} ({created_id})",
            "rationale": f"The entry now lives in the {to} harness.",
            "edits": [
                {
                    "action": "delete",
                    "kind": kind,
                    "id": entry_id,
                    "reason": f"{REASON_PREFIX} {to} as {created_id}",
                }
            ],
        }
    )


def promoted_as(record: RefinementResult) -> tuple[str, str] | None:
    """(target scope, target refinement id) when `record` is a promotion's local removal, else None."""
    for edit in record.applied_edits:
        reason = edit.reason or ""
        if edit.applied and edit.action == "delete" and reason.startswith(f"{REASON_PREFIX} "):
            target, sep, refinement_id = reason[len(REASON_PREFIX) + 1 :].partition(" as ")
            if sep and target in TARGETS and refinement_id:
                return target, refinement_id
    return None


def promote(
    entry_id: str,
    to: str,
    *,
    local_store: Store,
    target_store: Store,
    session_id: str | None = None,
    kind: str | None = None,
    verifier: Any = None,
) -> Promotion:
    """Move the local entry `entry_id` into `target_store` (scope `to`): create there, then delete here.

    Raises `PromotionError` when the entry cannot be found. A refused create (the id exists there,
    a tombstone, a failed skill check, a project conflict) leaves the local entry untouched.
    """
    if to not in TARGETS:
        raise PromotionError(f"promote to project or global, not {to!r}")
    entry = find_local(local_store, entry_id, kind)
    proposal = create_proposal(entry, to, session_id)
    kwargs: dict[str, Any] = {"scope": to, "trigger": "user", "session_id": session_id, "source": "user"}
    if verifier is not None:
        kwargs["verifier"] = verifier
    created: RefinementResult = target_store.apply(proposal, **kwargs)
    if not created.applied:
        return Promotion(entry, to, created, None)
    removal = removal_proposal(entry, to, created.id)
    removed = local_store.apply(removal, scope="local", trigger="user", session_id=session_id, source="user")
    return Promotion(entry, to, created, removed)


def local_removal_of(local_store: Store, target_refinement_id: str) -> str | None:
    """The local refinement that removed the entry a promotion (`target_refinement_id`) created."""
    for record in reversed(local_store.history()):
        for edit in record.applied_edits:
            if edit.applied and (edit.reason or "").endswith(f" as {target_refinement_id}"):
                return str(record.id)
    return None


@dataclass(frozen=True)
class DeletionNotice:
    """The local entries a deleted session takes with it, where they were saved, and what to say."""

    entries: tuple[HarnessEntry, ...]
    saved_to: Path | None
    text: str


def deletion_notice(local_store: Store, session_id: str, export_dir: Path) -> DeletionNotice | None:
    """Call *before* deleting a session: lists its visible local entries and saves them as a
    proposal file under `export_dir` (`<home>/harness/deleted-sessions/<id>.json`), so they can
    still be promoted after the session is gone. None when the session had no local entries.
    """
    state = local_store.load()
    entries = tuple(
        e for kind in KINDS for _, e in sorted(state.entries.get(kind, {}).items()) if e.trust != "rejected"
    )
    if not entries:
        return None
    proposal = {
        "summary": f"Local entries of deleted session {session_id}",
        "rationale": "Saved when the session was deleted; import into a scope to keep them.",
        "edits": [
            {
                "action": "create",
                "kind": e.kind,
                "id": e.id,
                "title": e.title,
                "content": e.content,
                "path": e.path,
                "reference": e.reference,
                "arguments": e.arguments,
                "metadata": e.metadata,
                "evidence": e.evidence,
                "examples": e.examples,
            }
            for e in entries
        ],
    }
    saved: Path | None = export_dir / f"{session_id}.json"
    try:
        export_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        text = json.dumps(proposal, indent=2, ensure_ascii=False, sort_keys=True)
        write_atomic(export_dir / f"{session_id}.json", text, sync=False)
    except OSError:
        saved = None
    lines = [
        f"Session {session_id} had {len(entries)} local harness entr{'y' if len(entries) == 1 else 'ies'}:"
    ]
    lines += [f"- {e.kind} `{e.id}`: {e.title}" for e in entries]
    if saved is not None:
        lines.append(
            f"They were saved to {saved}. To keep them, promote them: "
            f"`continual-acp harness import {saved} --scope global` (or `--repo <repo>` for the project)."
        )
    else:
        lines.append(
            "They could not be saved; before deleting, promote them with /promote <entry-id> [project|global]."
        )
    return DeletionNotice(entries, saved, "\n".join(lines))
