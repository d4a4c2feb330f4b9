"""The pre-apply verifier seam: a skill create/update is checked before it is written.

The store cannot run code (it imports no kernels), so the check is a callable the caller supplies
(`agent_core.trust.skill_check` builds one on a scratch kernel). Checks are slow (a kernel round trip),
so `HarnessStore.apply` runs them *before* it takes the store lock, on the entries a dry run of the
proposal would write, and the locked apply reuses those verdicts. Only an entry that came out
different under the lock (another writer moved it meanwhile) is checked again, under the lock.

A failed check refuses the edit like any other rule: `applied=False` and the error text
`skill check failed: <output>`. A passing check (or one switched off) leaves its note on the
applied edit's `check` field, so a result never says nothing about whether a skill was verified.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace

from harness_store.core import ApplyOptions, PreApplyHook, apply_proposal
from harness_store.models import HarnessEntry, HarnessState, Proposal

CHECK_FAILED = "skill check failed"


@dataclass(frozen=True)
class Verdict:
    """What a check said about one skill: passed or not, and the output a reviewer reads."""

    ok: bool
    output: str


PreApplyVerifier = Callable[[HarnessEntry], Verdict]


def check_key(entry: HarnessEntry) -> str:
    """What a verdict depends on: the id and the fields the check exercises."""
    return json.dumps(
        [entry.id, entry.reference, entry.arguments, entry.examples], sort_keys=True, default=str
    )


def needs_check(proposal: Proposal) -> bool:
    """True when some edit creates or updates a skill."""
    return any(e.kind == "skill" and e.action in ("create", "update") for e in proposal.edits)


class Verdicts:
    """Verdicts gathered before the lock, looked up (or completed) by the locked apply."""

    def __init__(self, verifier: PreApplyVerifier) -> None:
        self.verifier = verifier
        self._by_key: dict[str, Verdict] = {}

    def verdict(self, entry: HarnessEntry) -> Verdict:
        """The cached verdict for this entry's check key, running the verifier when there is none."""
        key = check_key(entry)
        found = self._by_key.get(key)
        if found is None:
            try:
                found = self.verifier(entry)
            except Exception as exc:  # a broken verifier refuses; it never lets an unchecked skill in
                found = Verdict(False, f"the skill check could not run: {type(exc).__name__}: {exc}")
            self._by_key[key] = found
        return found

    def hook(self) -> PreApplyHook:
        """The `ApplyOptions.pre_apply` callable: (refusal or None, note or None)."""

        def pre_apply(entry: HarnessEntry) -> tuple[str | None, str | None]:
            verdict = self.verdict(entry)
            if not verdict.ok:
                return f"{CHECK_FAILED}: {verdict.output}", None
            return None, verdict.output or None

        return pre_apply


def precheck(
    state: HarnessState, proposal: Proposal, opts: ApplyOptions, verifier: PreApplyVerifier
) -> Verdicts:
    """Dry-run `proposal` on `state` (no lock, nothing written) and check every skill it would write."""
    verdicts = Verdicts(verifier)
    candidates: list[HarnessEntry] = []

    def collect(entry: HarnessEntry) -> tuple[str | None, str | None]:
        candidates.append(entry)
        return None, None

    apply_proposal(state, proposal, replace(opts, pre_apply=collect))
    for entry in candidates:
        verdicts.verdict(entry)
    return verdicts
