"""The harness records: entries, edits, proposals, results, tombstones and the state.

Field names are snake_case; they are what goes on disk and over the
extension methods, so they must not be renamed. `Proposal.model_validate` accepts untrusted input
(a model's JSON, an extension request) and normalizes it instead of rejecting it: wrong-typed fields
are dropped, non-object edits are dropped, but unknown action/kind values are kept so that apply can
refuse them *with a reason* rather than let them disappear.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

KINDS: tuple[str, ...] = ("prompt", "memory", "skill", "subagent")
ACTIONS: tuple[str, ...] = ("create", "update", "delete")
TRIGGERS: tuple[str, ...] = ("user", "model", "auto", "rollback", "cli")

Kind = Literal["prompt", "memory", "skill", "subagent"]
Scope = Literal["local", "global", "project"]  # project: the repository's scope
Trust = Literal["candidate", "verified", "rejected"]
Source = Literal["refine", "agent", "user"]
Trigger = Literal["user", "model", "auto", "rollback", "cli"]
ReviewDecision = Literal["apply", "reject", "reject_forever"]

# The fields that say what an entry *is*. Rollback conflicts and the baseline check compare these,
# never version or timestamps, so that rolling back newest-first is never refused by its own writes.
CONTENT_FIELDS: tuple[str, ...] = (
    "kind",
    "title",
    "content",
    "path",
    "reference",
    "arguments",
    "metadata",
    "scope",
    "examples",  # a skill's runnable examples are part of what it is
)
# What a rollback restores field for field.
RESTORED_FIELDS: tuple[str, ...] = (*CONTENT_FIELDS, "trust")


class HarnessEntry(BaseModel):
    """One prompt note, memory, skill or subagent spec."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    id: str
    kind: Kind
    title: str
    content: str
    path: str = "general"
    scope: Scope = "local"
    reference: dict[str, Any] = Field(default_factory=dict)
    arguments: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: Source = "agent"
    trust: Trust = "candidate"
    evidence: list[str] = Field(default_factory=list)
    created_at: str
    updated_at: str
    version: int = 1
    # calls a skill check runs before the skill is written, each
    # `{"args": [...], "kwargs": {...}, "expect": <value>}` or with `"predicate": "<expr over result>"`.
    examples: list[dict[str, Any]] = Field(default_factory=list)

    def content_key(self) -> tuple[Any, ...]:
        """The comparable identity of what the entry says (no version, no timestamps)."""
        return tuple(getattr(self, name) for name in CONTENT_FIELDS)


def _empty(value: Any) -> bool:
    return not value


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dict_or_none(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _evidence(value: Any) -> list[str] | None:
    """Message ids cited by an edit; accepts a bare id, ids, or objects carrying `message_id`/`id`."""
    if isinstance(value, str):
        return [value] if value.strip() else None
    if not isinstance(value, list):
        return None
    ids: list[str] = []
    for item in value:
        if isinstance(item, dict):
            item = item.get("message_id", item.get("id"))
        if isinstance(item, str) and item.strip() and item not in ids:
            ids.append(item)
    return ids


def _examples(value: Any) -> list[dict[str, Any]] | None:
    """A list of example objects; non-object items are dropped."""
    if not isinstance(value, list):
        return None
    return [item for item in value if isinstance(item, dict)]


def _label(value: Any) -> str:
    """Keep an invalid action/kind visible so the refusal can name it."""
    if value is None:
        return "(missing)"
    return value if isinstance(value, str) else str(value)


PREDICTION_MAX_CHARS = 200


def normalize_prediction(value: Any) -> dict[str, str] | None:
    """A prediction `{"command": ..., "expect": ...}` from untrusted input, or None: the command
    must be a non-blank one-line string (at most 200 characters); `expect` is optional text."""
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if not isinstance(value, dict):
        return None
    command = value.get("command")
    if not isinstance(command, str) or not command.strip() or "\n" in command.strip():
        return None
    out = {"command": command.strip()[:PREDICTION_MAX_CHARS]}
    expect = value.get("expect")
    if isinstance(expect, str) and expect.strip():
        out["expect"] = expect.strip()[:PREDICTION_MAX_CHARS]
    return out


def normalize_edit(raw: dict[str, Any]) -> dict[str, Any]:
    """Clean one untrusted edit object (see the module docstring)."""
    return {
        "action": _label(raw.get("action")),
        "kind": _label(raw.get("kind")),
        "id": _str_or_none(raw.get("id")),
        "title": _str_or_none(raw.get("title")),
        "content": _str_or_none(raw.get("content")),
        "path": _str_or_none(raw.get("path")),
        "reference": _dict_or_none(raw.get("reference")),
        "arguments": _dict_or_none(raw.get("arguments")),
        "metadata": _dict_or_none(raw.get("metadata")),
        "reason": _str_or_none(raw.get("reason")),
        "evidence": _evidence(raw.get("evidence")),
        "examples": _examples(raw.get("examples")),
    }


class Edit(BaseModel):
    """One requested change. `action` and `kind` are plain strings on purpose (see module docstring)."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    action: str
    kind: str
    id: str | None = None
    title: str | None = None
    content: str | None = None
    path: str | None = None
    reference: dict[str, Any] | None = None
    arguments: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    reason: str | None = None
    evidence: list[str] | None = None
    examples: list[dict[str, Any]] | None = None  # skill examples

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return normalize_edit(data)
        return data


class Proposal(BaseModel):
    """A set of edits planned together; applying it yields exactly one `RefinementResult`."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    summary: str = ""
    rationale: str = ""
    expected_outcome: str = ""
    edits: list[Edit] = Field(default_factory=list)
    # What the proposal expects when the situation recurs: `{"command": <what a later cell runs>,
    # "expect": <text>}`; stored on the entries it creates (metadata.prediction) and checked on
    # later turns whose cells run the command (hit: the turn passed; miss: it failed).
    prediction: dict[str, str] | None = None

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return {}
        raw_edits = data.get("edits")
        edits: list[Any] = []
        if isinstance(raw_edits, list):
            edits = [item for item in raw_edits if isinstance(item, dict | Edit)]
        clean: dict[str, Any] = {"edits": edits}
        for name in ("summary", "rationale", "expected_outcome"):
            value = data.get(name)
            if isinstance(value, str):
                clean[name] = value
        prediction = normalize_prediction(data.get("prediction"))
        if prediction is not None:
            clean["prediction"] = prediction
        return clean


class AppliedEdit(Edit):
    """The edit as it was carried out (or refused): resolved id, snapshots, outcome."""

    before: HarnessEntry | None = None
    after: HarnessEntry | None = None
    applied: bool = False
    error: str | None = None
    # the pre-apply skill check's output on an applied edit ("verified: ...",
    # "not verified: verify_skills is off"); a failed check is the refusal `error` instead.
    check: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, data: Any) -> Any:
        # Applied edits are written by us; only plain validation applies.
        return data


class Tombstone(BaseModel):
    """Content that was rejected; a later model create/update matching it is refused."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    id: str
    kind: str
    normalized: str
    content: str
    entry_id: str | None = None
    # A "forever" tombstone (review decision `reject_forever`) also blocks the entry id itself.
    forever: bool = False
    reason: str = ""
    refinement_id: str | None = None
    created_at: str


class RefinementResult(BaseModel):
    """One history record: what a proposal (or rollback, or review) did to one store."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    id: str
    summary: str = ""
    rationale: str = ""
    expected_outcome: str = ""
    scope: Scope = "local"
    trigger: Trigger = "user"
    session_id: str | None = None
    applied_edits: list[AppliedEdit] = Field(default_factory=list)
    rollback_of: str | None = None
    review_of: str | None = None
    created_at: str
    # Tombstones a record added or lifted outside any edit: a proposal rejected before it was ever
    # applied (`reject_proposal`), an explicit lift (`lift_tombstone`). Such a record has no
    # applied edits; it is in the history so that a state rebuilt from it keeps them (recovery.py).
    # Left out of dumps when empty: every other record keeps its shape on disk and on the wire.
    tombstoned: list[Tombstone] = Field(default_factory=list, exclude_if=_empty)
    lifted: list[Tombstone] = Field(default_factory=list, exclude_if=_empty)

    @property
    def applied(self) -> bool:
        """True when at least one edit was applied."""
        return any(edit.applied for edit in self.applied_edits)

    @property
    def errors(self) -> list[str]:
        """The refusal messages, one per refused edit, prefixed with the edit's target."""
        return [f"{e.action} {e.kind} {e.id or '?'}: {e.error}" for e in self.applied_edits if not e.applied]

    @property
    def tombstone_change(self) -> bool:
        """True for a record that only added or lifted tombstones (it changed no entry)."""
        return not self.applied_edits and bool(self.tombstoned or self.lifted)


def empty_entries() -> dict[str, dict[str, HarnessEntry]]:
    """Entries by kind with all four kinds present and empty."""
    return {kind: {} for kind in KINDS}


class HarnessState(BaseModel):
    """Entries by kind then id (all four kinds always present), tombstones, and the history head."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    entries: dict[str, dict[str, HarnessEntry]] = Field(default_factory=empty_entries)
    tombstones: list[Tombstone] = Field(default_factory=list)
    # Id of the last history record this state includes; lets a reader roll forward after a crash
    # that happened between the history append and the state save.
    head: str | None = None

    @model_validator(mode="after")
    def _all_kinds(self) -> HarnessState:
        for kind in KINDS:
            self.entries.setdefault(kind, {})
        return self

    @classmethod
    def build(
        cls,
        entries: dict[str, dict[str, HarnessEntry]],
        tombstones: list[Tombstone] | None = None,
        head: str | None = None,
    ) -> HarnessState:
        """Construct without re-validating entries we created ourselves (hot path)."""
        full = {kind: entries.get(kind, {}) for kind in KINDS}
        for kind, items in entries.items():
            full.setdefault(kind, items)
        return cls.model_construct(entries=full, tombstones=list(tombstones or []), head=head)

    def get(self, kind: str, entry_id: str) -> HarnessEntry | None:
        """The entry of `kind` keyed `entry_id`, or None."""
        return self.entries.get(kind, {}).get(entry_id)

    def find(self, entry_id: str) -> list[HarnessEntry]:
        """Every entry keyed `entry_id` in any kind."""
        return [items[entry_id] for items in self.entries.values() if entry_id in items]

    def count(self) -> int:
        """How many entries there are, all kinds together."""
        return sum(len(items) for items in self.entries.values())
