"""Rewind a session to before one of its prompts: transcript, model context and kernel state.

The transcript is cut at the prompt's checkpoint; the cut part is not deleted but moved to
`sessions/<id>/rewound/<time>-prompt<n>.jsonl` (listed by `/rewind list`). The kernel's variables
become those of that checkpoint (values unchanged since stay as they are, new names go). Workspace
files are a separate, asked-for step (`files_diff`, then `revert_files`), and so is rolling back
refinements made after that point (the caller offers them: never silently).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agent_core.history.prompt_checkpoints import Checkpoint, kernel_state_at
from host_base.private_files import create_private

if TYPE_CHECKING:
    from agent_core.session import Session
    from kernel_bridge.workspace_launch import RunResult

REWOUND_DIR = "rewound"
# Records at the transcript's tail that belong to the slash command running the rewind itself:
# they stay (after the cut), so a reload shows the `/rewind` exchange in place.
COMMAND_PREFIX = "cmd-"


class RewindError(ValueError):
    """A rewind that cannot be done, with what to do instead."""


@dataclass(frozen=True)
class RewindPlan:
    checkpoint: Checkpoint
    prompts: int  # how many prompts are cut
    kernel_label: str | None  # the kernel checkpoint to restore; None: the live kernel already is it
    kernel_problem: str | None  # why the kernel state of that point is not available

    @property
    def since(self) -> str:
        """The checkpoint's time as ISO-8601 UTC (refinements created after it are offered for rollback)."""
        moment = datetime.fromtimestamp(self.checkpoint.created, UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"  # the harness history's format


@dataclass
class RewindOutcome:
    plan: RewindPlan
    aside: Path
    kernel: dict[str, Any] = field(default_factory=dict)  # restored / unchanged / removed / failed / skipped
    kernel_note: str = ""


class _Index(Protocol):
    @property
    def entries(self) -> list[Checkpoint]: ...


class _Checkpoints(Protocol):
    @property
    def index(self) -> _Index: ...


class CheckpointedSession(Protocol):
    """What a plan reads: the prompt checkpoints (of an open session, or of one read from disk)."""

    @property
    def checkpoints(self) -> _Checkpoints: ...


def plan_rewind(
    session: CheckpointedSession, *, turns: int | None = None, message_id: str | None = None
) -> RewindPlan:
    """Which checkpoint a rewind goes back to: the `turns`-th last prompt (default 1), or the prompt
    with user message `message_id`. Raises `RewindError` naming what can be rewound."""
    entries = session.checkpoints.index.entries
    if message_id is not None:
        target = next((e for e in entries if e.message_id == message_id), None)
        if target is None:
            raise RewindError(
                f"no checkpoint for message {message_id!r} in this session (it is not one of its "
                f"prompts, or older than the {len(entries)} checkpoints kept)"
            )
    else:
        n = 1 if turns is None else turns
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise RewindError(f"turns must be a whole number >= 1, not {turns!r}")
        if not entries:
            raise RewindError(
                "nothing to rewind: this session has no checkpoints yet (no prompt since they started)"
            )
        if n > len(entries):
            raise RewindError(
                f"cannot go back {n} prompts: {len(entries)} checkpoint(s) kept "
                f"(oldest: prompt {entries[0].turn}; bounded by checkpoint_max_count / checkpoint_max_bytes)"
            )
        target = entries[-n]
    label, problem = kernel_state_at(entries, target.turn)
    prompts = sum(1 for e in entries if e.turn >= target.turn)
    return RewindPlan(target, prompts, label, problem)


async def rewind(session: Session, plan: RewindPlan) -> RewindOutcome:
    """Cut the transcript, rebuild the model context, restore the kernel's variables."""
    if session.busy:
        raise RewindError("a turn is running: cancel it first, then rewind")
    aside = cut_transcript(session, plan)
    loaded = session.store.load(session.id)
    session.context.reset(loaded.messages, loaded.last_prompt_tokens)
    session.title = loaded.title
    checkpoints = session.checkpoints
    checkpoints.index.forget_from(plan.checkpoint.turn)
    outcome = RewindOutcome(plan, aside)
    if plan.kernel_label is not None:
        try:
            kernel = await session.kernel()
            outcome.kernel = await kernel.restore_checkpoint(plan.kernel_label)
        except Exception as exc:
            outcome.kernel_note = f"The kernel's variables were not restored: {exc}."
    elif plan.kernel_problem is not None:
        outcome.kernel_note = f"The kernel's variables were not restored: {plan.kernel_problem}."
    else:
        outcome.kernel_note = "No cell ran since then: the kernel's variables are unchanged."
    checkpoints.index.save()
    return outcome


def cut_transcript(session: Session, plan: RewindPlan) -> Path:
    """Move the transcript from the checkpoint's offset on into the rewound dir; returns that file."""
    path = session.store.transcript_path(session.id)
    offset = plan.checkpoint.offset
    with path.open("rb") as handle:
        handle.seek(offset)
        cut = handle.read()
    lines = cut.splitlines(keepends=True)
    tail: list[bytes] = []
    while lines and _is_command_record(lines[-1]):
        tail.insert(0, lines.pop())
    directory = session.session_dir / REWOUND_DIR
    directory.mkdir(mode=0o700, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    aside = directory / f"{stamp}-prompt{plan.checkpoint.turn}.jsonl"
    suffix = 1
    while aside.exists():
        suffix += 1
        aside = directory / f"{stamp}-prompt{plan.checkpoint.turn}-{suffix}.jsonl"
    create_private(aside, b"".join(lines), sync=True)
    # The writer appends with O_APPEND: after the truncation its next line lands at the new end.
    os.truncate(path, offset)
    session.append_raw_records(b"".join(tail))
    return aside


def _is_command_record(line: bytes) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    event = record.get("event") if isinstance(record, dict) else None
    return isinstance(event, dict) and str(event.get("message_id", "")).startswith(COMMAND_PREFIX)


@dataclass(frozen=True)
class CutPart:
    name: str
    prompts: list[str]  # the first line of each prompt in it
    size: int


def list_cut_parts(session_dir: Path) -> list[CutPart]:
    """The parts earlier rewinds set aside, oldest first."""
    directory = session_dir / REWOUND_DIR
    if not directory.is_dir():
        return []
    parts: list[CutPart] = []
    for path in sorted(directory.glob("*.jsonl")):
        prompts: list[str] = []
        try:
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                event = record.get("event") if isinstance(record, dict) else None
                if isinstance(event, dict) and event.get("kind") == "UserMessage":
                    if str(event.get("message_id", "")).startswith(COMMAND_PREFIX):
                        continue
                    prompts.append(_first_line(event))
            parts.append(CutPart(path.name, prompts, path.stat().st_size))
        except OSError:
            continue
    return parts


def _first_line(event: dict[str, Any]) -> str:
    for part in event.get("parts", []):
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            text = part["text"].strip().splitlines()
            return (text[0][:80] if text else "").strip()
    return "(no text)"


# ---------------------------------------------------------------- workspace files


def files_diff(plan: RewindPlan) -> str | None:
    """The diff a file revert would undo (tracked files, from the checkpoint to now), or None when
    the workspace was not a git repository with a recorded state at that point."""
    entry = plan.checkpoint
    if entry.git is None or entry.repo is None:
        return None
    return _git(Path(entry.repo), "diff", "--binary", entry.git)


def revert_files(plan: RewindPlan) -> str:
    """Put the tracked files back as they were at the checkpoint (untracked files are left alone)."""
    diff = files_diff(plan)
    if diff is None:
        raise RewindError("the workspace was not a git repository at that point: files are not reverted")
    if not diff.strip():
        return "No tracked file changed since then."
    entry = plan.checkpoint
    assert entry.repo is not None
    done = _run_git(Path(entry.repo), "apply", "-R", "--binary", "-", input=diff)
    if done.returncode != 0:
        raise RewindError(f"git apply -R failed, nothing reverted: {_stderr(done)}")
    files = [line[6:] for line in diff.splitlines() if line.startswith("+++ b/") or line.startswith("--- a/")]
    return f"Reverted {len(set(files))} file(s) to their state before that prompt."


def _git(repo: Path, *args: str) -> str:
    done = _run_git(repo, *args)
    if done.returncode != 0:
        raise RewindError(f"git {args[0]} failed: {_stderr(done)}")
    return done.stdout.decode(errors="surrogateescape")


def _run_git(repo: Path, *args: str, input: str | None = None) -> RunResult:
    # kernel_bridge's safe git: a repository-configured program (fsmonitor, hooks, a filter or diff
    # driver) does not run, and whatever git still runs gets no capability, key or descriptor of ours.
    from kernel_bridge.safe_git import run_git

    data = input.encode(errors="surrogateescape") if input is not None else None
    try:
        return run_git(repo, *args, input=data, timeout=60)
    except OSError as exc:
        raise RewindError(f"git {args[0]} could not run: {exc}") from exc


def _stderr(done: RunResult) -> str:
    if done.returncode is None:
        return "timed out"
    return done.stderr.decode(errors="replace").strip()
