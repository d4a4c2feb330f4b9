"""`ProjectStore`: the harness of one repository, committed with its code (the `project` scope).

A `Store` (store.py: apply, rollback, reviews, rejections, history, as-of) over a
`RepositoryBackend` (repository_backend.py: the layout under `<repo>/.continual-acp/harness/`,
entry files, the project history, merge conflicts). `apply` only accepts `scope="project"`.

**When refinements meet in git.** An entry changed on both sides of a merge or rebase is a
*conflict*, never silently picked: it is left out of `load()`, refuses further edits, and is listed
by `conflicts()` with each side's version for `/review`; `resolve_conflict` writes the chosen side
as a new refinement, which ends the conflict. The history stays append-only throughout: both
sides' records are kept, the resolution is appended.
"""

from __future__ import annotations

from pathlib import Path

from harness_store.core import ApplyOptions, apply_proposal, edit_from
from harness_store.ids import new_refinement_id, utc_now
from harness_store.lock import DEFAULT_TIMEOUT
from harness_store.models import Edit, HarnessEntry, HarnessState, Proposal, RefinementResult
from harness_store.repository_backend import (
    ENTRIES_DIR,
    GITATTRIBUTES,
    GITIGNORE,
    HISTORY_FILE,
    LOCK_FILE,
    MSG_CONFLICTED,
    PROJECT_DIR,
    TOMBSTONES_FILE,
    ProjectConflict,
    RepositoryBackend,
    project_root,
)
from harness_store.store import Store

__all__ = [
    "ENTRIES_DIR",
    "GITATTRIBUTES",
    "GITIGNORE",
    "HISTORY_FILE",
    "LOCK_FILE",
    "MSG_CONFLICTED",
    "PROJECT_DIR",
    "TOMBSTONES_FILE",
    "ProjectConflict",
    "ProjectStore",
    "project_root",
]


class ProjectStore(Store):
    """The project scope's store for the repository at `repo`."""

    backend: RepositoryBackend

    def __init__(self, repo: Path | str, *, lock_timeout: float = DEFAULT_TIMEOUT) -> None:
        super().__init__(RepositoryBackend(repo, lock_timeout=lock_timeout))

    @property
    def repo(self) -> Path:
        return self.backend.repo

    @property
    def entries_dir(self) -> Path:
        return self.backend.entries_dir

    @property
    def tombstones_path(self) -> Path:
        return self.backend.tombstones_path

    def conflicts(self) -> list[ProjectConflict]:
        """Entries changed on both sides of a git merge or rebase, for `/review` (sorted)."""
        with self._mutex:
            return self.backend.conflicts()

    def rule_errors(
        self, proposal: Proposal, *, source: str | None, trigger: str = "auto"
    ) -> list[str | None]:
        """Per edit, why it breaks the project rule (project_rules.py: a refinement-written edit
        must be a fact about this repository), or None. `source` None: the trigger's default."""
        return self.backend.rule_errors(proposal, source=source, trigger=trigger)

    def resolve_conflict(
        self, kind: str, entry_id: str, choice: int, *, session_id: str | None = None
    ) -> RefinementResult:
        """End a conflict by writing side `choice` of `conflicts()` (a refinement, trigger `user`).

        Raises KeyError when the entry is not in conflict, IndexError for a side that does not exist.
        """
        with self._mutex, self.backend.locked():
            state, conflicts = self.backend.conflicted_snapshot_locked()
            conflict = next((c for c in conflicts if c.kind == kind and c.entry_id == entry_id), None)
            if conflict is None:
                raise KeyError(f"{kind} {entry_id!r} is not in conflict")
            chosen = conflict.candidates[choice]
            reason = f"resolve merge conflict ({conflict.reason})"
            if chosen is None:
                edit = Edit(action="delete", kind=kind, id=entry_id, reason=reason)
                restores: list[HarnessEntry | None] = [None]
                # The conflicted entry is not in the state: a delete must see the file to remove it.
                before = _after_any(conflict)
                if before is not None:
                    state = HarnessState.build(
                        {**state.entries, kind: {**state.entries.get(kind, {}), entry_id: before}},
                        state.tombstones,
                        head=state.head,
                    )
            else:
                edit = edit_from(chosen, "create", reason, entry_id=entry_id)
                restores = [chosen]
            proposal = Proposal(
                summary=f"Resolve merge conflict of {kind} {entry_id}",
                rationale=conflict.reason,
                edits=[edit],
            )
            opts = ApplyOptions(
                refinement_id=new_refinement_id(),
                now=utc_now(),
                scope="project",
                trigger="user",
                session_id=session_id,
                restores=restores,
            )
            new_state, result = apply_proposal(state, proposal, opts)
            self.backend.commit_locked(new_state, new_state, result)
            return result


def _after_any(conflict: ProjectConflict) -> HarnessEntry | None:
    return next((c for c in conflict.candidates if c is not None), None)
