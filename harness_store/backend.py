"""`Backend`: the few operations a place the harness is kept on disk must provide.

`Store` (store.py) holds every harness rule once — apply, rollback, review, reject, tombstones,
the as-of view, the "later writer" of a conflicting entry — and asks its backend only how to read
and write. Two backends exist: the state file of one scope with its history and recovery
(`StateFileBackend`, statefile_backend.py) and a repository's entry files with their project
history and merge conflicts (`RepositoryBackend`, repository_backend.py).

The split follows where the two differ: where the current state comes from (a state file rolled
forward from its history, or entry files checked against theirs), how a commit lands (history
then state, or history then entry files), how tombstones are made durable (a history record of
their own, or `tombstones.jsonl` itself), and which entries refuse writes (merge conflicts).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from harness_store.models import HarnessState, Proposal, RefinementResult, Tombstone


@dataclass(frozen=True)
class Snapshot:
    """The state a write starts from (read with the store lock held, repaired when it was behind),
    and the entries that refuse any write, `(kind, id) -> why`."""

    state: HarnessState
    blocked: Mapping[tuple[str, str], str] = field(default_factory=dict)


class Backend(ABC):
    """Where one store keeps its entries, history and tombstones (see the module docstring).

    Every method except `read` may raise `HarnessStoreError`; methods named `*_locked` run with
    the store lock (`locked()`) held by the caller.
    """

    root: Path
    history_path: Path
    lock_path: Path
    lock_timeout: float

    @property
    @abstractmethod
    def default_scope(self) -> str:
        """The scope of records this backend writes when the caller names none."""

    @property
    def follow_up_scope(self) -> str | None:
        """The scope a rollback or review is recorded in; None: its target's scope."""
        return None

    @abstractmethod
    def check_scope(self, scope: str) -> None:
        """Raise ValueError for a scope `apply` may not write here."""

    # -- reading --------------------------------------------------------------------------------

    @abstractmethod
    def read(self) -> HarnessState:
        """The current state; never raises (a damaged file is served rebuilt or left out)."""

    @abstractmethod
    def history_count(self) -> int:
        """How many records the history holds."""

    @abstractmethod
    def history_records(self, start: int = 0, stop: int | None = None) -> Iterator[RefinementResult]:
        """History records `start`..`stop` in file order (oldest first)."""

    @abstractmethod
    def history_position(self, refinement_id: str) -> int | None:
        """The index of a record in the history, or None."""

    @abstractmethod
    def history_get(self, refinement_id: str) -> RefinementResult | None:
        """The history record with this id, or None."""

    @abstractmethod
    def view_path(self, kind: str, entry_id: str, *, scope: str | None = None) -> Path:
        """The readable file of an entry an editor diff points at."""

    # -- writing --------------------------------------------------------------------------------

    @abstractmethod
    def locked(self) -> AbstractContextManager[object]:
        """Create the directory if needed and hold the cross-process store lock."""

    @abstractmethod
    def snapshot_locked(self) -> Snapshot:
        """The state a write starts from (files repaired when a writer died mid-commit)."""

    def rule_errors(self, proposal: Proposal, *, source: str | None, trigger: str) -> list[str | None]:
        """Per edit, why this backend refuses it whatever the state (None: allowed)."""
        return [None] * len(proposal.edits)

    @abstractmethod
    def commit_locked(self, before: HarnessState, after: HarnessState, result: RefinementResult) -> None:
        """Make `result` (and the state `after` it) durable: the history first, then the state."""

    @abstractmethod
    def tombstones_locked(self) -> list[Tombstone]:
        """The tombstones a rejection or lift starts from."""

    @abstractmethod
    def save_tombstones_locked(
        self,
        tombstones: list[Tombstone],
        *,
        summary: str,
        tombstoned: Sequence[Tombstone] = (),
        lifted: Sequence[Tombstone] = (),
        trigger: str = "user",
    ) -> None:
        """Make a rejection (`tombstoned`) or a lift (`lifted`) durable; `tombstones` is the
        whole new list, `summary` the one-line account a history record of it would carry."""
