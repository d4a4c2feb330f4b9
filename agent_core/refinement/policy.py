"""Who decides a proposal: apply it now, or hold it for a human review.

The table (refine_review x mode), for a proposal whose kinds are not yet trusted this session:

| refine_review | ask            | auto           | autonomous     |
|---------------|----------------|----------------|----------------|
| always        | review         | review         | review         |
| global_only   | review         | global: review | global: review |
| never         | apply          | apply          | apply          |

`ask` means "permission before every cell and every refinement", so it reviews local
proposals too -- unless the user explicitly chose `never`, which is the one setting that says
"do not ask me about refinements". A project edit is always reviewed otherwise, trusted
kind or not: it lands in the repository for everyone. A kind trusted for the session ("apply and trust this kind")
skips review for that scope and kind only; it never widens to the other scope.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agent_core.refinement.records import Scope

TrustKey = tuple[str, str]  # (scope, kind)


@dataclass(frozen=True)
class Policy:
    """The session settings decisions read at decision time (they can change mid-session)."""

    mode: str = "auto"
    refine_review: str = "global_only"
    # "replay": a proposal that claims to fix a failed step applies only when replaying the step
    # shows it helps (replay.py); "off": no replay.
    refine_verify: str = "off"


def needs_review(
    *,
    scope: Scope,
    mode: str,
    refine_review: str,
    kinds: Iterable[str],
    trusted: frozenset[TrustKey] | set[TrustKey] = frozenset(),
) -> bool:
    """True when the proposal must wait for a human decision before it touches the store."""
    if refine_review == "never":
        return False
    if scope == "project":
        return True  # a project edit is committed with the code: always asked
    kinds = set(kinds)
    if kinds and all((scope, kind) in trusted for kind in kinds):
        return False
    if refine_review == "always" or mode == "ask":
        return True
    return scope == "global"
