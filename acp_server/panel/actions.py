"""What the panel does to the harness: routing its actions to the harness service.

The panel holds no review or rollback rule. Inside a running ACP server (`/harness ui`, a
`ServerLink`), an action on a store an open session of that server uses goes through that
session's `HarnessSurface` -- the very calls the slash commands make -- so the editor shows the
same refinement card and the session's quiescence counts the work (link.py says which session acts
for which store). Otherwise (the standalone `harness ui`, or a store no session here has open) the
action runs on a `HarnessService` built over the stores it touches (`HarnessService.for_stores`:
the proposing session's local store and the global one), so the history records it exactly as a
session would; a session open in another server reads the change at its next read of the store,
and the answer names those sessions (README, "Open sessions and the standalone panel"):

* rollback -> `HarnessService.rollback` (`/rollback`)
* review   -> `HarnessService.decide` (`/review`), with the proposing session's transcript as the
              evidence and the session's skill check
* verify   -> `HarnessService.decide` on the refinement that last wrote the entry, for that entry
* delete   -> `HarnessService.apply_user` with one delete edit
* promote  -> `HarnessService.promote` (`/promote`)

This module only says which service acts and turns its answer into what the page shows. They
block (file locks, the hop to the server loop, a short event loop of their own): call them from a
worker thread.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from acp_server.panel.sessions import describe_sessions, session_cwd
from acp_server.panel.sources import GLOBAL, PanelData, PanelQueryError, StoreView, proposer_of

if TYPE_CHECKING:
    from acp_server.panel.link import ServerLink
    from agent_core.refinement.records import RefinementOutcome, RollbackOutcome, Scope
    from agent_core.refinement.service import HarnessService
    from agent_core.refinement.surface import HarnessSurface

T = TypeVar("T")

DECISIONS = ("apply", "reject", "reject_forever")
# A store's pre-apply skill verifier (harness_store.verify.PreApplyVerifier: entry -> Verdict).
Verifier = Callable[[Any], Any]
PROMOTION_TARGETS = ("project", "global")


@dataclass
class ActionResult:
    """The outcome the page shows: ok, the new refinement id (if any), and what was refused."""

    ok: bool
    message: str
    refinement_id: str | None = None
    errors: list[str] = field(default_factory=list)
    conflict: bool = False  # a rollback refused because entries changed since (force may override)
    tombstones: list[str] = field(default_factory=list)
    refinement_ids: list[str] = field(default_factory=list)  # every record the action wrote
    via_session: str | None = None  # the open session whose harness made the change (its card)
    open_elsewhere: list[str] = field(default_factory=list)  # open in another server: no card there

    def to_json(self) -> dict[str, Any]:
        ids = self.refinement_ids or ([self.refinement_id] if self.refinement_id else [])
        return {
            "ok": self.ok,
            "message": self.message,
            "refinement_id": self.refinement_id,
            "refinement_ids": ids,
            "errors": self.errors,
            "conflict": self.conflict,
            "tombstones": self.tombstones,
            "via_session": self.via_session,
            "open_elsewhere": self.open_elsewhere,
        }


def _outcome_result(outcome: Any, done: str, session_id: str) -> ActionResult:
    """A `RefinementOutcome` of a decision made through a session's surface, as the page shows it."""
    rid = outcome.refinement_id
    if outcome.status == "applied":
        ids = list(outcome.refinement_ids)
        return ActionResult(
            True, f"{done}: refinement {rid}.", rid, refinement_ids=ids, via_session=session_id
        )
    if outcome.status == "rejected":
        return ActionResult(True, f"{done} ({outcome.error}).", via_session=session_id)
    errors = [outcome.error] if outcome.error else []
    recorded = f" (recorded as {rid})" if rid else ""
    return ActionResult(False, f"Not done{recorded}.", rid, errors, via_session=session_id)


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
        verifier_factory: Callable[[str, Path], Verifier] | None = None,
    ) -> None:
        self.data = data
        self.link = link
        self._verifier_factory = verifier_factory

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
        if not result.ok:
            return result
        result.open_elsewhere = self._elsewhere(store_key)
        if result.open_elsewhere:
            result.message += (
                f" Made by the review panel: open session(s) {', '.join(result.open_elsewhere)} in "
                "another server read the change at their next step (no card is shown there)."
            )
        return result

    def _skill_verifier(self, scope: str, session_id: str) -> Verifier:
        """The skill check for a direct write into `scope` on behalf of `session_id`: the one a
        session runs (`verifier_for`), in the session's working directory (its imports resolve
        there). A check that cannot be set up refuses every skill, saying why (memories and other
        kinds are not checked)."""
        from agent_core.trust.skill_check import refusing_verifier

        cwd = session_cwd(self.data.home, session_id)
        if cwd is None or not cwd.is_dir():
            return refusing_verifier(
                f"the skill check needs the session's working directory ({cwd or 'not recorded'}), which is not there"
            )
        try:
            if self._verifier_factory is None:
                from agent_core.trust.skill_check import cli_verifier_factory

                self._verifier_factory = cli_verifier_factory()
            return self._verifier_factory(scope, cwd)
        except Exception as exc:  # a bad config.toml: no skill goes in unchecked
            return refusing_verifier(f"the skill check could not be set up: {exc}")

    def _routed(self, acting: tuple[str, HarnessSurface], call: Callable[[HarnessSurface], Any]) -> Any:
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
        call: Callable[[HarnessService], Awaitable[T]],
        *,
        check_as: str | None = None,
    ) -> T:
        """Run `call` on a harness service over the stores of `local_key` (a session; the global
        store stands in when None) and the global one, acting for `session_id`: its transcript is
        the evidence and, with `check_as`, its skill check runs in that session's cwd."""
        from agent_core.refinement.service import HarnessService

        glob = self.data.view(GLOBAL).store
        local = self.data.view(local_key).store if local_key is not None else glob
        evidence = self.data.evidence.message_ids

        def known() -> set[str] | None:
            return evidence(session_id) if session_id is not None else None

        def verifier(scope: str) -> Verifier:
            assert check_as is not None
            return self._skill_verifier(scope, check_as)

        async def run() -> T:
            service = HarnessService.for_stores(
                local,
                glob,
                session_id=session_id,
                evidence=known,
                skill_verifier=verifier if check_as is not None else None,
            )
            return await call(service)

        return anyio.run(run)

    # ------------------------------------------------------------ rollback

    def rollback(self, refinement_id: str, *, force: bool = False) -> ActionResult:
        """Roll back a refinement of any store (as `/rollback <id> [--force]`)."""
        view, record = self.data.find_refinement(refinement_id)
        proposer = getattr(record, "session_id", None)
        # A global record made by a session (a promotion's create) is best undone by that session.
        acting = self._acting(view.key, proposer=proposer)
        if acting is not None:
            outcome: RollbackOutcome = self._routed(acting, lambda s: s.rollback(refinement_id, force=force))
            return self._rolled_back(refinement_id, outcome, force, via=acting[0])
        local_key = self._local_key(view.key if view.key != GLOBAL else proposer)
        outcome = self._serviced(local_key, view.session_id, lambda s: s.rollback(refinement_id, force=force))
        done = self._rolled_back(refinement_id, outcome, force)
        return self._direct(view.key, done) if done.ok else done

    def _rolled_back(
        self, refinement_id: str, outcome: RollbackOutcome, force: bool, *, via: str | None = None
    ) -> ActionResult:
        if outcome.rolled_back_by is not None:  # answered before any write: no record for a no-op
            return ActionResult(
                False, f"Refinement {refinement_id} was already rolled back by {outcome.rolled_back_by}."
            )
        result = outcome.result
        assert result is not None
        if outcome.refused:
            return self._refused_rollback(refinement_id, result, force)
        ids = [result.id, *([outcome.partner_id] if outcome.partner_id else [])]
        text = f"Rolled back {refinement_id}: new refinement {result.id} ({result.scope})."
        if len(ids) > 1:
            text += f" The other half of its promotion was rolled back too ({ids[1]})."
        if result.errors:
            text += " Some edits were not rolled back."
        return ActionResult(True, text, result.id, list(result.errors), refinement_ids=ids, via_session=via)

    def _refused_rollback(self, refinement_id: str, result: Any, force: bool) -> ActionResult:
        errors = list(result.errors)
        conflict = any("entry changed since refinement" in e for e in errors)
        hint = " Confirm with force to override." if conflict and not force else ""
        return ActionResult(
            False,
            f"Rollback of {refinement_id} was refused (recorded as {result.id}).{hint}",
            refinement_id=result.id,
            errors=errors,
            conflict=conflict,
        )

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
            return _outcome_result(decided, f"{verb} proposal {proposal_id}", acting[0])
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
            if outcome.status == "rejected":
                return ActionResult(True, f"Rejected proposal {proposal_id}: the files stay as they were.")
            if outcome.status != "applied":
                return ActionResult(
                    False, f"Proposal {proposal_id} was not fully applied.", None, list(outcome.errors)
                )
            return ActionResult(True, f"Applied proposal {proposal_id}: the cell's change is written back.")
        if outcome.status == "rejected":
            ids = list(outcome.tombstones)
            return self._direct(
                store_key,
                ActionResult(
                    True,
                    f"Rejected proposal {proposal_id}"
                    + (" forever" if decision == "reject_forever" else "")
                    + (f" (tombstones {', '.join(ids)})." if ids else "."),
                    tombstones=ids,
                ),
            )
        rid, errors = outcome.refinement_id, list(outcome.errors)
        if outcome.status != "applied":
            return ActionResult(
                False, f"Proposal {proposal_id} was refused (recorded as {rid}).", rid, errors
            )
        return self._direct(
            store_key,
            ActionResult(
                True,
                f"Applied proposal {proposal_id}: refinement {rid}.",
                rid,
                errors,
                refinement_ids=list(outcome.refinement_ids),
            ),
        )

    # ------------------------------------------------------------ entries

    def _entry(self, store_key: str, kind: str, entry_id: str) -> tuple[StoreView, Any]:
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
            return _outcome_result(decided, f"Verified {kind} {entry_id}", acting[0])
        outcome: RefinementOutcome = self._serviced(
            self._local_key(store_key),
            view.session_id,
            lambda s: s.decide(writer, "apply", edit_ids=[entry_id]),
        )
        rid = outcome.refinement_id
        if outcome.status != "applied":
            return ActionResult(
                False, f"{kind} {entry_id} was not verified (recorded as {rid}).", rid, list(outcome.errors)
            )
        return self._direct(
            store_key, ActionResult(True, f"Verified {kind} {entry_id}: refinement {rid}.", rid)
        )

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
        if not result.applied:
            return ActionResult(
                False,
                f"{kind} {entry_id} was not deleted (recorded as {result.id}).",
                result.id,
                list(result.errors),
            )
        done = ActionResult(
            True, f"Deleted {kind} {entry_id}: refinement {result.id}.", result.id, via_session=via
        )
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
        if not done.created.applied:
            return ActionResult(
                False,
                f"Could not promote {kind} {entry_id} to {target} (recorded as {done.created.id}); the local entry is unchanged.",
                done.created.id,
                list(done.created.errors),
                via_session=via,
            )
        ids = [done.created.id]
        text = f"Promoted {kind} {entry_id} to the {target} harness: refinement {done.created.id}."
        errors: list[str] = []
        if done.removed is not None and done.removed.applied:
            ids.append(done.removed.id)
            text += f" The local copy was removed: refinement {done.removed.id}."
        else:
            errors = list(done.removed.errors) if done.removed is not None else []
            text += " The local copy is still there."
        result = ActionResult(True, text, done.created.id, errors, refinement_ids=ids, via_session=via)
        return result if via is not None else self._direct(store_key, result)
