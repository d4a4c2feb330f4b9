"""What each harness entry is worth: which entries each turn's prompt showed, and how the turn went.

Every turn appends one line to `<home>/harness/entry-usage.jsonl` (0600): the session, the time, the
keys of the harness entries its system prompt showed (read from the rendered harness section, so
it is exactly what the model saw), the cells run and failed, the gates passed and failed, how the
turn stopped, and (`corrects`) the start of the session's previous turn when this turn's prompt
read as a correction of it (correction.py). `usage_by_entry` folds the lines into one `EntryUsage` per entry key: turns in the
prompt, last used, and the turns that went badly. An entry unused for `STALE_DAYS` or tied to
failures is *marked for review* (`review_reason`); nothing here deletes an entry.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_core import events as ev

log = logging.getLogger(__name__)

LEDGER_NAME = "entry-usage.jsonl"
STALE_DAYS = 30
FAILURE_SHARE = 0.5  # of the turns an entry was in the prompt, this share went badly ...
FAILURE_MIN_TURNS = 3  # ... over at least this many turns: marked for review
_KEY = re.compile(r"^- \*\*.*?\*\*(?: \(candidate\))? \[`([^`]+)`")


def prompt_entry_keys(overview: str) -> list[str]:
    """The entry keys a rendered harness overview shows, in order (one `- **title** [`key`]` line each)."""
    keys: list[str] = []
    for line in overview.splitlines():
        match = _KEY.match(line)
        if match and match.group(1) not in keys:
            keys.append(match.group(1))
    return keys


@dataclass
class TurnUsage:
    """One turn, as it happens: the entries its prompts showed and what its events say."""

    entries: list[str] = field(default_factory=list)
    # entry keys whose anchor (command, call, file, skill) a cell ran after the prompt showed it
    followed: list[str] = field(default_factory=list)
    anchors: dict[str, list[str]] = field(default_factory=dict)
    # entry key -> the command its prediction names (set once, from the turn's first prompt), and
    # the keys whose predicted command a cell of the turn ran
    predictions: dict[str, str] | None = None
    predicted: list[str] = field(default_factory=list)
    # the `started` stamp of the session's previous turn when this turn's prompt corrects it
    # (correction.py): that turn's followed entries get a `corrected` outcome (entry_counters.py)
    corrects: str | None = None
    cells: int = 0
    cells_failed: int = 0
    gates_passed: int = 0
    gates_failed: int = 0
    started: datetime = field(default_factory=lambda: datetime.now(UTC))

    def saw(self, overview: str) -> None:
        from agent_core.trust.entry_anchors import overview_anchors

        for key in prompt_entry_keys(overview):
            if key not in self.entries:
                self.entries.append(key)
        for key, anchors in overview_anchors(overview).items():
            self.anchors.setdefault(key, anchors)

    def expect(self, predictions: Mapping[str, str]) -> None:
        """The harness's predictions as the turn started (later writes are for later turns)."""
        if self.predictions is None:
            self.predictions = dict(predictions)

    def note(self, event: ev.TurnEvent) -> None:
        if isinstance(event, ev.CellStarted):
            from agent_core.trust.entry_anchors import followed

            for key, anchors in self.anchors.items():
                if key not in self.followed and followed(event.code, anchors):
                    self.followed.append(key)
            for key, command in (self.predictions or {}).items():
                if key not in self.predicted and command in event.code:
                    self.predicted.append(key)
        elif isinstance(event, ev.CellFinished):
            self.cells += 1
            self.cells_failed += event.status == "failed"
        elif isinstance(event, ev.GateFinished) and not event.summary.startswith("not rerun"):
            self.gates_passed += event.status == "completed"
            self.gates_failed += event.status == "failed"

    def record(self, session_id: str, stop_reason: str, at: datetime | None = None) -> dict[str, Any]:
        return {
            "started": self.started.isoformat(timespec="milliseconds"),
            "at": (at or datetime.now(UTC)).isoformat(timespec="milliseconds"),
            "session": session_id,
            "entries": list(self.entries),
            "followed": list(self.followed),
            **({"predicted": list(self.predicted)} if self.predicted else {}),
            **({"corrects": self.corrects} if self.corrects else {}),
            "cells": self.cells,
            "cells_failed": self.cells_failed,
            "gates_passed": self.gates_passed,
            "gates_failed": self.gates_failed,
            "stop_reason": stop_reason,
        }


class UsageLedger:
    """`<home>/harness/entry-usage.jsonl`: one line per turn, appended (O_APPEND: several servers can
    write it; a line is one write)."""

    def __init__(self, home: Path) -> None:
        self.path = home / "harness" / LEDGER_NAME

    def append(self, record: Mapping[str, Any]) -> None:
        if not record.get("entries") and not record.get("corrects"):
            return  # a turn with an empty harness says nothing about any entry (unless it corrects one)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def read(self) -> list[dict[str, Any]]:
        """Every record; a torn or damaged line is skipped (a missing ledger is empty)."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.warning("cannot read %s: %s", self.path, exc)
            return []
        records: list[dict[str, Any]] = []
        for line in text.splitlines():
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict) and isinstance(value.get("entries"), list):
                records.append(value)
        return records


@dataclass
class EntryUsage:
    """What one harness entry's turns came to: counts, last use, how they went."""

    turns: int = 0
    last_used: str | None = None
    failed_cell_turns: int = 0
    cancelled_turns: int = 0
    failed_gate_turns: int = 0
    rolled_back_turns: int = 0  # turns whose refinement a user rolled back later
    bad_turns: int = 0  # turns that went badly in any way, each counted once

    def review_reason(self, *, created_at: str | None, now: datetime) -> str | None:
        """Why the entry should be looked at by a person, or None (it is never removed for it)."""
        if self.turns >= FAILURE_MIN_TURNS and self.bad_turns / self.turns >= FAILURE_SHARE:
            return f"tied to failures ({self.bad_turns} of {self.turns} turns went badly)"
        since = self.last_used or created_at
        if since:
            try:
                idle = (now - datetime.fromisoformat(since)).days
            except ValueError:
                return None
            if idle >= STALE_DAYS:
                return f"unused for {idle} days" if self.last_used else f"never in a prompt in {idle} days"
        return None


def _when(text: object) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def rolled_back_turns(records: Sequence[Mapping[str, Any]], history: Iterable[Any]) -> set[int]:
    """Indexes of the ledger `records` whose turn made a refinement that was later rolled back.

    `history`: refinement records (`id`, `session_id`, `created_at`, `rollback_of`) of the stores.
    A refinement belongs to the turn of its session that was running when it was made (a cell's
    write), else to the last turn that ended before it (a review after the turn).
    """
    made: dict[str, tuple[str, datetime]] = {}
    undone: list[str] = []
    for record in history:
        when = _when(getattr(record, "created_at", ""))
        session = getattr(record, "session_id", None)
        if when is not None and session:
            made[str(record.id)] = (str(session), when)
        if getattr(record, "rollback_of", None):
            undone.append(str(record.rollback_of))
    turns: list[tuple[int, str, datetime | None, datetime | None]] = [
        (i, str(r.get("session")), _when(r.get("started")), _when(r.get("at"))) for i, r in enumerate(records)
    ]
    out: set[int] = set()
    for refinement_id in undone:
        if refinement_id not in made:
            continue
        session, when = made[refinement_id]
        mine = [(i, start, end) for i, s, start, end in turns if s == session and end is not None]
        during = [
            i for i, start, end in mine if start is not None and end is not None and start <= when <= end
        ]
        before = [(end, i) for i, _, end in mine if end is not None and end <= when]
        if during:
            out.add(during[0])
        elif before:
            out.add(max(before)[1])
    return out


def usage_by_entry(
    records: Sequence[Mapping[str, Any]], rolled_back: set[int] | None = None
) -> dict[str, EntryUsage]:
    out: dict[str, EntryUsage] = {}
    for index, record in enumerate(records):
        failed_cells = int(record.get("cells_failed") or 0) > 0
        cancelled = record.get("stop_reason") == "cancelled"
        failed_gates = int(record.get("gates_failed") or 0) > 0
        undone = rolled_back is not None and index in rolled_back
        for key in record.get("entries") or []:
            usage = out.setdefault(str(key), EntryUsage())
            usage.turns += 1
            at = str(record.get("at") or "")
            if at and (usage.last_used is None or at > usage.last_used):
                usage.last_used = at
            usage.failed_cell_turns += failed_cells
            usage.cancelled_turns += cancelled
            usage.failed_gate_turns += failed_gates
            usage.rolled_back_turns += undone
            usage.bad_turns += failed_cells or cancelled or failed_gates or undone
    return out


def home_usage(home: Path) -> dict[str, EntryUsage]:
    """Every entry's usage from the data dir's ledger, rollbacks of turns' refinements included
    (the global store's history and the local histories of the sessions in the ledger)."""
    records = UsageLedger(home).read()
    return usage_by_entry(records, rolled_back_turns(records, turn_history(history_roots(home, records))))


def history_roots(home: Path, records: Sequence[Mapping[str, Any]]) -> list[Path]:
    """The stores whose rollbacks can undo a ledger turn's refinement: the global one and the local
    store of every session in the ledger."""
    return [home / "harness"] + [
        home / "sessions" / session / "harness"
        for session in sorted({str(r.get("session")) for r in records})
    ]


def turn_history(roots: Iterable[Path]) -> list[Any]:
    """The refinement records of those stores (a damaged store is skipped with a warning)."""
    from harness_store import HarnessStore

    history: list[Any] = []
    for root in roots:
        if (root / "refinements.jsonl").is_file():
            try:
                history += list(HarnessStore(root).history())
            except Exception as exc:  # a damaged store must not hide the usage
                log.warning("cannot read the refinement history in %s: %s", root, exc)
    return history


def describe(usage: EntryUsage | None, *, created_at: str | None, now: datetime | None = None) -> str:
    """One line: how often the entry was in the prompt, when last, how those turns went, a review mark."""
    now = now or datetime.now(UTC)
    if usage is None or usage.turns == 0:
        text = "never in a prompt yet"
        usage = EntryUsage()
    else:
        noun = "turn" if usage.turns == 1 else "turns"
        last = (usage.last_used or "")[:10]
        outcomes = [
            f"{n} {what}"
            for n, what in (
                (usage.failed_cell_turns, "with failed cells"),
                (usage.cancelled_turns, "cancelled"),
                (usage.failed_gate_turns, "with failed gates"),
                (usage.rolled_back_turns, "whose refinement was rolled back"),
            )
            if n
        ]
        text = f"in the prompt for {usage.turns} {noun}, last {last}; " + (
            ", ".join(outcomes) or "no failures"
        )
    reason = usage.review_reason(created_at=created_at, now=now)
    return text + (f" — **marked for review**: {reason}" if reason else "")


def usage_section(
    overview: str, entries: Mapping[str, Any], home: Path, *, now: datetime | None = None
) -> str:
    """`/harness`'s "Use in prompts" section: one line per entry the overview shows ("" if none).

    `entries` maps a key to its entry (anything with `created_at`), as the overview was rendered from.
    """
    keys = prompt_entry_keys(overview)
    if not keys:
        return ""
    usage = home_usage(home)
    lines = ["### Use in prompts"]
    for key in keys:
        created = getattr(entries.get(key), "created_at", None)
        lines.append(f"- `{key}`: {describe(usage.get(key), created_at=created, now=now)}")
    return "\n".join(lines)
