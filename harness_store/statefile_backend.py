"""`StateFileBackend`: one scope's harness in a state file, written ahead by its history.

Every read-modify-write runs under the store lock and re-reads the state inside it. The write
order is history first, then state: a crash between the two leaves a history record the state does
not include yet, and the next reader rolls the state forward from the history (write-ahead log).
A state file that cannot be trusted is rebuilt from the history (recovery.py).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

from harness_store.backend import Backend, Snapshot
from harness_store.core import replay
from harness_store.errors import HarnessStoreError
from harness_store.history import HistoryLog
from harness_store.ids import new_refinement_id, utc_now
from harness_store.lock import DEFAULT_TIMEOUT, StoreLock, held_elsewhere
from harness_store.models import HarnessState, RefinementResult, Tombstone
from harness_store.paths import HISTORY_FILE, LOCK_FILE, STATE_FILE, ensure_dir
from harness_store.recovery import rebuild_state, replay_tombstones, set_aside
from harness_store.statefile import load_state, peek_token, remove_stale_temps, save_state
from harness_store.views import remove_view, view_path, write_view

log = logging.getLogger("harness_store")


class StateFileBackend(Backend):
    """The store of one scope, rooted at `root` (`<home>/harness` or `<home>/sessions/<id>/harness`)."""

    def __init__(self, root: Path | str, *, lock_timeout: float = DEFAULT_TIMEOUT) -> None:
        self.root = Path(root)
        self.state_path = self.root / STATE_FILE
        self.history_path = self.root / HISTORY_FILE
        self.lock_path = self.root / LOCK_FILE
        self.lock_timeout = lock_timeout
        self._history = HistoryLog(self.history_path)
        # (file save token, last history id) -> state: lets repeated reads skip parsing and replay.
        self._cache_key: tuple[str | None, str | None] | None = None
        self._cache: HarnessState | None = None
        self._file_token: str | None = None
        self._file_state: HarnessState | None = None
        self._file_damaged = False
        # True while this object holds the store lock (its reads are then never mid-commit).
        self._writing = False

    @property
    def default_scope(self) -> str:
        """`local` for a session's store (`.../sessions/<id>/harness`), else `global`."""
        parent = self.root.parent.parent
        return "local" if self.root.name == "harness" and parent.name == "sessions" else "global"

    def check_scope(self, scope: str) -> None:
        if scope not in ("local", "global"):
            raise ValueError(f"scope must be 'local' or 'global', not {scope!r}")

    # -- reading --------------------------------------------------------------------------------

    def read(self) -> HarnessState:
        token = peek_token(self.state_path)
        last = self._history.last_id()
        if self._cache is not None and token is not None and self._cache_key == (token, last):
            return self._cache
        if token is None or token != self._file_token or self._file_state is None:
            loaded = load_state(self.state_path)
            if loaded.damaged:
                self._file_token, self._file_state, self._file_damaged = None, None, True
                state = self._recover(loaded.state)
                self._cache_key, self._cache = (self._file_token, self._history.last_id()), state
                return state
            self._file_token, self._file_state, self._file_damaged = (
                loaded.token,
                loaded.state,
                loaded.damaged,
            )
            missing = not loaded.damaged and not self.state_path.exists()
        else:
            missing = False
        state = self._file_state
        assert state is not None
        if last is not None and last != state.head and not self._file_damaged:
            try:
                state = self._roll_forward(state, missing)
            except HarnessStoreError as exc:  # read() never raises: serve the file as it is
                log.warning("harness state %s not rolled forward: %s", self.state_path, exc)
        self._cache_key, self._cache = (self._file_token, last), state
        return state

    def _recover(self, salvaged: HarnessState) -> HarnessState:
        """The state rebuilt from the history for a damaged state file, repaired on disk if the
        store lock can be had right now (always when this object holds it)."""
        try:
            state = rebuild_state(salvaged, list(self._history.records()))
        except HarnessStoreError as exc:  # read() never raises: serve what the file still had
            log.warning("harness state %s is damaged and its history unreadable: %s", self.state_path, exc)
            return salvaged
        if self._writing:
            self._repair_locked(state)
            return state
        try:
            with StoreLock(self.lock_path, timeout=0):
                self._writing = True
                try:
                    # Re-check inside the lock: another process may have repaired it meanwhile.
                    loaded = load_state(self.state_path)
                    if not loaded.damaged:
                        return self.read()
                    state = rebuild_state(loaded.state, list(self._history.records()))
                    self._repair_locked(state)
                finally:
                    self._writing = False
        except HarnessStoreError as exc:
            # Lock busy or the directory is not writable: serve the rebuilt state; a later
            # read or write repairs the file.
            log.debug("harness state %s not repaired yet: %s", self.state_path, exc)
        return state

    def _repair_locked(self, state: HarnessState) -> None:
        """With the store lock held: keep the damaged file aside and save the rebuilt state."""
        try:
            aside = set_aside(self.state_path)
            token = save_state(self.state_path, state)
        except (OSError, HarnessStoreError) as exc:
            log.warning(
                "harness state %s is damaged and could not be repaired (%s); serving the state "
                "rebuilt from %s",
                self.state_path,
                exc,
                self.history_path,
            )
            return
        log.warning(
            "harness state %s was damaged; rebuilt %d entries and %d tombstones from %s%s",
            self.state_path,
            state.count(),
            len(state.tombstones),
            self.history_path,
            f"; the damaged file is kept as {aside}" if aside is not None else "",
        )
        self._file_token, self._file_state, self._file_damaged = token, state, False

    def _roll_forward(self, state: HarnessState, missing: bool) -> HarnessState:
        # The history has records the state file does not include: a writer died between the two
        # writes. Replay their `after` snapshots (or the whole history when the file is missing).
        if state.head is None:
            if not missing:
                return state
            start = 0
        else:
            position = self._history.position(state.head)
            if position is None:
                return state  # the state does not come from this history: leave it alone
            start = position + 1
        records = list(self._history.records(start))
        if not records:
            return state
        # Read without the lock, this is normal while another process is between its history
        # append and its state save; only a gap nobody is filling means a writer crashed.
        in_progress = not self._writing and held_elsewhere(self.lock_path)
        log.log(
            logging.DEBUG if in_progress else logging.WARNING,
            "harness state %s was behind its history by %d record(s)%s; rolled forward",
            self.state_path,
            len(records),
            " (another process is saving)" if in_progress else "",
        )
        tombstones = replay_tombstones(list(state.tombstones), records)
        return HarnessState.build(replay(state.entries, records), tombstones, head=records[-1].id)

    def history_count(self) -> int:
        return len(self._history)

    def history_records(self, start: int = 0, stop: int | None = None) -> Iterator[RefinementResult]:
        return self._history.records(start, stop)

    def history_position(self, refinement_id: str) -> int | None:
        return self._history.position(refinement_id)

    def history_get(self, refinement_id: str) -> RefinementResult | None:
        return self._history.get(refinement_id)

    def view_path(self, kind: str, entry_id: str, *, scope: str | None = None) -> Path:
        """The markdown view file of an entry, written if missing (path of a future entry otherwise)."""
        entry = self.read().get(kind, entry_id)
        if entry is None:
            return view_path(self.root, scope or self.default_scope, kind, entry_id)
        path = view_path(self.root, entry.scope, kind, entry_id)
        if not path.exists():
            write_view(self.root, entry)
        return path

    # -- writing --------------------------------------------------------------------------------

    def _prepare(self) -> None:
        try:
            ensure_dir(self.root)
        except OSError as exc:
            raise HarnessStoreError(
                f"cannot create the harness directory {self.root}: {exc.strerror}"
            ) from exc
        if not self.root.is_dir():
            raise HarnessStoreError(f"the harness path {self.root} is not a directory")

    @contextlib.contextmanager
    def _holding(self) -> Iterator[StoreLock]:
        self._prepare()
        with StoreLock(self.lock_path, self.lock_timeout) as held:
            self._writing = True
            try:
                yield held
            finally:
                self._writing = False

    def locked(self) -> contextlib.AbstractContextManager[object]:
        return self._holding()

    def snapshot_locked(self) -> Snapshot:
        remove_stale_temps(self.state_path)
        return Snapshot(self.read())

    def commit_locked(self, before: HarnessState, after: HarnessState, result: RefinementResult) -> None:
        """History first, then state (see module docstring); then the views of touched entries."""
        self._history.append(result)
        try:
            token = save_state(self.state_path, after)
        except HarnessStoreError as exc:
            # The record is durable in the history, which readers roll the state forward from:
            # the caller must not apply the same proposal again.
            raise HarnessStoreError(
                f"{exc}. Refinement {result.id} is recorded in {self.history_path} and takes effect "
                "from there (do not apply it again); the state file is rewritten by the next save"
            ) from exc
        self._file_token, self._file_state, self._file_damaged = token, after, False
        self._cache_key, self._cache = (token, result.id), after
        for edit in result.applied_edits:
            if not edit.applied:
                continue
            if edit.after is not None:
                write_view(self.root, edit.after)
            elif edit.before is not None:
                remove_view(self.root, edit.before)

    def tombstones_locked(self) -> list[Tombstone]:
        return list(self.read().tombstones)

    def save_tombstones_locked(
        self,
        tombstones: list[Tombstone],
        *,
        summary: str,
        tombstoned: Sequence[Tombstone] = (),
        lifted: Sequence[Tombstone] = (),
        trigger: str = "user",
    ) -> None:
        """A history record that only adds or lifts tombstones (see `RefinementResult.tombstoned`),
        so a state rebuilt from the history keeps them."""
        state = self.read()
        record = RefinementResult.model_validate(
            {
                "id": new_refinement_id(),
                "summary": summary,
                "scope": self.default_scope,
                "trigger": trigger,
                # A local store's records belong to its session (`.../sessions/<id>/harness`).
                "session_id": self.root.parent.name if self.default_scope == "local" else None,
                "created_at": utc_now(),
                "tombstoned": list(tombstoned),
                "lifted": list(lifted),
            }
        )
        self.commit_locked(state, HarnessState.build(state.entries, tombstones, head=record.id), record)
