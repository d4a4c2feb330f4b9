"""Pending reviews: proposals waiting for a human decision, in memory and on disk.

A local review is kept with the session, a global one where every later session finds it, a
project one per user under the data dir keyed by the repository (pending_files.py). What other
sessions or processes did meanwhile (a new global proposal, a review decided in a panel, whose
claim is removing the file) is read by an explicit `refresh()`; listing, getting and claiming
read memory only, so a caller decides when the disk is asked.
"""

from __future__ import annotations

from collections.abc import Iterator

from agent_core.refinement.pending_files import (
    PendingFiles,
    migrate_in_repo_pending,
    pending_dir,
    project_pending_dir,
)
from agent_core.refinement.records import PendingReview, Scope
from harness_store import Scopes
from harness_store.errors import ReviewAlreadyDecided

SHARED: tuple[Scope, ...] = ("global", "project")


class PendingReviews:
    """This session's view of the reviews waiting for a decision, oldest first."""

    def __init__(self, scopes: Scopes, session_id: str) -> None:
        self.session_id = session_id
        self._reviews: dict[str, PendingReview] = {}
        self._files: dict[Scope, PendingFiles] = {
            "local": PendingFiles(pending_dir(scopes.local)),
            "global": PendingFiles(pending_dir(scopes.global_)),
        }
        if scopes.project is not None:
            # Per user, under the data dir, never in the repository.
            per_user = project_pending_dir(scopes.global_, scopes.project)
            migrate_in_repo_pending(pending_dir(scopes.project), per_user)
            self._files["project"] = PendingFiles(per_user)
        for scope, files in self._files.items():
            for saved in files.load_all():
                if saved.scope == scope:
                    self._reviews[saved.proposal_id] = saved

    def refresh(self) -> dict[str, PendingReview]:
        """Re-read the disk: every global (and this repository's project) proposal on disk joins,
        made by any session in this process or another; one decided elsewhere drops out, of any
        scope. Returns the reviews (the live mapping, oldest first)."""
        for shared in SHARED:
            files = self._files.get(shared)
            if files is None or files.directory is None:
                continue
            on_disk = files.ids()
            for proposal_id, waiting in list(self._reviews.items()):
                if waiting.scope == shared and proposal_id not in on_disk and waiting.saved:
                    del self._reviews[proposal_id]
            fresh = [files.load(i) for i in sorted(on_disk - self._reviews.keys())]
            for saved in sorted((p for p in fresh if p is not None), key=lambda p: p.created_at):
                if saved.scope == shared:
                    self._reviews[saved.proposal_id] = saved
        # This session's own saved reviews decided by someone else (a review panel in another
        # process removed the file: its claim) are not asked again either.
        listed: dict[Scope, set[str]] = {}
        for proposal_id, waiting in list(self._reviews.items()):
            own = self._files.get(waiting.scope)
            if waiting.scope in SHARED or not waiting.saved or own is None or own.directory is None:
                continue
            if waiting.scope not in listed:
                listed[waiting.scope] = own.ids()
            if proposal_id not in listed[waiting.scope]:
                del self._reviews[proposal_id]
        return self._reviews

    @property
    def reviews(self) -> dict[str, PendingReview]:
        """The reviews as last refreshed (no disk read)."""
        return self._reviews

    def __iter__(self) -> Iterator[str]:
        return iter(self._reviews)

    def __len__(self) -> int:
        return len(self._reviews)

    def get(self, proposal_id: str) -> PendingReview | None:
        return self._reviews.get(proposal_id)

    def hold(self, pending: PendingReview) -> None:
        """Keep a new review, in memory and on disk (blocking: call it in a worker thread)."""
        self._reviews[pending.proposal_id] = pending
        pending.saved = self._files[pending.scope].save(pending, self.session_id)

    def claim(self, proposal_id: str) -> PendingReview | None:
        """Take a review out to decide it; None when none waits under the id. Removing its file is
        the claim: `ReviewAlreadyDecided` when another session (or process) removed it first."""
        pending = self._reviews.pop(proposal_id, None)
        if pending is not None and not self._files[pending.scope].remove(proposal_id) and pending.saved:
            raise ReviewAlreadyDecided(proposal_id)
        return pending
