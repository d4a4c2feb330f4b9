"""The review policy table: refine_review x mode, and kinds trusted for the session."""

from __future__ import annotations

import pytest

from agent_core.refinement.policy import needs_review

TABLE = [
    # refine_review, mode, scope, expected review
    ("always", "ask", "local", True),
    ("always", "auto", "local", True),
    ("always", "autonomous", "global", True),
    ("global_only", "ask", "local", True),
    ("global_only", "auto", "local", False),
    ("global_only", "auto", "global", True),
    ("global_only", "autonomous", "local", False),
    ("global_only", "autonomous", "global", True),
    ("never", "ask", "global", False),
    ("never", "auto", "global", False),
    ("never", "autonomous", "local", False),
]


@pytest.mark.parametrize(("refine_review", "mode", "scope", "expected"), TABLE)
def test_review_policy_table(refine_review: str, mode: str, scope: str, expected: bool) -> None:
    assert needs_review(scope=scope, mode=mode, refine_review=refine_review, kinds={"memory"}) is expected  # type: ignore[arg-type]


def test_a_trusted_kind_skips_review_for_its_scope_only() -> None:
    trusted = {("global", "memory")}
    assert not needs_review(
        scope="global", mode="auto", refine_review="always", kinds={"memory"}, trusted=trusted
    )
    assert needs_review(scope="global", mode="auto", refine_review="always", kinds={"skill"}, trusted=trusted)
    assert needs_review(scope="local", mode="ask", refine_review="always", kinds={"memory"}, trusted=trusted)


def test_a_proposal_mixing_trusted_and_untrusted_kinds_is_reviewed() -> None:
    trusted = {("global", "memory")}
    kinds = {"memory", "prompt"}
    assert needs_review(
        scope="global", mode="auto", refine_review="global_only", kinds=kinds, trusted=trusted
    )
