"""Pending reviews on disk, so a proposal waiting for a human survives a server restart.

One JSON file per proposal, `<store root>/pending/<proposal id>.json` (0600, written atomically, the
directory 0700): a local proposal under the session's harness (`<home>/sessions/<id>/harness`), a
global one under the global harness (`<home>/harness`) where any later session sees it. The file is
removed when the proposal is decided; removing it is also the claim, so two sessions cannot both
decide one global proposal.

A project proposal waits for *one person's* review, so it is kept per user too, never in the
repository: `<home>/harness/projects/<repo name>-<hash of the repo path>/pending/` (trust, issue
15). The repository holds only what was approved (entry files) and the history. Pending files an
older version left in `<repo>/.continual-acp/harness/pending/` are moved there once, with a log
line (`migrate_in_repo_pending`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
from pathlib import Path

from agent_core.control_plane.held import HeldChange
from agent_core.refinement.records import PendingReview
from harness_store import HarnessState, ProjectStore, Proposal, Store
from harness_store.statefile import write_atomic
from host_base.private_files import private_dir

log = logging.getLogger(__name__)

PENDING_DIR = "pending"
PROJECTS_DIR = "projects"
_FORMAT = 1


def pending_dir(store: Store) -> Path:
    """Where `store` keeps its pending reviews."""
    return store.root / PENDING_DIR


def project_key(repo: Path | str) -> str:
    """A directory name for one repository: its name (safe characters only) and a hash of its
    resolved path, so two checkouts of one name never share pending reviews."""
    path = Path(repo).expanduser()
    try:
        path = path.resolve()
    except OSError:
        pass
    name = re.sub(r"[^A-Za-z0-9._-]", "_", path.name)[:40].lstrip(".") or "repo"
    return f"{name}-{hashlib.sha256(str(path).encode('utf-8')).hexdigest()[:16]}"


def project_pending_dir(global_store: Store, project_store: ProjectStore) -> Path:
    """Where this user's pending reviews of `project_store`'s repository wait: under the global
    harness (the data dir), keyed by the repository."""
    return global_store.root / PROJECTS_DIR / project_key(project_store.repo) / PENDING_DIR


def migrate_in_repo_pending(old: Path | None, new: Path | None) -> int:
    """Move pending review files an older version kept inside the repository (`old`) to the
    per-user directory (`new`); the number moved. Logged once per move; a file that cannot be
    moved is left where it is (and said so), never loaded from the repository."""
    if old is None or new is None or not old.is_dir():
        return 0
    names = sorted(n for n in os.listdir(old) if n.endswith(".json") and not n.startswith("."))
    moved = 0
    for name in names:
        target = new / name
        try:
            _private_dir(new)
            if target.exists():
                os.unlink(old / name)  # the same proposal already moved by another session
                continue
            shutil.move(str(old / name), str(target))
            os.chmod(target, 0o600)
            moved += 1
        except OSError as exc:
            log.warning(
                "ignoring the pending project review %s in the repository: cannot move it to %s (%s)",
                old / name,
                new,
                exc,
            )
    if moved:
        log.warning(
            "moved %d pending project review(s) out of the repository (%s) to per-user storage (%s)",
            moved,
            old,
            new,
        )
    try:
        old.rmdir()  # only when empty: anything else there is left alone
    except OSError:
        pass
    return moved


class PendingFiles:
    """The pending reviews of one store's scope, as files (a no-op without a directory)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    def _path(self, proposal_id: str) -> Path | None:
        if self.directory is None or not proposal_id or "/" in proposal_id or proposal_id.startswith("."):
            return None
        return self.directory / f"{proposal_id}.json"

    def save(self, pending: PendingReview, session_id: str) -> bool:
        """Write the proposal's file; False when there is none (a failure is logged: the proposal
        still waits, in memory only)."""
        path = self._path(pending.proposal_id)
        if path is None:
            return False
        body = {
            "format": _FORMAT,
            "proposal_id": pending.proposal_id,
            "scope": pending.scope,
            "trigger": pending.trigger,
            "source": pending.source,
            "created_at": pending.created_at,
            "session_id": session_id,
            "proposal": pending.proposal.model_dump(mode="json"),
            "baseline": pending.baseline.model_dump(mode="json"),
        }
        if pending.promotion_of is not None:
            body["promotion_of"] = list(pending.promotion_of)
        if pending.held is not None:
            body["held"] = pending.held.to_json()
        if pending.replay is not None:
            body["replay"] = pending.replay.to_json()
        try:
            _private_dir(path.parent)
            write_atomic(path, json.dumps(body, ensure_ascii=False).encode("utf-8"))
        except Exception:
            log.exception(
                "cannot save pending review %s to %s; it is kept in memory only", pending.proposal_id, path
            )
            return False
        return True

    def remove(self, proposal_id: str) -> bool:
        """Delete the proposal's file: True if this call removed it (False: already decided elsewhere)."""
        path = self._path(proposal_id)
        if path is None:
            return True
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        except OSError:
            log.exception("cannot remove the decided pending review %s", path)
        return True

    def ids(self) -> set[str]:
        """The proposal ids that have a file now."""
        if self.directory is None:
            return set()
        try:
            names = os.listdir(self.directory)
        except OSError:
            return set()
        return {n[: -len(".json")] for n in names if n.endswith(".json") and not n.startswith(".")}

    def load(self, proposal_id: str) -> PendingReview | None:
        """The proposal saved under `proposal_id`; None (logged) when missing or unreadable."""
        path = self._path(proposal_id)
        if path is None:
            return None
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            promotion = raw.get("promotion_of")
            held = HeldChange.from_json(raw["held"]) if raw.get("held") is not None else None
            replay = None
            if isinstance(raw.get("replay"), dict):
                from agent_core.refinement.replay import ReplayReport  # only a replayed proposal's file

                replay = ReplayReport.from_json(raw["replay"])
            return PendingReview(
                proposal_id=str(raw["proposal_id"]),
                proposal=Proposal.model_validate(raw["proposal"]),
                scope=raw["scope"],
                trigger=raw["trigger"],
                baseline=HarnessState.model_validate(raw["baseline"]),
                source=str(raw.get("source", "refine")),
                created_at=float(raw.get("created_at", 0.0)),
                saved=True,
                promotion_of=(str(promotion[0]), str(promotion[1]))
                if isinstance(promotion, list) and len(promotion) == 2
                else None,
                held=held,
                replay=replay,
            )
        except FileNotFoundError:
            return None  # decided meanwhile
        except Exception:
            log.warning("ignoring unreadable pending review %s", path, exc_info=True)
            return None

    def load_all(self) -> list[PendingReview]:
        """Every saved proposal, oldest first."""
        found = [p for p in (self.load(i) for i in self.ids()) if p is not None]
        return sorted(found, key=lambda p: (p.created_at, p.proposal_id))


def _private_dir(path: Path) -> None:
    if not path.is_dir():
        private_dir(path, exact=True)  # every missing parent 0700 too, not only the last
