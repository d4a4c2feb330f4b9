"""Small records the refinement coordinator speaks in (besides the store's own models)."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from harness_store import RefinementNotFound

if TYPE_CHECKING:
    from agent_core.control_plane.held import HeldChange
    from agent_core.refinement.replay import ReplayReport
    from harness_store import HarnessState, Proposal, RefinementResult

Scope = Literal["local", "global", "project"]  # project: the repository's scope
Trigger = Literal["user", "model", "auto"]
Mode = Literal["ask", "auto", "autonomous"]
RefineReview = Literal["always", "global_only", "never"]
# What a reviewer may answer. `apply_always` = apply, and trust this kind of edit for the session.
ReviewChoice = Literal["apply", "apply_always", "reject", "reject_forever"]
OutcomeStatus = Literal["applied", "refused", "pending_review", "rejected", "failed", "declined", "empty"]
REVIEW_CHOICES: tuple[str, ...] = ("apply", "apply_always", "reject", "reject_forever")


def new_job_id(prefix: str = "p") -> str:
    """Time-ordered id with a random suffix for proposals and jobs (not store refinement ids)."""
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(4)}"


@dataclass(frozen=True)
class ReviewVerdict:
    """The review gate's answer."""

    should_refine: bool
    rationale: str
    instructions: str | None = None
    scope: Scope = "local"


@dataclass
class PendingReview:
    """A planned proposal waiting for a human decision; kept until decided (on disk too)."""

    proposal_id: str
    proposal: Proposal
    scope: Scope
    trigger: Trigger
    baseline: HarnessState
    source: str = "refine"
    # Asked at once by whoever requested it (`/refine` in a live prompt), not left for later.
    interactive: bool = False
    created_at: float = field(default_factory=time.time)
    # It has a file (pending_files.py): it survives a restart, and its file going away means it
    # was decided elsewhere.
    saved: bool = False
    # (kind, id) of the local entry this proposal promotes (`/promote`): approving
    # it also deletes the local copy, a second refinement that names this one.
    promotion_of: tuple[str, str] | None = None
    # A change a cell made to `.continual-acp/` (agent_core.control_plane), already restored: the
    # proposal has no edits; approving writes the held files back, rejecting discards them.
    held: HeldChange | None = None
    # The replays of a proposal that claims to fix a failed step (`refine_verify = "replay"`): both
    # runs and the verdict, shown on the card; None when it was not replayed.
    replay: ReplayReport | None = None

    @property
    def kinds(self) -> set[str]:
        return {edit.kind for edit in self.proposal.edits}

    def to_json(self) -> dict[str, Any]:
        return {
            "proposalId": self.proposal_id,
            "scope": self.scope,
            "trigger": self.trigger,
            "summary": self.proposal.summary,
            "rationale": self.proposal.rationale,
            "expectedOutcome": self.proposal.expected_outcome,
            "edits": [edit.model_dump(exclude_none=True) for edit in self.proposal.edits],
            **(
                {
                    "held": {
                        "cellId": self.held.cell_id,
                        "code": self.held.code,
                        "when": self.held.when,
                        "files": [
                            {"path": f.path, "action": f.action, "diff": f.diff()} for f in self.held.files
                        ],
                    }
                }
                if self.held is not None
                else {}
            ),
            **({"replay": self.replay.to_json()} if self.replay is not None else {}),
        }


@dataclass(frozen=True)
class QuiescenceChanged:
    """A quiescence transition, delivered to listeners before anyone waiting for it wakes."""

    quiescent: bool
    pending: int
    in_flight: int
    last_refinement_id: str | None


@dataclass(frozen=True)
class ReviewRequested:
    """A proposal now needs a human decision (the server may ask at once if a prompt is live)."""

    pending: PendingReview


class UnknownRefinement(RefinementNotFound):
    """Neither of the session's stores (its own, the global one) has this refinement id."""

    def __init__(self, refinement_id: str, *, what: str = "refinement") -> None:
        LookupError.__init__(self, f"no {what} {refinement_id!r} in this session's or the global harness")
        self.refinement_id = refinement_id


@dataclass(frozen=True)
class RefinementOutcome:
    """How one refinement job ended: applied/refused result id, awaiting review, or failed."""

    job_id: str
    trigger: Trigger
    scope: Scope
    status: OutcomeStatus
    refinement_id: str | None = None
    proposal_id: str | None = None
    summary: str = ""
    error: str | None = None
    # What the decision wrote beside its outcome (not on the wire): every error of the result,
    # the tombstones a rejection added, and every refinement id (a promotion's removal too).
    errors: tuple[str, ...] = ()
    tombstones: tuple[str, ...] = ()
    refinement_ids: tuple[str, ...] = ()
    replay: ReplayReport | None = None  # the replays that decided it (`refine_verify = "replay"`)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "jobId": self.job_id,
            "trigger": self.trigger,
            "scope": self.scope,
            "status": self.status,
            "summary": self.summary,
        }
        if self.refinement_id:
            body["refinementId"] = self.refinement_id
        if self.proposal_id:
            body["proposalId"] = self.proposal_id
        if self.error:
            body["error"] = self.error
        if self.replay is not None:
            body["replay"] = self.replay.to_json()
        return body


@dataclass(frozen=True)
class ReviewDecided:
    """A proposal (or applied candidates) was decided, by any route: its review card can settle."""

    proposal_id: str
    outcome: RefinementOutcome


@dataclass(frozen=True)
class Found:
    """A refinement and the store (scope) whose history holds it."""

    scope: Scope
    result: RefinementResult


@dataclass(frozen=True)
class RollbackOutcome:
    """A rollback's answer: the new result, or the rollback that already undid the refinement."""

    refinement_id: str
    result: RefinementResult | None = None
    rolled_back_by: str | None = None
    partner_id: str | None = None  # the rollback of a promotion's other half, made with it

    @property
    def refused(self) -> bool:
        """The store refused the rollback (an entry changed since; `errors` name the edits)."""
        return self.result is not None and not self.result.applied and bool(self.result.errors)
