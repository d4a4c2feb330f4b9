"""The pure core: apply a proposal to an in-memory state, build rollbacks and reviews, replay history.

Nothing here touches the disk or the clock except through its arguments, so the same functions
serve the store, the as-of view and the tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness_store.models import (
    RESTORED_FIELDS,
    AppliedEdit,
    Edit,
    HarnessEntry,
    HarnessState,
    Proposal,
    RefinementResult,
    Tombstone,
)
from harness_store.tombstones import add_tombstone, make_tombstone, matching_tombstone
from harness_store.validation import empty_lesson, resolve_id, validate_edit

MSG_BASELINE = "entry changed during refinement planning"
MSG_NOT_FOUND = "entry not found"
MSG_EXISTS = "entry already exists"
MSG_GLOBAL_READ_ONLY = "global entry is read-only in a local refinement"

_TRUST_BY_TRIGGER = {"user": "verified", "cli": "verified", "model": "candidate", "auto": "candidate"}
_SOURCE_BY_TRIGGER = {"user": "user", "cli": "user", "model": "agent", "auto": "refine"}

# Callable answering "does this transcript message id exist?"; None means "not checked".
EvidenceChecker = Callable[[str], bool]
# called with a skill entry about to be written; returns (refusal or None, check note).
PreApplyHook = Callable[[HarnessEntry], "tuple[str | None, str | None]"]


@dataclass(frozen=True)
class ApplyOptions:
    """Everything `apply_proposal` needs besides the state and the proposal."""

    refinement_id: str
    now: str
    scope: str
    trigger: str
    session_id: str | None = None
    baseline: HarnessState | None = None
    # The global store's state, consulted during a local refinement so that an update/delete of a
    # global id is refused with the scope message instead of a misleading "entry not found".
    global_state: HarnessState | None = None
    evidence_checker: EvidenceChecker | None = None
    source: str | None = None
    rollback_of: str | None = None
    review_of: str | None = None
    # Per-edit snapshots to restore field for field (rollback and review); None entries mean "normal write".
    restores: Sequence[HarnessEntry | None] = ()
    # Per-edit refusals decided before apply (rollback conflicts); None means "no refusal".
    preset_errors: Sequence[str | None] = ()
    # the pre-apply skill check (see harness_store/verify.py); None = not checked.
    pre_apply: PreApplyHook | None = None


@dataclass
class _Work:
    entries: dict[str, dict[str, HarnessEntry]]
    tombstones: list[Tombstone]
    copied: set[str] = field(default_factory=set)
    written: set[tuple[str, str]] = field(default_factory=set)

    def get(self, kind: str, entry_id: str) -> HarnessEntry | None:
        return self.entries[kind].get(entry_id)

    def put(self, kind: str, entry_id: str, entry: HarnessEntry | None) -> None:
        # Copy-on-write per kind: a 10k-entry state is not duplicated for a 5-edit proposal.
        if kind not in self.copied:
            self.entries[kind] = dict(self.entries[kind])
            self.copied.add(kind)
        if entry is None:
            self.entries[kind].pop(entry_id, None)
        else:
            self.entries[kind][entry_id] = entry
        self.written.add((kind, entry_id))


def _baseline_entry(baseline: HarnessState, kind: str, entry_id: str, scope: str) -> HarnessEntry | None:
    # A baseline may be one store's state or a merged view where colliding local ids are keyed
    # `local:<id>`; pick the entry of the scope being edited.
    for key in (f"local:{entry_id}", f"project:{entry_id}", entry_id):  # project: the repository's scope
        candidate = baseline.get(kind, key)
        if candidate is not None and candidate.scope == scope:
            return candidate
    return None


def _same(a: HarnessEntry | None, b: HarnessEntry | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.content_key() == b.content_key() and a.trust == b.trust


def _write(
    edit: Edit, entry_id: str, before: HarnessEntry | None, restore: HarnessEntry | None, opts: ApplyOptions
) -> HarnessEntry:
    version = (before.version if before else 0) + 1
    if restore is not None:
        fields: dict[str, Any] = {name: getattr(restore, name) for name in RESTORED_FIELDS}
        fields.update(source=restore.source, evidence=list(restore.evidence))
        created = before.created_at if before else restore.created_at
        version = max(version, restore.version + 1)
        return HarnessEntry(id=entry_id, created_at=created, updated_at=opts.now, version=version, **fields)
    trust = _TRUST_BY_TRIGGER.get(opts.trigger, "candidate")
    source = opts.source or _SOURCE_BY_TRIGGER.get(opts.trigger, "agent")
    assert edit.title is not None and edit.content is not None
    if before is None:
        return HarnessEntry(
            id=entry_id,
            kind=edit.kind,  # type: ignore[arg-type]  # validated against KINDS
            title=edit.title,
            content=edit.content,
            path=edit.path or "general",
            scope=opts.scope,  # type: ignore[arg-type]
            reference=edit.reference or {},
            arguments=edit.arguments or {},
            metadata=edit.metadata or {},
            source=source,  # type: ignore[arg-type]
            trust=trust,  # type: ignore[arg-type]
            evidence=list(edit.evidence or []),
            created_at=opts.now,
            updated_at=opts.now,
            version=1,
            examples=list(edit.examples or []),
        )
    changes: dict[str, Any] = {
        "title": edit.title,
        "content": edit.content,
        "source": source,
        "trust": trust,
        "updated_at": opts.now,
        "version": version,
    }
    for name in ("path", "reference", "arguments", "metadata", "evidence", "examples"):  # trust: +examples
        value = getattr(edit, name)
        if value is not None:
            changes[name] = value
    return before.model_copy(update=changes)


def _refusal(
    edit: Edit,
    entry_id: str | None,
    before: HarnessEntry | None,
    work: _Work,
    restore: HarnessEntry | None,
    opts: ApplyOptions,
) -> str | None:
    error = validate_edit(edit)
    if error is not None or entry_id is None:
        return error
    kind = edit.kind
    if opts.baseline is not None and (kind, entry_id) not in work.written:
        if not _same(
            before, _baseline_entry(opts.baseline, kind, entry_id, before.scope if before else opts.scope)
        ):
            return MSG_BASELINE
    # generalized to the project scope; the local/global message is unchanged.
    if opts.scope in ("local", "project") and edit.action in ("update", "delete"):
        if before is not None and before.scope != opts.scope and before.scope in ("global", "project"):
            return f"{before.scope} entry is read-only in a {opts.scope} refinement"
        shared = opts.global_state.get(kind, entry_id) if before is None and opts.global_state else None
        if shared is not None and shared.scope != opts.scope:
            return f"{shared.scope} entry is read-only in a {opts.scope} refinement"
    if edit.action == "create" and before is not None:
        return MSG_EXISTS
    if edit.action in ("update", "delete") and before is None:
        return MSG_NOT_FOUND
    if edit.action == "delete" or restore is not None:
        return None
    empty = empty_lesson(edit.title, edit.content)
    if empty is not None:
        return empty
    if opts.evidence_checker is not None:
        for message_id in edit.evidence or []:
            if not opts.evidence_checker(message_id):
                return f"evidence cites unknown message {message_id}"
    source = opts.source or _SOURCE_BY_TRIGGER.get(opts.trigger, "agent")
    if source != "user" and opts.trigger != "rollback":
        stone = matching_tombstone(work.tombstones, kind, entry_id, edit.content)
        if stone is not None:
            return f"content was rejected before (tombstone {stone.id})"
    return None


def apply_proposal(
    state: HarnessState, proposal: Proposal, opts: ApplyOptions
) -> tuple[HarnessState, RefinementResult]:
    """Apply every edit in order (refused ones recorded, not raised); exactly one result."""
    work = _Work(entries=dict(state.entries), tombstones=list(state.tombstones))
    applied_edits: list[AppliedEdit] = []
    for index, edit in enumerate(proposal.edits):
        if proposal.prediction is not None and edit.action == "create":
            # The proposal's prediction lives on the entries it creates (checked on later turns).
            edit = edit.model_copy(
                update={"metadata": {**(edit.metadata or {}), "prediction": proposal.prediction}}
            )
        restore = opts.restores[index] if index < len(opts.restores) else None
        preset = opts.preset_errors[index] if index < len(opts.preset_errors) else None
        entry_id = resolve_id(edit)
        before = work.get(edit.kind, entry_id) if entry_id is not None and edit.kind in work.entries else None
        error = preset or _refusal(edit, entry_id, before, work, restore, opts)
        after: HarnessEntry | None = None
        check: str | None = None
        if error is None:
            assert entry_id is not None
            if edit.action != "delete":
                after = _write(edit, entry_id, before, restore, opts)
                # a skill written by a create/update (not a restore) is checked first.
                if opts.pre_apply is not None and after.kind == "skill" and restore is None:
                    error, check = opts.pre_apply(after)
                    if error is not None:
                        after = None
        if error is None:
            assert entry_id is not None
            work.put(edit.kind, entry_id, after)
            if edit.action == "delete" and opts.rollback_of is not None and before is not None:
                # Rolling back a create: remember the content so the model does not re-propose it.
                stone = make_tombstone(
                    before.kind,
                    before.content,
                    entry_id=before.id,
                    reason=f"rolled back by {opts.refinement_id}",
                    refinement_id=opts.rollback_of,
                )
                work.tombstones = add_tombstone(work.tombstones, stone)
        applied_edits.append(
            AppliedEdit(
                **edit.model_dump(exclude={"id"}),
                id=entry_id,
                before=before,
                after=after,
                applied=error is None,
                error=error,
                check=check,
            )
        )
    result = RefinementResult(
        id=opts.refinement_id,
        summary=proposal.summary,
        rationale=proposal.rationale,
        expected_outcome=proposal.expected_outcome,
        scope=opts.scope,  # type: ignore[arg-type]
        trigger=opts.trigger,  # type: ignore[arg-type]
        session_id=opts.session_id,
        applied_edits=applied_edits,
        rollback_of=opts.rollback_of,
        review_of=opts.review_of,
        created_at=opts.now,
    )
    return HarnessState.build(work.entries, work.tombstones, head=opts.refinement_id), result


def edit_from(entry: HarnessEntry, action: str, reason: str, *, entry_id: str | None = None) -> Edit:
    """An edit writing `entry`'s content fields back (a rollback's restore, a review's trust
    change, a conflict's chosen side) under its own id or `entry_id`."""
    return Edit(
        action=action,
        kind=entry.kind,
        id=entry_id if entry_id is not None else entry.id,
        title=entry.title,
        content=entry.content,
        path=entry.path,
        reference=entry.reference,
        arguments=entry.arguments,
        metadata=entry.metadata,
        evidence=entry.evidence,
        reason=reason,
        examples=entry.examples,
    )


@dataclass(frozen=True)
class RollbackPlan:
    proposal: Proposal
    restores: list[HarnessEntry | None]
    conflicts: list[str | None]


def plan_rollback(
    state: HarnessState,
    target: RefinementResult,
    *,
    force: bool,
    later_writer: Callable[[str, str], str | None],
) -> RollbackPlan:
    """Invert the target's applied edits, newest first, checking each for later changes."""
    edits: list[Edit] = []
    restores: list[HarnessEntry | None] = []
    conflicts: list[str | None] = []
    reason = f"rollback of {target.id}"
    # What each entry will be once the inverses handled so far have run: a refinement that edited
    # one entry twice is undone step by step, so each step is compared with the step before it.
    simulated: dict[tuple[str, str], HarnessEntry | None] = {}
    for applied in reversed(target.applied_edits):
        if not applied.applied or applied.id is None:
            continue
        key = (applied.kind, applied.id)
        current = simulated[key] if key in simulated else state.get(applied.kind, applied.id)
        simulated[key] = applied.before
        after = applied.after
        changed = (current is None) != (after is None) or (
            current is not None and after is not None and current.content_key() != after.content_key()
        )
        conflict: str | None = None
        if changed and not force:
            later = later_writer(applied.kind, applied.id) or "the later refinement"
            conflict = f"entry changed since refinement {target.id}; roll back {later} first"
        if applied.before is None and after is not None:  # create -> delete
            if force and current is None:
                # Forced, and the created entry is already gone: nothing to delete, nothing to refuse.
                continue
            edits.append(Edit(action="delete", kind=applied.kind, id=applied.id, reason=reason))
            restores.append(None)
        elif applied.before is not None and after is not None:  # update -> restore before
            action = "create" if (force and current is None) else "update"
            edits.append(edit_from(applied.before, action, reason))
            restores.append(applied.before)
        elif applied.before is not None:  # delete -> re-create
            action = "update" if (force and current is not None) else "create"
            edits.append(edit_from(applied.before, action, reason))
            restores.append(applied.before)
        else:
            continue
        conflicts.append(conflict)
    if any(conflicts):
        conflicts = [c or "rollback refused: another edit of this refinement conflicts" for c in conflicts]
    proposal = Proposal(
        summary=f"Roll back {target.id}: {target.summary}".rstrip(": "),
        rationale=f"Undo refinement {target.id}.",
        expected_outcome="The harness is as it was before the refinement.",
        edits=edits,
    )
    return RollbackPlan(proposal=proposal, restores=restores, conflicts=conflicts)


@dataclass(frozen=True)
class ReviewPlan:
    proposal: Proposal
    restores: list[HarnessEntry | None]
    tombstones: list[Tombstone]


def plan_review(
    state: HarnessState, target: RefinementResult, decision: str, edit_ids: Iterable[str] | None = None
) -> ReviewPlan:
    """Turn a review decision on an applied refinement into trust changes (and tombstones).

    `apply` promotes the refinement's candidate entries to verified. `reject` marks them rejected
    (kept for the record, never in the prompt) and tombstones their content; `reject_forever` also
    blocks the entry id itself from being written again by the model. Entries changed since the
    refinement are left alone: the review is about what the refinement wrote.
    """
    wanted = set(edit_ids) if edit_ids is not None else None
    trust = "verified" if decision == "apply" else "rejected"
    edits: list[Edit] = []
    restores: list[HarnessEntry | None] = []
    stones: list[Tombstone] = []
    seen: set[tuple[str, str]] = set()
    for applied in target.applied_edits:
        if not applied.applied or applied.after is None or applied.id is None:
            continue
        if wanted is not None and applied.id not in wanted:
            continue
        key = (applied.kind, applied.id)
        current = state.get(applied.kind, applied.id)
        if key in seen or current is None or current.content_key() != applied.after.content_key():
            continue
        seen.add(key)
        if decision != "apply":
            stones.append(
                make_tombstone(
                    current.kind,
                    current.content,
                    entry_id=current.id,
                    reason=f"{decision} in review of {target.id}",
                    refinement_id=target.id,
                    forever=decision == "reject_forever",
                )
            )
        if current.trust == trust:
            continue
        edits.append(edit_from(current, "update", f"review {decision} of {target.id}"))
        restores.append(current.model_copy(update={"trust": trust}))
    proposal = Proposal(
        summary=f"Review {decision}: {target.summary}".rstrip(": "),
        rationale=f"Review decision on refinement {target.id}.",
        edits=edits,
    )
    return ReviewPlan(proposal=proposal, restores=restores, tombstones=stones)


def replay(
    entries: dict[str, dict[str, HarnessEntry]], records: Iterable[RefinementResult]
) -> dict[str, dict[str, HarnessEntry]]:
    """Apply the `after` snapshots of each record's applied edits, in order (copy-on-write)."""
    out = dict(entries)
    copied: set[str] = set()
    for record in records:
        for edit in record.applied_edits:
            if not edit.applied or edit.id is None or edit.kind not in out:
                continue
            if edit.kind not in copied:
                out[edit.kind] = dict(out[edit.kind])
                copied.add(edit.kind)
            if edit.after is None:
                out[edit.kind].pop(edit.id, None)
            else:
                out[edit.kind][edit.id] = edit.after
    return out
