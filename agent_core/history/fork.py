"""Fork a session: a new session whose transcript, local harness and kernel state are the source's,
as they are now or as they were before one of its prompts; the two are independent afterwards.

The new session is an ordinary saved session opened like `session/load` does (its own id, owner
lock, transcript and kernel), so its id works with every method at once. Its kernel restores a
snapshot written from the source: taken now, or exported from the checkpoint of that prompt. The
checkpoints before the fork point come along (values hard-linked), so the fork can be rewound too.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from agent_core.history.prompt_checkpoints import INDEX, CheckpointIndex
from agent_core.history.rewind import plan_rewind
from agent_core.history.session_files import FORMAT_VERSION, now_iso
from host_base.private_files import create_private

if TYPE_CHECKING:
    from agent_core.history.transcript import SessionStore
    from agent_core.session import Session

log = logging.getLogger(__name__)

# What a fork copies from the source's session dir besides transcript, snapshot and checkpoints:
# the goal and gates. Pending reviews stay with the source (one proposal must not be asked twice).
_COPIED_FILES = ("autonomy.json",)
_HARNESS_SKIPPED = ("pending",)


class ForkError(ValueError):
    """A fork that cannot be made, with the reason."""


@dataclass(frozen=True)
class ForkPoint:
    """Where a fork starts: the transcript bytes it keeps and the kernel state it gets."""

    offset: int | None  # None: the whole transcript
    turn: int | None  # the prompt it forks before (None: now)
    kernel_label: str | None  # export this checkpoint; None: the source's kernel as it is now
    kernel_problem: str | None  # why the kernel state of that point cannot be carried


@dataclass(frozen=True)
class SavedCheckpoints:
    index: CheckpointIndex


@dataclass(frozen=True)
class SavedSession:
    """A session read from disk without opening it: no owner lock is taken, so a fork works while
    another continual-acp process has the source open (the transcript is append-only, its snapshot
    and checkpoint index are replaced atomically: a copy reads a consistent prefix of each)."""

    id: str
    title: str | None
    store: SessionStore
    checkpoints: SavedCheckpoints
    busy: bool = False

    @property
    def session_dir(self) -> Path:
        return self.store.session_dir(self.id)

    @classmethod
    def read(cls, store: SessionStore, session_id: str) -> SavedSession:
        meta = store.read_meta(session_id) or {}
        title = meta.get("title")
        index = CheckpointIndex.load(store.session_dir(session_id), set_aside=False)
        return cls(session_id, title if isinstance(title, str) else None, store, SavedCheckpoints(index))


def fork_point(source: Session | SavedSession, turns: int | None) -> ForkPoint:
    """Now (`turns` None), or before the source's `turns`-th last prompt (RewindError if none)."""
    if turns is None:
        return ForkPoint(None, None, None, None)
    plan = plan_rewind(source, turns=turns)
    return ForkPoint(plan.checkpoint.offset, plan.checkpoint.turn, plan.kernel_label, plan.kernel_problem)


async def prepare_fork(source: Session | SavedSession, new_id: str, cwd: str, point: ForkPoint) -> str:
    """Write the new session's directory from `source`; returns what the kernel state carried is.

    The caller opens it afterwards (`Agent.fork_session`)."""
    if source.busy:
        raise ForkError("a turn is running in the source session: wait for it or cancel it, then fork")
    store = source.store
    target = store.session_dir(new_id)
    if target.exists():
        raise ForkError(f"session {new_id} exists already")
    target.mkdir(mode=0o700, parents=True)
    try:
        shift = _copy_transcript(source, target, new_id, cwd, point)
        _copy_local_files(source.session_dir, target)
        note = await _copy_kernel_state(source, target, point)
        _copy_checkpoints(source, target, point, shift)
        store.write_meta(new_id, cwd=cwd, title=_title(source), created_at=now_iso(), updated_at=now_iso())
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return note


def _title(source: Session | SavedSession) -> str | None:
    return f"{source.title} (fork)" if source.title else None


def _copy_transcript(
    source: Session | SavedSession, target: Path, new_id: str, cwd: str, point: ForkPoint
) -> int:
    """The transcript up to the fork point under a new header; returns how much longer the header
    got (the checkpoints' offsets count from the start of the file)."""
    path = source.store.transcript_path(source.id)
    data = path.read_bytes()
    if point.offset is not None:
        data = data[: point.offset]
    else:
        # Another process may be appending: keep whole lines only.
        data = data[: data.rfind(b"\n") + 1]
    _, _, body = data.partition(b"\n")
    header = {
        "type": "header",
        "version": FORMAT_VERSION,
        "session_id": new_id,
        "cwd": cwd,
        "created_at": now_iso(),
        "forked_from": {"session_id": source.id, "before_prompt": point.turn},
    }
    line = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    create_private(target / "transcript.jsonl", line + body)
    return len(line) - (len(data) - len(body))


def _copy_local_files(source_dir: Path, target: Path) -> None:
    harness = source_dir / "harness"
    if harness.is_dir():
        shutil.copytree(harness, target / "harness", ignore=shutil.ignore_patterns(*_HARNESS_SKIPPED))
    for name in _COPIED_FILES:
        if (source_dir / name).is_file():
            shutil.copy2(source_dir / name, target / name)


async def _copy_kernel_state(source: Session | SavedSession, target: Path, point: ForkPoint) -> str:
    from kernel_bridge.checkpoints import export_snapshot
    from kernel_bridge.snapshot import MANIFEST_FILE, STATE_FILE, SnapshotPaths

    destination = SnapshotPaths.at(target)
    if point.kernel_problem is not None:
        return f"kernel state not carried: {point.kernel_problem}"
    if point.kernel_label is not None:
        from kernel_bridge.checkpoints import store_dir

        try:
            exported = export_snapshot(store_dir(source.session_dir), point.kernel_label, destination)
        except (OSError, ValueError) as exc:
            return f"kernel state not carried: {exc}"
        return "kernel variables from before that prompt: " + (", ".join(exported) or "none")
    live = None
    if not isinstance(source, SavedSession) and source.kernel_handle.live:
        live = source.kernel_handle.running_kernel()
    names: list[str] = []
    if live is not None:
        # The live state, not the last debounced snapshot. A kernel that is not running (not started
        # yet, hibernated, released) is what its snapshot on disk says.
        manifest = await live.snapshot()
        names = sorted(manifest.get("saved", {}))
    for name in (STATE_FILE, MANIFEST_FILE):
        if (source.session_dir / name).is_file():
            shutil.copy2(source.session_dir / name, target / name)
            os.chmod(target / name, 0o600)
    if not names and (target / MANIFEST_FILE).is_file():
        saved = json.loads((target / MANIFEST_FILE).read_text(encoding="utf-8")).get("saved", {})
        names = sorted(saved)
    return "kernel variables as they are now: " + (", ".join(names) or "none")


def _copy_checkpoints(source: Session | SavedSession, target: Path, point: ForkPoint, shift: int) -> None:
    from kernel_bridge.checkpoints import copy_store, store_dir

    index = source.checkpoints.index
    kept = [e for e in index.entries if point.turn is None or e.turn < point.turn]
    labels = [e.kernel for e in kept if e.kernel is not None]
    try:
        copy_store(store_dir(source.session_dir), store_dir(target), labels)
    except (OSError, ValueError) as exc:
        log.warning("checkpoints not copied to the fork: %s", exc)
        return
    copied = CheckpointIndex(
        target / INDEX,
        [replace(e, offset=e.offset + shift) for e in kept],
        next_turn=index.next_turn if point.turn is None else point.turn,
        store_bytes=index.store_bytes,
    )
    copied.save()
