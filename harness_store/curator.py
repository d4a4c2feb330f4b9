"""The curator's deterministic pass over one store: what to archive, demote or merge, and why.

`plan_curation(state, standing=...)` proposes, per kind, in this order (an entry gets at most one
action, the first rule that fits):

1. **content-free** entries (`validation.empty_lesson`: only punctuation, or the title again): archive;
2. **duplicates**: exact (the same letters and digits once case, punctuation and whitespace are
   gone) and near (the same set of words, in any order or case; a skill also needs the same
   reference and arguments): each group is merged into one *verified* member — the sources are
   archived with `merged_into` naming it. A group with no verified member is only reported (held):
   a merge target must exist and be verified before its sources are archived;
3. **harmful** entries (their counters' standing, supplied by the caller): a verified one is demoted
   to candidate, a candidate archived;
4. **unfollowed** entries (shown many times, never followed): archive.

Entries a person wrote (`source == "user"`, unless `metadata.adopted` and not `metadata.pinned`) are
never touched (a `pinned` or `adopted` mark a model wrote counts for nothing); rejected or already archived ones are left as they are. The plan is a dry run
(`report()`: the diff, the rename map, the prompt tokens saved); `Store.curate` applies it as ONE
history record (so one rollback undoes the pass), re-checking each action under the store's lock
(`curation_edits`). Archiving never deletes: the entry stays, `trust` "rejected" (never in the
prompt) with `metadata.archived` = {by, reason, trust, at, merged_into?}: a tombstone that a
`restore` action (or the pass's rollback) turns back into the entry it was.

`with_merges(state, plan, proposed)` adds merges someone else proposed (agent_core's optional model
pass) under the same rules: the source live and not a person's, untouched by the plan; the target
an existing, verified, live entry of the same kind the plan leaves alone; no chains. A refused one
becomes a note in the report (`notes`), never an action.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from harness_store.models import KINDS, Edit, HarnessEntry, HarnessState, Proposal
from harness_store.overview import entry_line
from harness_store.validation import empty_lesson, letters

ARCHIVED = "archived"  # metadata key of an archived entry
DEMOTED = "demoted"  # metadata key of a demoted entry
CHARS_PER_TOKEN = 4  # the prompt-token estimate of the report (no tokenizer in this layer)

Action = Literal["archive", "merge", "demote", "restore"]
StandingOf = Callable[[HarnessEntry], str]


def is_archived(entry: HarnessEntry) -> bool:
    """Archived by a pass: out of the prompt (`rejected`) with the archive mark. The mark alone is
    not enough: metadata is whatever its writer put there, and a live entry carrying a forged mark
    must not escape curation."""
    return entry.trust == "rejected" and isinstance(entry.metadata.get(ARCHIVED), dict)


def is_protected(entry: HarnessEntry) -> bool:
    """Written by a person (unless adopted for curation, and not pinned): never touched.

    Only a person's write counts: `pinned` set by a model or a cell (whose writes carry `source`
    agent or refine) protects nothing, or the model could shield its own entries from the curator."""
    if entry.source != "user":
        return False
    return bool(entry.metadata.get("pinned")) or not entry.metadata.get("adopted")


@dataclass(frozen=True)
class CurationAction:
    """One proposed change; `version` is the entry's version the dry run saw (re-checked on apply)."""

    action: Action
    kind: str
    id: str
    reason: str
    version: int
    target: str | None = None  # merge: the id (same kind, same store) the entry is merged into
    title: str = ""
    tokens: int = 0  # the entry's prompt line, in estimated tokens (what archiving it saves)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "action": self.action,
            "kind": self.kind,
            "id": self.id,
            "reason": self.reason,
            "version": self.version,
            "title": self.title,
            "tokens": self.tokens,
        }
        if self.target is not None:
            body["target"] = self.target
        return body


@dataclass(frozen=True)
class CurationPlan:
    """A dry run: the actions, the groups held back, and what applying would save."""

    actions: tuple[CurationAction, ...] = ()
    held: tuple[str, ...] = ()
    entries: int = 0  # how many entries the pass looked at
    notes: tuple[str, ...] = ()  # what the report says besides the actions (a refused proposal)

    @property
    def rename_map(self) -> dict[str, str]:
        """`kind/source` -> `kind/target` for every merge."""
        return {f"{a.kind}/{a.id}": f"{a.kind}/{a.target}" for a in self.actions if a.action == "merge"}

    @property
    def tokens_saved(self) -> int:
        """Estimated prompt tokens of the entries the pass takes out of the prompt."""
        return sum(a.tokens for a in self.actions if a.action in ("archive", "merge"))

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for action in self.actions:
            out[action.action] = out.get(action.action, 0) + 1
        return out

    def summary(self) -> str:
        counts = self.counts()
        parts = [f"{n} {what}" for what, n in sorted(counts.items())]
        return "Curator pass: " + (", ".join(parts) if parts else "nothing to change")

    def to_json(self) -> dict[str, Any]:
        return {
            "actions": [a.to_json() for a in self.actions],
            "held": list(self.held),
            "rename_map": self.rename_map,
            "tokens_saved": self.tokens_saved,
            "entries": self.entries,
            "notes": list(self.notes),
        }

    def report(self) -> str:
        """The dry-run report: the diff (one line per action), the rename map, the tokens saved."""
        lines = [f"{self.summary()} ({self.entries} entries looked at)."]
        for a in self.actions:
            where = f"`{a.kind}/{a.id}`"
            if a.action == "merge":
                lines.append(f"- merge {where} into `{a.kind}/{a.target}` ({a.reason})")
            elif a.action == "demote":
                lines.append(f"- demote {where} verified -> candidate ({a.reason})")
            else:
                lines.append(f"- {a.action} {where} {json.dumps(a.title, ensure_ascii=False)} ({a.reason})")
        for note in self.held:
            lines.append(f"- held: {note}")
        for note in self.notes:
            lines.append(f"- note: {note}")
        if self.rename_map:
            lines.append("Rename map: " + ", ".join(f"{s} -> {t}" for s, t in self.rename_map.items()))
        lines.append(f"Prompt tokens saved: ~{self.tokens_saved}")
        return "\n".join(lines)


_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


def _skill_key(entry: HarnessEntry) -> str:
    if entry.kind != "skill":
        return ""
    return json.dumps([entry.reference, entry.arguments], sort_keys=True, default=str)


@dataclass
class _Groups:
    """Union-find over entry ids: exact and near duplicates end in one group."""

    parent: dict[str, str] = field(default_factory=dict)

    def find(self, key: str) -> str:
        root = key
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while key != root:  # path compression
            self.parent[key], key = root, self.parent.get(key, key)
        return root

    def join(self, members: Iterable[str]) -> None:
        members = list(members)
        for member in members:
            self.parent.setdefault(member, member)
        first = self.find(members[0])
        for other in members[1:]:
            root = self.find(other)
            if root != first:
                self.parent[root] = first


def _target_rank(entry: HarnessEntry) -> tuple[int, int, str, str]:
    # verified first, then what a person wrote, then the oldest (the one others likely copied)
    return (entry.trust != "verified", not is_protected(entry), entry.created_at, entry.id)


def _tokens(key: str, entry: HarnessEntry) -> int:
    return max(1, len(entry_line(key, entry)) // CHARS_PER_TOKEN)


def _plan_kind(
    items: dict[str, HarnessEntry], standing: StandingOf | None
) -> tuple[list[CurationAction], list[str]]:
    actions: list[CurationAction] = []
    held: list[str] = []
    taken: set[str] = set()
    live = {
        key: e for key, e in items.items() if e.trust != "rejected" and not is_archived(e) and key == e.id
    }

    def act(action: Action, entry: HarnessEntry, reason: str, target: str | None = None) -> None:
        taken.add(entry.id)
        tokens = _tokens(entry.id, entry)
        actions.append(
            CurationAction(action, entry.kind, entry.id, reason, entry.version, target, entry.title, tokens)
        )

    # 1. content-free (the letters of each content are kept: the duplicate keys reuse them)
    body = {key: letters(entry.content) for key, entry in live.items()}
    for key, entry in live.items():
        if not is_protected(entry) and (not body[key] or body[key] == letters(entry.title)):
            reason = empty_lesson(entry.title, entry.content) or "empty lesson: the content says nothing"
            act("archive", entry, "content-free: " + reason.removeprefix("empty lesson: "))
    # 2. exact and near duplicates
    groups = _Groups()
    by_exact: dict[tuple[str, str], list[str]] = {}
    by_words: dict[tuple[str, frozenset[str]], list[str]] = {}
    for entry in live.values():
        if entry.id in taken:
            continue
        skill = _skill_key(entry)
        by_exact.setdefault((skill, body[entry.id]), []).append(entry.id)
        words = _words(entry.content)
        if words:
            by_words.setdefault((skill, words), []).append(entry.id)
    for bucket in (*by_exact.values(), *by_words.values()):
        if len(bucket) > 1:
            groups.join(bucket)
    members: dict[str, list[str]] = {}
    for entry_id in groups.parent:
        members.setdefault(groups.find(entry_id), []).append(entry_id)
    targets: set[str] = set()
    for ids in sorted(members.values(), key=min):
        group = sorted((live[i] for i in ids), key=_target_rank)
        target = group[0]
        sources = [e for e in group[1:] if not is_protected(e)]
        if not sources:
            continue
        if target.trust != "verified":
            names = ", ".join(f"`{e.kind}/{e.id}`" for e in group)
            held.append(f"duplicates {names}: no verified entry to merge into (review one first)")
            continue
        targets.add(target.id)
        for source in sources:
            same = letters(source.content) == letters(target.content)
            act("merge", source, "exact duplicate" if same else "near duplicate (same words)", target.id)
    # 3-4. counters
    if standing is not None:
        for entry in live.values():
            if entry.id in taken or entry.id in targets or is_protected(entry):
                continue
            verdict = standing(entry)
            if verdict == "harmful":
                if entry.trust == "verified":
                    act("demote", entry, "harmful: its followed turns mostly failed")
                else:
                    act("archive", entry, "harmful: its followed turns mostly failed")
            elif verdict == "unfollowed":
                act("archive", entry, "shown many times, never followed")
    return actions, held


def plan_curation(state: HarnessState, *, standing: StandingOf | None = None) -> CurationPlan:
    """The deterministic pass over one store's state (a dry run; see the module docstring).

    `standing(entry)` is the entry's standing from its counters (`helpful`, `harmful`,
    `unfollowed`, `neutral`); without it only content-free entries and duplicates are proposed."""
    actions: list[CurationAction] = []
    held: list[str] = []
    for kind in KINDS:
        found, notes = _plan_kind(state.entries.get(kind, {}), standing)
        actions += found
        held += notes
    return CurationPlan(tuple(actions), tuple(held), state.count())


@dataclass(frozen=True)
class ProposedMerge:
    """A merge proposed outside the deterministic rules: archive `kind/id` into `kind/target`."""

    kind: str
    id: str
    target: str
    reason: str


def _merge_refusal(
    state: HarnessState, merge: ProposedMerge, busy: set[tuple[str, str]], targets: set[tuple[str, str]]
) -> str | None:
    """Why a proposed merge may not join the plan (`busy`: entries the plan already acts on or a
    merge already archives; `targets`: the plan's merge targets), or None."""
    if merge.kind not in KINDS:
        return f"unknown kind {merge.kind!r}"
    source = state.get(merge.kind, merge.id)
    if source is None or source.id != merge.id:
        return "the entry does not exist"
    if merge.target == merge.id:
        return "an entry cannot be merged into itself"
    if is_protected(source):
        return "written or pinned by a person: the curator leaves it alone"
    if source.trust == "rejected" or is_archived(source):
        return "the entry is already out of the prompt"
    if (merge.kind, merge.id) in busy:
        return "the pass already changes the entry"
    if (merge.kind, merge.id) in targets:
        return "the entry is a merge target of this pass"
    target = state.get(merge.kind, merge.target)
    if target is None or target.id != merge.target:
        return "the merge target does not exist; nothing archived"
    if target.trust != "verified" or is_archived(target):
        return "the merge target is not verified; nothing archived"
    if (merge.kind, merge.target) in busy:
        return "the pass already changes the merge target"
    return None


def with_merges(state: HarnessState, plan: CurationPlan, proposed: Iterable[ProposedMerge]) -> CurationPlan:
    """`plan` with the `proposed` merges that pass the deterministic pass's rules added (reason
    prefixed `model: `), each refused one a note; `state` is the store the plan was made from."""
    actions = list(plan.actions)
    notes = list(plan.notes)
    busy = {(a.kind, a.id) for a in actions}
    targets = {(a.kind, a.target) for a in actions if a.target is not None}
    for merge in proposed:
        where = f"`{merge.kind}/{merge.id}` into `{merge.kind}/{merge.target}`"
        refusal = _merge_refusal(state, merge, busy, targets)
        if refusal is not None:
            notes.append(f"model merge {where} refused: {refusal}")
            continue
        source = state.get(merge.kind, merge.id)
        assert source is not None  # checked by _merge_refusal
        reason = "model: " + (merge.reason.strip() or "the same lesson")[:200]
        actions.append(
            CurationAction(
                "merge", merge.kind, merge.id, reason, source.version, merge.target, source.title,
                _tokens(source.id, source),
            )
        )  # fmt: skip
        busy.add((merge.kind, merge.id))
        targets.add((merge.kind, merge.target))
    return CurationPlan(tuple(actions), plan.held, plan.entries, tuple(notes))


def noted(plan: CurationPlan, note: str) -> CurationPlan:
    """`plan` with one more note in its report."""
    return CurationPlan(plan.actions, plan.held, plan.entries, (*plan.notes, note))


def restore_plan(state: HarnessState, kind: str, entry_id: str) -> CurationPlan:
    """A plan restoring one archived entry (its trust back, the archive mark gone)."""
    entry = state.get(kind, entry_id)
    if entry is None or not is_archived(entry):
        return CurationPlan(entries=state.count())
    action = CurationAction(
        "restore", kind, entry_id, "restored from the archive", entry.version, title=entry.title
    )
    return CurationPlan((action,), (), state.count())


def _refusal(state: HarnessState, action: CurationAction) -> str | None:
    """Why an action of a dry run may not apply to the store as it is now, or None."""
    current = state.get(action.kind, action.id)
    if current is None:
        return "entry is gone since the dry run"
    if current.version != action.version:
        return "entry changed since the dry run; run the curator again"
    if action.action == "restore":
        return None if is_archived(current) else "entry is not archived"
    if is_protected(current):
        return "written or pinned by a person: the curator leaves it alone"
    if is_archived(current):
        return "entry is already archived"
    if action.action == "merge":
        target = state.get(action.kind, action.target or "")
        if target is None:
            return f"merge target {action.kind}/{action.target} does not exist; nothing archived"
        if target.trust != "verified" or is_archived(target):
            return f"merge target {action.kind}/{action.target} is not verified; nothing archived"
    return None


def _after(current: HarnessEntry, action: CurationAction, pass_id: str, now: str) -> HarnessEntry:
    metadata = dict(current.metadata)
    if action.action == "restore":
        kept = metadata.pop(ARCHIVED, {})
        trust = kept.get("trust") if isinstance(kept, dict) else None
        return current.model_copy(
            update={
                "trust": trust if trust in ("candidate", "verified") else "candidate",
                "metadata": metadata,
            }
        )
    if action.action == "demote":
        metadata[DEMOTED] = {"by": pass_id, "reason": action.reason, "at": now}
        return current.model_copy(update={"trust": "candidate", "metadata": metadata})
    mark: dict[str, Any] = {"by": pass_id, "reason": action.reason, "trust": current.trust, "at": now}
    if action.target is not None:
        mark["merged_into"] = action.target
    metadata[ARCHIVED] = mark
    return current.model_copy(update={"trust": "rejected", "metadata": metadata})


@dataclass(frozen=True)
class CurationEdits:
    """What `Store.curate` hands to `apply_proposal`: one update per action, the entry each writes
    (None when refused), and the refusals."""

    proposal: Proposal
    restores: list[HarnessEntry | None]
    errors: list[str | None]


def curation_edits(state: HarnessState, plan: CurationPlan, *, pass_id: str, now: str) -> CurationEdits:
    """The plan's actions as edits against `state` (read under the store's lock), each re-checked:
    a merge whose target is missing or not verified archives nothing."""
    edits: list[Edit] = []
    restores: list[HarnessEntry | None] = []
    errors: list[str | None] = []
    for action in plan.actions:
        error = _refusal(state, action)
        current = state.get(action.kind, action.id)
        if current is None:
            edits.append(Edit(action="update", kind=action.kind, id=action.id, reason=action.reason))
            restores.append(None)
        else:
            edits.append(
                Edit(
                    action="update",
                    kind=current.kind,
                    id=current.id,
                    title=current.title,
                    content=current.content,
                    reason=f"curator: {action.reason}",
                )
            )
            restores.append(None if error else _after(current, action, pass_id, now))
        errors.append(error)
    proposal = Proposal(
        summary=plan.summary(),
        rationale="The curator's deterministic pass (archive, demote, merge); one rollback undoes it.",
        expected_outcome=f"About {plan.tokens_saved} fewer prompt tokens; no entry deleted.",
        edits=edits,
    )
    return CurationEdits(proposal, restores, errors)
