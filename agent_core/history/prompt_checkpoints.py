"""Per-turn checkpoints of a session: where its transcript stood and what its kernel held.

Every prompt (a model turn, not a slash command) starts a checkpoint: the transcript's size before
the prompt's first record, the prompt's message id, and, taken just before the prompt's first cell,
a kernel checkpoint (kernel_bridge: per-variable pickles, unchanged values reused) and, in a git
repository, the workspace's state (`git stash create`: a commit of the tracked files that touches
neither the work tree, the index nor any ref). A prompt that ran no cell leaves the kernel as the
next checkpoint (or the live kernel) has it. The index is `sessions/<id>/checkpoints.json`;
the kernel's store is `sessions/<id>/checkpoints/`. Bounded by `checkpoint_max_count` and
`checkpoint_max_bytes` (config): the oldest go first.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from host_base.private_files import write_atomic

if TYPE_CHECKING:
    from kernel_bridge import KernelSession

log = logging.getLogger(__name__)

INDEX = "checkpoints.json"
GIT_TIMEOUT = 20.0


@dataclass
class Checkpoint:
    """One prompt's starting point."""

    turn: int  # 1 for the session's first prompt, counting on across rewinds
    offset: int  # the transcript's size in bytes before this prompt's first record
    created: float  # time.time()
    message_id: str | None = None  # the prompt's user message id
    kernel: str | None = None  # the kernel checkpoint's label, once the prompt's first cell was near
    cells: bool = False  # a cell of this prompt ran (so `kernel` is meant to be set)
    error: str | None = None  # why the kernel checkpoint could not be taken
    git: str | None = None  # the workspace commit (`git stash create`, else HEAD) in a git repository
    repo: str | None = None  # that repository's root

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Checkpoint:
        return cls(
            turn=int(data["turn"]),
            offset=int(data["offset"]),
            created=float(data.get("created", 0.0)),
            message_id=_text(data.get("message_id")),
            kernel=_text(data.get("kernel")),
            cells=bool(data.get("cells", False)),
            error=_text(data.get("error")),
            git=_text(data.get("git")),
            repo=_text(data.get("repo")),
        )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


@dataclass
class CheckpointIndex:
    """The session's checkpoints, oldest first, with what the kernel's store still has to drop."""

    path: Path
    entries: list[Checkpoint] = field(default_factory=list)
    next_turn: int = 1
    drop: list[str] = field(default_factory=list)  # kernel labels to delete at the next checkpoint
    store_bytes: int = 0

    @classmethod
    def load(cls, session_dir: Path, *, set_aside: bool = True) -> CheckpointIndex:
        """The index on disk; a missing one is empty, a damaged one is set aside with a warning
        (left in place with `set_aside=False`: a reader of another process's session changes nothing)."""
        path = session_dir / INDEX
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            entries = [Checkpoint.from_json(e) for e in data.get("entries", [])]
            index = cls(
                path,
                entries,
                int(data.get("next_turn", 1)),
                [str(x) for x in data.get("drop", [])],
                int(data.get("store_bytes", 0)),
            )
        except FileNotFoundError:
            return cls(path)
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            aside = path.with_name(f"{INDEX}.damaged-{int(time.time())}")
            log.warning(
                "checkpoint index %s is damaged (%s); kept as %s, starting a new one", path, exc, aside
            )
            if set_aside:
                try:
                    os.replace(path, aside)
                except OSError:
                    pass
            return cls(path)
        index.next_turn = max(index.next_turn, max((e.turn for e in entries), default=0) + 1)
        return index

    def save(self) -> None:
        data = {
            "format": 1,
            "next_turn": self.next_turn,
            "drop": self.drop,
            "store_bytes": self.store_bytes,
            "entries": [asdict(e) for e in self.entries],
        }
        # No fsync: written at every prompt; a torn index is set aside by `load` (rewind points lost, no data).
        write_atomic(self.path, json.dumps(data), sync=False)

    def find(self, turn: int) -> Checkpoint | None:
        return next((e for e in self.entries if e.turn == turn), None)

    def forget_from(self, turn: int) -> None:
        """Drop the checkpoints of `turn` and later (a rewind cut them); their kernel data goes next time."""
        for entry in [e for e in self.entries if e.turn >= turn]:
            self.entries.remove(entry)
            if entry.kernel is not None:
                self.drop.append(entry.kernel)

    def apply_kernel_summary(self, summary: dict[str, Any]) -> None:
        """What the kernel's store dropped (bounds): those prompts can no longer be rewound to."""
        dropped = set(summary.get("dropped", []))
        self.drop = [label for label in self.drop if label not in dropped]
        self.store_bytes = int(summary.get("storeBytes", self.store_bytes))
        kept = [e for e in self.entries if e.kernel is not None and e.kernel not in dropped]
        oldest = min((e.turn for e in kept), default=None)
        self.entries = [
            e
            for e in self.entries
            if not (e.kernel in dropped or (e.kernel is None and oldest is not None and e.turn < oldest))
        ]


def kernel_state_at(entries: list[Checkpoint], turn: int) -> tuple[str | None, str | None]:
    """(kernel label, None) holding the kernel as it was when prompt `turn` started; (None, None)
    when the live kernel still is that state (no cell ran since); (None, reason) when it was not saved."""
    for entry in entries:
        if entry.turn < turn:
            continue
        if entry.kernel is not None:
            return entry.kernel, None
        if entry.error is not None:
            return None, entry.error
        if entry.cells:
            return None, f"the kernel checkpoint of prompt {entry.turn} was never completed"
    return None, None


def workspace_state(cwd: str) -> tuple[str | None, str | None]:
    """(commit, repository root) for the workspace's tracked files now, or (None, None) outside git."""
    from agent_core.trust.project_scope import git_repo  # imports harness_store: not on the session/new path

    repo = git_repo(cwd)
    if repo is None:
        return None, None
    try:
        created = _git(
            repo,
            "stash",
            "create",
            "continual-acp checkpoint",
            config={"user.name": "continual-acp", "user.email": "continual-acp@localhost"},
        )
        commit = created.strip() or _git(repo, "rev-parse", "--verify", "-q", "HEAD").strip()
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("no workspace checkpoint in %s: %s", repo, exc)
        return None, str(repo)
    return (commit or None), str(repo)


def _git(repo: Path, *args: str, config: dict[str, str] | None = None) -> str:
    # kernel_bridge's safe git: a repository-configured program (fsmonitor, hooks, a filter driver)
    # does not run, and whatever git still runs gets no capability, key or descriptor of ours.
    from kernel_bridge.safe_git import run_git

    done = run_git(repo, *args, config=config, timeout=GIT_TIMEOUT)
    if done.returncode is None:
        raise subprocess.SubprocessError(f"git {args[0]} timed out after {GIT_TIMEOUT:g} s")
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace").strip()
        raise subprocess.SubprocessError(stderr or f"git {args[0]} exited {done.returncode}")
    return done.stdout.decode(errors="surrogateescape")


class SessionCheckpoints:
    """A session's checkpoint index and the two moments it is written: prompt start, first cell."""

    def __init__(self, session_dir: Path, cwd: str, *, max_count: int, max_bytes: int) -> None:
        self.session_dir = session_dir
        self.cwd = cwd
        self.max_count = max_count
        self.max_bytes = max_bytes
        self.index = CheckpointIndex.load(session_dir)
        self._open: Checkpoint | None = None  # the running prompt's checkpoint

    def begin(self, offset: int) -> Checkpoint:
        """A prompt starts: its transcript position (its kernel state comes before its first cell)."""
        entry = Checkpoint(turn=self.index.next_turn, offset=offset, created=time.time())
        self.index.next_turn += 1
        self.index.entries.append(entry)
        self._open = entry
        self._save()
        return entry

    def note_message(self, message_id: str) -> None:
        entry = self._open
        if entry is not None and entry.message_id is None:
            entry.message_id = message_id
            self._save()

    def end(self) -> None:
        self._open = None

    async def before_cell(self, kernel: KernelSession) -> None:
        """Take the running prompt's kernel (and workspace) checkpoint, once; never fails the cell."""
        entry = self._open
        if entry is None or entry.cells:
            return
        from kernel_bridge.checkpoints import CheckpointBounds  # the kernel is there: kernel_bridge is loaded

        entry.cells = True
        label = f"turn{entry.turn}"
        bounds = CheckpointBounds(self.max_count, self.max_bytes)
        workspace = asyncio.to_thread(workspace_state, self.cwd)
        try:
            summary, (commit, repo) = await asyncio.gather(
                kernel.checkpoint(label, bounds, list(self.index.drop)), workspace
            )
        except Exception as exc:
            log.warning("checkpoint of prompt %d failed: %s", entry.turn, exc)
            entry.error = str(exc) or type(exc).__name__
            self._save()
            return
        entry.kernel, entry.git, entry.repo = label, commit, repo
        self.index.apply_kernel_summary(summary)
        self._save()

    def status_line(self) -> str:
        """For `/kernel status`: what is kept and the bounds."""
        entries = self.index.entries
        turns = f"prompts {entries[0].turn}-{entries[-1].turn}" if entries else "none yet"
        mb = self.index.store_bytes / 1_000_000
        limit = self.max_bytes / 1_000_000
        return (
            f"checkpoints: {len(entries)} kept ({turns}), {mb:.1f} MB of variables stored; bounds "
            f"checkpoint_max_count = {self.max_count}, checkpoint_max_bytes = {limit:.0f} MB "
            "(oldest dropped first)"
        )

    def _save(self) -> None:
        try:
            self.index.save()
        except OSError as exc:
            log.warning("could not write the checkpoint index %s: %s", self.index.path, exc)
