"""`HarnessSurface`: the one typed answer to every harness question a session is asked.

The session's stores (its own local harness, the shared global one and, in a repository, the
project one), its `HarnessService` and its refinement jobs seen as one thing: the one public face of
the harness. Slash commands, the `_harness/*` methods, the review panel, the CLI and the kernel's
`refine.*`/`harness.*` host ops only call this and format what it returns, so each question has one
answer: which store holds an id (`find`), history merged and ordered one way (`history`), the state
of a scope (`state`), one search semantics (`search`), what `/undo` undoes (`latest_undoable`),
rollback (with "already rolled back by"), review decisions, and one ordered event stream
(`subscribe`). Everything that changes the harness goes to the session's `HarnessService`
(service.py), which holds the rules, shows each change as a card and counts it in quiescence; the
surface awaits the cards' delivery. Errors are the store's typed errors, never `KeyError`.

A session's surface is built over its coordinator (`HarnessSurface.of`, attach.py); a review panel
beside no running server builds one over the stores it touches (`HarnessSurface.for_stores`): the
same rules, but no session behind it -- nothing to refine, its cards go nowhere, so nothing waits
for their delivery.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import anyio

from agent_core.bus import EventBus, Subscription
from agent_core.events import RefinementReported
from agent_core.refinement.records import (
    Found,
    PendingReview,
    QuiescenceChanged,
    RefinementOutcome,
    ReviewChoice,
    ReviewDecided,
    ReviewRequested,
    RollbackOutcome,
    Scope,
    Trigger,
    UnknownRefinement,
)
from agent_core.refinement.reporting import preview_edits
from agent_core.trust.promotion import (
    Promotion,
    PromotionError,
)
from harness_store import (
    KINDS,
    HarnessEntry,
    HarnessState,
    HarnessStoreError,
    Proposal,
    RefinementNotFound,
    RefinementResult,
    render_overview,
)
from harness_store.errors import ReviewAlreadyDecided, ReviewNotFound
from harness_store.neutralize import flag as neutralized_flag
from harness_store.neutralize import neutralized
from harness_store.project import ProjectConflict

if TYPE_CHECKING:
    from pathlib import Path

    from agent_core.refinement.coordinator import RefinementCoordinator
    from agent_core.refinement.curation import Curation
    from agent_core.refinement.curation_model import CuratorModel
    from agent_core.refinement.quiescence import Quiescence
    from agent_core.refinement.service import HarnessService
    from harness_store import HarnessStore, Store
    from harness_store.verify import PreApplyVerifier

log = logging.getLogger(__name__)

StateScope = Literal["local", "global", "project", "merged"]
HarnessEvent = RefinementReported | ReviewRequested | ReviewDecided | QuiescenceChanged
Subscriber = Callable[[HarnessEvent], Awaitable[None]]
Record = Callable[[RefinementReported], None]

_WORD = re.compile(r"[a-z0-9]+")
DEFAULT_SEARCH_LIMIT = 20


@dataclass(frozen=True)
class HistoryPage:
    """Refinements of both stores, newest first; `next_cursor` is the last id when more follow."""

    records: tuple[RefinementResult, ...]
    next_cursor: str | None = None


@dataclass(frozen=True)
class SearchHit:
    """One entry a search found, under its merged-state key, with its score (higher first)."""

    key: str
    entry: HarnessEntry
    score: float


@dataclass(frozen=True)
class HarnessStatus:
    """Quiescence and review counts as published (`_harness/status`, `refine.status()`)."""

    quiescent: bool
    pending: int
    in_flight: int
    awaiting_review: int
    last_refinement_id: str | None
    last: RefinementOutcome | None


def visible_entries(state: HarnessState, kind: str | None = None) -> list[tuple[str, HarnessEntry]]:
    """Entries by kind then key, without rejected ones (they never come back to the agent)."""
    kinds = [kind] if kind else list(KINDS)
    return [
        (key, entry)
        for k in kinds
        for key, entry in sorted(state.entries.get(k, {}).items())
        if entry.trust != "rejected"
    ]


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _history_key(record: RefinementResult) -> tuple[str, str]:
    return (record.created_at, record.id)


class HarnessSurface:
    """A harness's one public face: its stores, through its `HarnessService` and, for a session,
    its refinement jobs (`refinement`: the coordinator; None for a surface with no session)."""

    def __init__(
        self,
        service: HarnessService,
        *,
        refinement: RefinementCoordinator | None = None,
        record: Record | None = None,
    ) -> None:
        self._service = service
        self._refinement = refinement
        self._record = record
        # the curator's model pass (curate_model_pass; curation_model.py); None: deterministic only
        self.curator_model: CuratorModel | None = None
        self._bus = EventBus(f"the harness of session {service.session_id}")
        service.outbox.add_listener(self._deliver)

    @classmethod
    def of(cls, coordinator: RefinementCoordinator, *, record: Record | None = None) -> HarnessSurface:
        """A session's surface over its coordinator (its service and jobs)."""
        return cls(coordinator.service, refinement=coordinator, record=record)

    @classmethod
    def for_stores(
        cls,
        local: HarnessStore,
        global_: HarnessStore,
        *,
        session_id: str | None,
        evidence: Callable[[], set[str] | None] | None = None,
        skill_verifier: Callable[[str], PreApplyVerifier] | None = None,
    ) -> HarnessSurface:
        """A surface over two stores with no session behind it (a review panel beside no running
        server): nothing is reviewed by policy (the caller is the reviewer), its cards go nowhere.
        Build and use it inside one event loop (its outbox belongs to that loop)."""
        from agent_core.refinement.service import HarnessService

        service = HarnessService.for_stores(
            local, global_, session_id=session_id, evidence=evidence, skill_verifier=skill_verifier
        )
        return cls(service)

    @property
    def session_id(self) -> str | None:
        return self._service.session_id

    def _session(self) -> RefinementCoordinator:
        if self._refinement is None:
            raise RuntimeError("this harness has no session behind it: there is nothing to refine")
        return self._refinement

    def _store(self, scope: Scope) -> Store:
        return self._service.scopes.store(scope)

    def _stores(self) -> tuple[tuple[Scope, Store], ...]:
        return tuple(self._service.scopes.each())

    @property
    def has_project(self) -> bool:
        """True when the session's cwd is in a git repository with a project harness."""
        return self._service.scopes.project is not None

    # ------------------------------------------------------------ the event stream

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """`subscriber` gets every event, in order, awaited before quiescence waiters wake;
        returns the function that unsubscribes it."""
        subscriptions: list[Subscription[Any]] = [
            self._bus.subscribe(RefinementReported, subscriber),
            self._bus.subscribe(ReviewRequested, subscriber),
            self._bus.subscribe(ReviewDecided, subscriber),
            self._bus.subscribe(QuiescenceChanged, subscriber),
        ]

        def unsubscribe() -> None:
            for subscription in subscriptions:
                subscription.cancel()

        return unsubscribe

    async def _deliver(self, event: HarnessEvent) -> None:
        # The transcript first: it is the record (`session/load` replays the cards), client or not.
        if self._record is not None and isinstance(event, RefinementReported):
            try:
                self._record(event)
            except Exception:
                log.exception("recording refinement %s in the transcript failed", event.refinement_id)
        await self._bus.publish(event)

    async def flushed(self, timeout: float = 30.0) -> bool:
        """Wait until every event emitted so far reached the subscribers (False at once with no
        session behind the surface: nobody delivers its events)."""
        if self._refinement is None:
            return False
        return await self._service.outbox.flushed(timeout)

    def quiescence(self) -> Quiescence:
        """The one settled rule now: refinement idle and no child running (`HarnessService`)."""
        return self._service.quiescence()

    async def wait_quiescent(self, timeout: float | None = None) -> bool:
        """Wait until settled (and the settling transition was delivered); False on timeout."""
        return await self._service.outbox.wait_quiescent(timeout)

    def status(self) -> HarnessStatus:
        jobs = self._service.jobs
        return HarnessStatus(
            quiescent=jobs.outbox.quiescent,
            pending=jobs.pending,
            in_flight=jobs.in_flight,
            awaiting_review=len(self._service.pending.refresh()),
            last_refinement_id=jobs.last_refinement_id,
            last=self._refinement.pipeline.last if self._refinement is not None else None,
        )

    # ------------------------------------------------------------ reading

    def _find_sync(self, refinement_id: str) -> Found:
        found = self._service.locate(refinement_id)
        if found is None:
            raise UnknownRefinement(refinement_id)
        return found

    async def find(self, refinement_id: str) -> Found:
        """The refinement and its scope; `UnknownRefinement` when neither store has it."""
        return await anyio.to_thread.run_sync(self._find_sync, refinement_id)

    def _all_history(self) -> list[RefinementResult]:
        records = [r for _, store in self._stores() for r in store.history(None)]
        records.sort(key=_history_key, reverse=True)
        return records

    async def history(self, limit: int | None = None, cursor: str | None = None) -> HistoryPage:
        """Both stores' refinements newest first (by creation time, then id), `limit` of them,
        starting after `cursor`; `UnknownRefinement` when the cursor names no refinement."""
        records = await anyio.to_thread.run_sync(self._all_history)
        if cursor is not None:
            ids = [r.id for r in records]
            if cursor not in ids:
                raise UnknownRefinement(cursor, what="cursor")
            records = records[ids.index(cursor) + 1 :]
        if limit is None or len(records) <= limit:
            return HistoryPage(tuple(records))
        page = records[:limit]
        return HistoryPage(tuple(page), next_cursor=page[-1].id)

    def _state_sync(self, scope: StateScope, as_of: str | None) -> HarnessState:
        if as_of is not None:
            found = self._find_sync(as_of)
            state = self._store(found.scope).state_as_of(as_of)
            return HarnessState.build(state.entries, [], head=state.head)
        if scope == "merged":
            return self._service.scopes.merged()
        return self._store(scope).load()

    async def state(self, scope: StateScope = "merged", *, as_of: str | None = None) -> HarnessState:
        """The harness of one scope, or both merged; `as_of` a refinement id: the entries right
        after it (no tombstones). `UnknownRefinement` for an `as_of` neither store has."""
        return await anyio.to_thread.run_sync(self._state_sync, scope, as_of)

    async def search(
        self, query: str, *, kind: str | None = None, limit: int = DEFAULT_SEARCH_LIMIT
    ) -> list[SearchHit]:
        """Entries of the merged harness sharing words with `query`, best first.

        Score: query words found in the entry's id, title, path and content, plus half a point per
        word in the title; ties by key. Rejected entries are never found.
        """
        wanted = _words(query)
        state = await self.state("merged")
        hits: list[SearchHit] = []
        for key, entry in visible_entries(state, kind):
            found = len(wanted & _words(f"{entry.id} {entry.title} {entry.path} {entry.content}"))
            if found:
                hits.append(SearchHit(key, entry, found + 0.5 * len(wanted & _words(entry.title))))
        hits.sort(key=lambda hit: (-hit.score, hit.key))
        return hits[:limit]

    async def latest_undoable(self) -> RefinementResult | None:
        """What `/undo` rolls back: the newest applied refinement that is not a rollback and was
        not rolled back; None when there is none."""
        records = await anyio.to_thread.run_sync(self._all_history)
        undone = {r.rollback_of for r in records}
        for record in records:  # newest first
            if record.rollback_of is None and record.id not in undone and record.applied:
                return record
        return None

    def pending_reviews(self) -> list[PendingReview]:
        """Proposals waiting for a human decision, oldest first (this session's, every global one
        and this user's for the session's repository)."""
        return list(self._service.pending.refresh().values())

    def pending_review(self, proposal_id: str) -> PendingReview | None:
        return self._service.pending.refresh().get(proposal_id)

    def preview(self, pending: PendingReview) -> tuple[dict[str, Any], ...]:
        """The proposal's edits as diffs against its store as it is now (blocking: call in a thread)."""
        if pending.held is not None:  # a cell's change to .continual-acp/: its files, before -> after
            return tuple(
                {
                    "path": f.path,
                    "before": None if f.before is None else f.before.decode("utf-8", "replace"),
                    "after": f.diff() if f.too_large else (f.after or b"").decode("utf-8", "replace"),
                    "action": f.action,
                }
                for f in pending.held.files
            )
        state = self._store(pending.scope).load()
        return preview_edits(pending, state, view_path=self._service.view_path)

    # ------------------------------------------------------------ changing (all through the service)

    def conflicts(self) -> list[ProjectConflict]:
        """The project store's git-merge conflicts (`ProjectConflict`s; none without a project).
        Blocking: call it in a worker thread."""
        project = self._service.scopes.project
        return list(project.conflicts()) if project is not None else []

    async def resolve_conflict(self, kind: str, entry_id: str, choice: int) -> RefinementResult:
        """End a project conflict with side `choice` (a reported refinement, trigger `user`).

        `KeyError` when the entry is not in conflict, `IndexError` for a side that does not exist."""
        result = await self._service.resolve_conflict(kind, entry_id, choice)
        await self.flushed()
        return result

    async def rollback(self, refinement_id: str, *, force: bool = False) -> RollbackOutcome:
        """Roll back a refinement of any store (`HarnessService.rollback`: a no-op when already
        undone, a promotion's partner with it); its card is delivered before this returns."""
        outcome = await self._service.rollback(refinement_id, force=force)
        if outcome.result is not None:
            await self.flushed()
        return outcome

    async def promote(self, entry_id: str, target: Scope, *, kind: str | None = None) -> Promotion:
        """`/promote`: move a local entry to `target` (`HarnessService.promote`); its cards are
        delivered before this returns. To project the create waits as a pending review (the
        returned `proposal_id`; the caller asks it)."""
        promotion = await self._service.promote(entry_id, target, kind=kind)
        await self.flushed()
        return promotion

    async def curate(self, scope: Scope, *, home: Path, apply: bool, trigger: Trigger = "user") -> Curation:
        """`/curate`: the curator's pass over `scope` (a dry run unless `apply`; curation.py); an
        applied pass's card is delivered before this returns."""
        from agent_core.refinement.curation import curate

        done = await curate(
            self._service, scope, home=home, apply=apply, trigger=trigger, model=self.curator_model
        )
        if done.result is not None:
            await self.flushed()
        return done

    async def restore_archived(self, scope: Scope, kind: str, entry_id: str) -> RefinementResult | None:
        """`/curate restore`: bring one archived entry back (None when it is not archived)."""
        from agent_core.refinement.curation import restore

        result = await restore(self._service, scope, kind, entry_id)
        if result is not None:
            await self.flushed()
        return result

    async def apply_user(self, proposal: Proposal, *, scope: Scope) -> RefinementResult:
        """A write a person asked for outside a turn (a review panel's delete): applied at once
        (no review), reported as a card and counted in quiescence; its card is delivered before
        this returns. Validation and tombstones still apply (a refused write is a result)."""
        result = await self._service.apply_user(proposal, scope=scope)
        await self.flushed()
        return result

    def scopes(self) -> tuple[Scope, ...]:
        """The scopes this session has stores for, narrowest first."""
        return tuple(scope for scope, _ in self._stores())

    async def decide(
        self,
        proposal_id: str,
        choice: ReviewChoice,
        *,
        edit_ids: Sequence[str] | None = None,
        edited: Mapping[str, str] | None = None,
        reason: str | None = None,
    ) -> RefinementOutcome:
        """Decide a pending review (or review applied candidates by refinement id); the cards and
        a `ReviewDecided` are delivered before this returns.

        `ReviewNotFound` when nothing waits under the id; `ReviewAlreadyDecided` when another
        session decided it meanwhile.
        """
        outcome = await self._service.decide(
            proposal_id, choice, edit_ids=edit_ids, edited=edited, reason=reason
        )
        await self.flushed()
        return outcome

    async def refine_now(
        self, *, instructions: str | None = None, scope: Scope = "local"
    ) -> RefinementOutcome:
        """`/refine`: plan now (no review gate) and apply or hold for review; cards delivered first."""
        outcome = await self._session().refine_now(instructions=instructions, scope=scope)
        await self.flushed()
        return outcome

    def schedule(self, instructions: str | None, scope: Scope) -> dict[str, Any]:
        """`refine.run()` from a cell: held until the turn ends."""
        return self._session().schedule_from_cell(instructions, scope)

    async def current_entry(self, scope: Scope, kind: str, entry_id: str) -> HarnessEntry | None:
        """One entry of one store as it is now (None if absent)."""
        state = await anyio.to_thread.run_sync(self._store(scope).load)
        return state.get(kind, entry_id)

    async def write(self, proposal: Proposal, *, scope: Scope) -> RefinementOutcome:
        """A harness write from a cell: the review policy decides like for any refinement."""
        return await self._service.submit(
            proposal, scope=scope, trigger="model", baseline=None, source="agent"
        )


# The store's types and errors the surface answers with, for callers that may not import
# harness_store themselves (acp_server reaches the store only through agent_core).
__all__ = [
    "DEFAULT_SEARCH_LIMIT",
    "KINDS",
    "Found",
    "HarnessEntry",
    "HarnessEvent",
    "HarnessState",
    "HarnessStatus",
    "HarnessStoreError",
    "HarnessSurface",
    "HistoryPage",
    "ProjectConflict",
    "Promotion",
    "PromotionError",
    "RefinementNotFound",
    "RefinementResult",
    "ReviewAlreadyDecided",
    "ReviewNotFound",
    "RollbackOutcome",
    "SearchHit",
    "StateScope",
    "Subscriber",
    "UnknownRefinement",
    "neutralized",
    "neutralized_flag",
    "render_overview",
    "visible_entries",
]
