"""`HarnessService`: the harness decisions of one session, constructible without a `Session`.

Every way a person or the agent changes the harness ends here, whichever door it came through
(`/review`, `/rollback`, `/promote`, `_harness/*`, a kernel call, a review panel -- all of them
through the session's `HarnessSurface`): apply now or hold for review (the policy), decide a
pending review, roll back, promote, resolve a project conflict. Each change is reported on the
ordered outbox and counted as work in flight while it runs.

One object, its jobs in modules of their own: service_core.py (state, applying, `submit`,
`quiescence()`), decisions.py (`decide`), rollbacks.py (`rollback`), promotions.py (`promote`).
"""

from __future__ import annotations

from agent_core.refinement.decisions import Decisions
from agent_core.refinement.promotions import Promotions
from agent_core.refinement.rollbacks import Rollbacks


class HarnessService(Decisions, Rollbacks, Promotions):
    """The decisions of one session's harness over its `scopes` (see the module docstring)."""


__all__ = ["HarnessService"]
