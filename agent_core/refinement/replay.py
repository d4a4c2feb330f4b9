"""Replay verdicts: did an edit that claims to fix a failure actually help? (`refine_verify = "replay"`)

A proposal may name, in `fixes`, the failed cell (or autonomous-mode gate) of the transcript its
edits would have prevented.
With replay on, that step is re-run twice in scratch checkouts of the repository (replay_run.py):
once by a child turn whose harness holds the edit, once by one whose harness does not, each followed
by the session's gates. This module is the pure part: the records of the two runs and the one rule
that reads them. The edit "helps" only when the run with it passes the gates and the run without it
does not; anything else (both pass: the fix did not need the edit; both fail: the edit is not
enough; the run could not be made) is not proof, and the edit waits for a person or is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent_core.refinement.trajectory import TrajectoryItem

Verdict = Literal["helps", "does_not_help", "both_pass", "both_fail", "not_run"]

GATE_TAIL_CHARS = 600  # of each replay's gate output, on the card and in the record


@dataclass(frozen=True)
class ReplayRun:
    """One replay: the child turn then the gates, in a scratch checkout."""

    with_edit: bool
    passed: bool  # every gate exited 0 (False when no gate ran)
    gate_tail: str = ""  # the end of the gates' output
    requests: int = 0  # model requests the child turn made
    tokens: int = 0  # their tokens (input + output + cache)
    seconds: float = 0.0  # wall time of the whole run (checkout, turn, gates, cleanup)
    error: str | None = None  # the run could not be made (no checkout, the child failed to start)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "withEdit": self.with_edit,
            "passed": self.passed,
            "gateTail": self.gate_tail,
            "requests": self.requests,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 2),
        }
        if self.error:
            body["error"] = self.error
        return body

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ReplayRun:
        error = raw.get("error")
        return cls(
            with_edit=bool(raw.get("withEdit")),
            passed=bool(raw.get("passed")),
            gate_tail=str(raw.get("gateTail") or ""),
            requests=int(raw.get("requests") or 0),
            tokens=int(raw.get("tokens") or 0),
            seconds=float(raw.get("seconds") or 0.0),
            error=str(error) if error else None,
        )


@dataclass(frozen=True)
class ReplayReport:
    """Both replays of one proposal and what they prove."""

    fixes: str  # the message id of the failed step that was replayed
    verdict: Verdict
    reason: str
    with_edit: ReplayRun | None = None
    without_edit: ReplayRun | None = None

    @property
    def helps(self) -> bool:
        return self.verdict == "helps"

    @property
    def runs(self) -> tuple[ReplayRun, ...]:
        return tuple(run for run in (self.with_edit, self.without_edit) if run is not None)

    @property
    def requests(self) -> int:
        return sum(run.requests for run in self.runs)

    @property
    def tokens(self) -> int:
        return sum(run.tokens for run in self.runs)

    @property
    def seconds(self) -> float:
        return sum(run.seconds for run in self.runs)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "fixes": self.fixes,
            "verdict": self.verdict,
            "reason": self.reason,
            "cost": {"requests": self.requests, "tokens": self.tokens, "seconds": round(self.seconds, 2)},
        }
        if self.with_edit is not None:
            body["withEdit"] = self.with_edit.to_json()
        if self.without_edit is not None:
            body["withoutEdit"] = self.without_edit.to_json()
        return body

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ReplayReport:
        verdict = raw.get("verdict")
        with_raw, without_raw = raw.get("withEdit"), raw.get("withoutEdit")
        return cls(
            fixes=str(raw.get("fixes") or ""),
            verdict=verdict if verdict in _VERDICTS else "not_run",
            reason=str(raw.get("reason") or ""),
            with_edit=ReplayRun.from_json(with_raw) if isinstance(with_raw, Mapping) else None,
            without_edit=ReplayRun.from_json(without_raw) if isinstance(without_raw, Mapping) else None,
        )


_VERDICTS: frozenset[str] = frozenset({"helps", "does_not_help", "both_pass", "both_fail", "not_run"})


def decide(fixes: str, with_edit: ReplayRun, without_edit: ReplayRun) -> ReplayReport:
    """The rule: the edit helps only when the run with it passes the gates and the run without it
    does not. A run that could not be made proves nothing either way."""
    for run in (with_edit, without_edit):
        if run.error:
            which = "with" if run.with_edit else "without"
            return ReplayReport(
                fixes,
                "not_run",
                f"the replay {which} the edit could not run: {run.error}",
                with_edit,
                without_edit,
            )
    if with_edit.passed and not without_edit.passed:
        verdict: Verdict = "helps"
        reason = "the gates pass with the edit and fail without it"
    elif with_edit.passed:
        verdict, reason = (
            "both_pass",
            "the gates pass without the edit too: the replay does not show it is needed",
        )
    elif without_edit.passed:
        verdict, reason = "does_not_help", "the gates pass without the edit and fail with it"
    else:
        verdict, reason = (
            "both_fail",
            "the gates fail with the edit as well: the replay does not show it fixes the failure",
        )
    return ReplayReport(fixes, verdict, reason, with_edit, without_edit)


def not_run(fixes: str, reason: str) -> ReplayReport:
    """A replay that could not be set up at all (no repository, no gates, no child)."""
    return ReplayReport(fixes, "not_run", reason)


def failed_step(items: Sequence[TrajectoryItem], fixes: str | None) -> TrajectoryItem | None:
    """The failed cell or gate `fixes` names (its result in the transcript, status `failed`), or
    None when the id names no such step: a claim that points at nothing is no claim."""
    if not fixes:
        return None
    for item in items:
        if item.message_id == fixes and item.role in ("tool_result", "gate") and item.status == "failed":
            return item
    return None


def task_of(items: Sequence[TrajectoryItem], step: TrajectoryItem) -> str | None:
    """What the user asked before the failed step: the prompt the replay's child is given."""
    task: str | None = None
    for item in items:
        if item is step:
            return task
        if item.role == "user" and item.text.strip():
            task = item.text
    return None
