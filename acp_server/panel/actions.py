"""What the panel does to the harness: routing its actions to a `HarnessSurface`.

The panel holds no review or rollback rule. Inside a running ACP server (`/harness ui`, a
`ServerLink`), an action on a store an open session of that server uses goes through that
session's `HarnessSurface` -- the very calls the slash commands make -- so the editor shows the
same refinement card and the session's quiescence counts the work (link.py says which session acts
for which store). Otherwise (the standalone `harness ui`, or a store no session here has open) the
action runs on a surface built over the stores it touches (`HarnessSurface.for_stores`: the
proposing session's local store and the global one), so the history records it exactly as a
session would; a session open in another server reads the change at its next read of the store,
and the answer names those sessions (docs/harness.md, "The review panel"):

* rollback -> `HarnessSurface.rollback` (`/rollback`)
* review   -> `HarnessSurface.decide` (`/review`), with the proposing session's transcript as the
              evidence and the session's skill check
* verify   -> `HarnessSurface.decide` on the refinement that last wrote the entry, for that entry
* delete   -> `HarnessSurface.apply_user` with one delete edit
* promote  -> `HarnessSurface.promote` (`/promote`)

This module only says which surface acts; results.py turns the answer into what the page shows and
skill_checks.py sets up the skill check a direct write runs. The actions block (file locks, the hop to the server loop, a short event loop of their own): call them from a
worker thread.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import anyio

from acp_server.panel import results
from acp_server.panel.results import ActionResult
from acp_server.panel.sessions import describe_sessions
from acp_server.panel.skill_checks import PanelSkillChecks, Verifier, VerifierFactory
from acp_server.panel.sources import GLOBAL, PanelData, PanelQueryError, StoreView, proposer_of

if TYPE_CHECKING:
    from acp_server.panel.link import ServerLink
    from agent_core.refinement.records import RefinementOutcome, RollbackOutcome, Scope
    from agent_core.refinement.surface import HarnessEntry, HarnessSurface

T = TypeVar("T")

DECISIONS = ("apply", "reject", "reject_forever")
PROMOTION_TARGETS = ("project", "global")


class PanelActions:
    """The panel's write actions over the stores of one data home (through `link` when given).

    `verifier_factory` (`(scope, cwd) -> PreApplyVerifier`) builds the skill check a direct write
    runs; by default `agent_core.trust.skill_check.cli_verifier_factory`, which like a session's own
    check (`session_verifiers`) ends in `verifier_for` with the config's `verify_skills`: one
    check, whoever promotes."""

    def __init__(
        self,
        data: PanelData,
        link: ServerLink | None = None,
        *,
        verifier_factory: VerifierFactory | None = None,
    ) -> None:
        self.data = data
        self.link = link
        self._skill_checks = PanelSkillChecks(data.home, verifier_factory)

    # ------------------------------------------------------------ who acts

    def _acting(self, store_key: str, *, proposer: str | None = None) -> tuple[str, HarnessSurface] | None:
        """The open session of this server whose harness acts for `store_key`, with its surface."""
        if self.link is None:
            return None
        sid = self.link.session_for(store_key, proposer=proposer)
        surface = self.link.surface(sid) if sid is not None else None
        return (sid, surface) if sid is not None and surface is not None else None

    def _elsewhere(self, store_key: str) -> list[str]:
        """Sessions another server has open that use `store_key` (they get no card for it). Inside a
        server, its own sessions are not "elsewhere": the acting one shows the card."""
        me = os.getpid() if self.link is not None else None
        return [
            s.session_id
            for s in describe_sessions(self.data.home)
            if s.open and s.owner_pid != me and store_key in (GLOBAL, s.session_id)
        ]

    def _direct(self, store_key: str, result: ActionResult) -> ActionResult:
        """A result of a direct store write, with the sessions that will see it only on their next read."""
        return results.with_open_elsewhere(result, self._elsewhere(store_key)) if result.ok else result

    def _routed(
        self, acting: tuple[str, HarnessSurface], call: Callable[[HarnessSurface], Awaitable[T]]
    ) -> T:
        _sid, surface = acting
        assert self.link is not None
        return self.link.run(lambda: call(surface))

    def _local_key(self, key: str | None) -> str | None:
        """`key` when it names a session whose harness exists (its local store), else None."""
        if not key or key == GLOBAL:
            return None
        return key if self.data.root_of(key).is_dir() else None

    def _serviced(
        self,
        local_key: str | None,
        session_id: str | None,
        call: Callable[[HarnessSurface], Awaitable[T]],
        *,
        check_as: str | None = None,
    ) -> T:
        """Run `call` on a harness surface over the stores of `local_key` (a session; the global
        store stands in when None) and the global one, acting for `session_id`: its transcript is
        the evidence and, with `check_as`, its skill check runs in that session's cwd."""
        from agent_core.refinement.surface import HarnessSurface

        glob = self.data.view(GLOBAL).store
        local = self.data.view(local_key).store if local_key is not None else glob
        evidence = self.data.evidence.message_ids

        def known() -> set[str] | None:
            return evidence(session_id) if session_id is not None else None

        def verifier(scope: str) -> Verifier:
            assert check_as is not None
            return self._skill_checks.for_session(scope, check_as)

        async def run() -> T:
            surface = HarnessSurface.for_stores(
                local,
                glob,
                session_id=session_id,
                evidence=known,
                skill_verifier=verifier if check_as is not None else None,
            )
            return await call(surface)

        return anyio.run(run)

    # ------------------------------------------------------------ rollback

    def rollback(self, refinement_id: str, *, force: bool = False) -> ActionResult:
        """Roll back a refinement of any store (as `/rollback <id> [--force]`)."""
        view, record = self.data.find_refinement(refinement_id)
        proposer = record.session_id
        # A global record made by a session (a promotion's create) is best undone by that session.
        acting = self._acting(view.key, proposer=proposer)
        if acting is not None:
            outcome: RollbackOutcome = self._routed(acting, lambda s: s.rollback(refinement_id, force=force))
            return results.rolled_back(refinement_id, outcome, force, via=acting[0])
        local_key = self._local_key(view.key if view.key != GLOBAL else proposer)
        outcome = self._serviced(local_key, view.session_id, lambda s: s.rollback(refinement_id, force=force))
        done = results.rolled_back(refinement_id, outcome, force)
        return self._direct(view.key, done) if done.ok else done

    # ------------------------------------------------------------ reviews

    def review(self, proposal_id: str, decision: str, *, store_key: str) -> ActionResult:
        """Decide a proposal waiting on disk (as `/review` or `_harness/review`)."""
        from agent_core.refinement.pending_files import PendingFiles
        from agent_core.refinement.surface import HarnessStoreError

        if decision not in DECISIONS:
            raise PanelQueryError(f"decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
        directory = self.data.root_of(store_key) / "pending"
        files = PendingFiles(directory)
        proposer = proposer_of(directory, proposal_id)
        pending = files.load(proposal_id)
        if pending is None:
            raise PanelQueryError(
                f"no proposal {proposal_id!r} waits for review in the {store_key} store", 404
            )
        acting = self._acting(store_key, proposer=proposer)
        if acting is not None:
            verb = {"apply": "Applied", "reject": "Rejected", "reject_forever": "Rejected forever"}[decision]
            try:
                decided = self._routed(acting, lambda s: s.decide(proposal_id, decision))  # type: ignore[arg-type]
            except HarnessStoreError as exc:
                return ActionResult(False, f"Proposal {proposal_id} was not decided: {exc}")
            return results.decided_via_session(decided, f"{verb} proposal {proposal_id}", acting[0])
        from agent_core.refinement.surface import ReviewAlreadyDecided, ReviewNotFound

        local_key = self._local_key(store_key if store_key != GLOBAL else proposer)
        try:
            outcome: RefinementOutcome = self._serviced(
                local_key,
                proposer,
                lambda s: s.decide(proposal_id, decision),  # type: ignore[arg-type]
                check_as=proposer or store_key,
            )
        except (ReviewAlreadyDecided, ReviewNotFound):  # removing the file is the claim
            return ActionResult(False, f"Proposal {proposal_id} was already decided elsewhere.")
        if pending.held is not None:  # a cell's change to .continual-acp/: files, not a refinement
            return results.held_reviewed(proposal_id, outcome)
        return self._direct(store_key, results.reviewed(proposal_id, decision, outcome))

    # ------------------------------------------------------------ entries

    def _entry(self, store_key: str, kind: str, entry_id: str) -> tuple[StoreView, HarnessEntry]:
        view = self.data.view(store_key)
        with self.data._lock:
            view.sync()
        entry = view.store.load().get(kind, entry_id)
        if entry is None:
            raise PanelQueryError(f"no {kind} entry {entry_id!r} in the {store_key} store", 404)
        return view, entry

    def verify(self, store_key: str, kind: str, entry_id: str) -> ActionResult:
        """Mark an entry verified: approve, in review, the refinement that last wrote it."""
        view, entry = self._entry(store_key, kind, entry_id)
        if entry.trust == "verified":
            return ActionResult(False, f"{kind} {entry_id} is already verified.")
        writer = view.last_writer.get((kind, entry_id))
        if writer is None:
            return ActionResult(False, f"No refinement in the history wrote {kind} {entry_id}.")
        acting = self._acting(store_key)
        if acting is not None:
            decided = self._routed(acting, lambda s: s.decide(writer, "apply", edit_ids=[entry_id]))
            return results.decided_via_session(decided, f"Verified {kind} {entry_id}", acting[0])
        outcome: RefinementOutcome = self._serviced(
            self._local_key(store_key),
            view.session_id,
            lambda s: s.decide(writer, "apply", edit_ids=[entry_id]),
        )
        return self._direct(store_key, results.verified(kind, entry_id, outcome))

    def delete(self, store_key: str, kind: str, entry_id: str) -> ActionResult:
        """Delete an entry with a user-written refinement (it can be rolled back like any other)."""
        from agent_core import Proposal

        view = self.data.view(store_key)
        proposal = Proposal.model_validate(
            {
                "summary": f"Delete {kind} {entry_id} (review panel)",
                "rationale": "Deleted by the user in the review panel.",
                "edits": [{"action": "delete", "kind": kind, "id": entry_id}],
            }
        )
        acting = self._acting(store_key)
        via: str | None = None
        scope: Scope = "global" if store_key == GLOBAL else "local"
        if acting is not None:
            result = self._routed(acting, lambda s: s.apply_user(proposal, scope=scope))
            via = acting[0]
        else:
            result = self._serviced(
                self._local_key(view.key), view.session_id, lambda s: s.apply_user(proposal, scope=scope)
            )
        done = results.deleted(kind, entry_id, result, via=via)
        return done if via is not None else self._direct(store_key, done)

    def promote_targets(self, store_key: str) -> list[str]:
        """Where a local entry of `store_key` can be promoted to from here (none for a global one)."""
        if store_key == GLOBAL:
            return []
        acting = self._acting(store_key)
        if acting is None:
            return [GLOBAL]  # the standalone panel knows no project store
        return [scope for scope in acting[1].scopes() if scope in PROMOTION_TARGETS]

    def promote(self, store_key: str, kind: str, entry_id: str, target: str) -> ActionResult:
        """Move a local entry up to `target` (as `/promote <kind>/<id> <target>`): two refinements."""
        from agent_core.trust.promotion import PromotionError

        if store_key == GLOBAL:
            raise PanelQueryError("only a session's local entry can be promoted")
        if target not in PROMOTION_TARGETS:
            raise PanelQueryError(f"target must be project or global, not {target!r}")
        self._entry(store_key, kind, entry_id)
        if target not in self.promote_targets(store_key):
            raise PanelQueryError(
                f"there is no {target} harness to promote to from here"
                + (
                    " (a project harness is reached through the session, open in this server)"
                    if target == "project"
                    else ""
                )
            )
        acting = self._acting(store_key)
        try:
            if acting is not None:
                done = self._routed(acting, lambda s: s.promote(entry_id, target, kind=kind))  # type: ignore[arg-type]
            else:
                done = self._serviced(
                    self._local_key(store_key),
                    store_key,
                    lambda s: s.promote(entry_id, target, kind=kind),  # type: ignore[arg-type]
                    check_as=store_key,
                )
        except PromotionError as exc:
            return ActionResult(False, f"Not promoted: {exc}.")
        via = acting[0] if acting is not None else None
        result = results.promoted(kind, entry_id, target, done, via=via)
        return result if via is not None else self._direct(store_key, result)
