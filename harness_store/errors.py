"""The exceptions of this package: the store cannot be used, or a decision names nothing to decide."""

from __future__ import annotations


class HarnessStoreError(Exception):
    """The store is unusable (permissions, lock timeout, a path that is not a directory).

    The message names the path and what to do. Refused edits are never exceptions: they are
    recorded as `applied=False` with an `error` on the result.
    """


class ReviewNotFound(HarnessStoreError, LookupError):
    """Nothing waits for a decision under this id: no pending proposal, no reviewable refinement."""

    def __init__(self, review_id: str, message: str) -> None:
        super().__init__(message)
        self.review_id = review_id


class ReviewAlreadyDecided(HarnessStoreError):
    """The proposal was decided meanwhile by another route (another session, another process)."""

    def __init__(self, proposal_id: str) -> None:
        super().__init__(f"proposal {proposal_id!r} was already decided in another session")
        self.proposal_id = proposal_id
