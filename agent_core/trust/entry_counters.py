"""Counters on every harness entry: shown, followed, and how the followed turns went.

An entry is *shown* in a turn whose prompt rendered it, and *followed* in a turn where a cell ran
one of its anchors after the prompt showed it: a command or call it quotes in backticks, a file path
it names, or a skill's callable (read from the rendered overview line, so only what the model saw
counts). A followed turn *passed* when no gate failed, no cell failed, it was not cancelled, its
refinement was not rolled back later and the user's next prompt in the session did not correct it
(correction.py: the next turn's ledger line names it in `corrects`); otherwise it *failed* (each
cause counted too; a correction as `corrected`).

The counters are a fold of the usage ledger (`entry-usage.jsonl`, one line per turn) and the
refinement histories (rollbacks): the ledger is their history. They are kept beside it in
`<home>/harness/entry-counters.json` (0600), stamped with the ledger offset and the history sizes
they were folded from: turns appended to the ledger since are folded in alone; a changed history,
or a damaged or missing file, refolds everything from those files.

`standing` turns the counters into what the prompt and the curator act on: `helpful` entries
are listed first, `harmful` ones last (the first to fall out of the budget), before any review.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal

from agent_core.trust.entry_anchors import followed, line_anchors, overview_anchors
from agent_core.trust.entry_usage import UsageLedger, history_roots, rolled_back_turns, turn_history

__all__ = ["followed", "line_anchors", "overview_anchors"]  # re-exported: the counters' vocabulary

log = logging.getLogger(__name__)

COUNTERS_NAME = "entry-counters.json"
UNFOLLOWED_AFTER = 10  # shown this many turns and never followed: the curator proposes archiving it
HARMFUL_MIN = 2  # followed turns that failed, at least this many and more than those that passed
Standing = Literal["helpful", "harmful", "unfollowed", "neutral"]


@dataclass
class EntryCounters:
    """One entry's counters (see the module docstring)."""

    shown: int = 0
    followed: int = 0
    passed: int = 0
    failed: int = 0
    failed_gates: int = 0
    failed_cells: int = 0
    cancelled: int = 0
    rolled_back: int = 0
    corrected: int = 0  # followed turns the user's next prompt corrected
    last_shown: str | None = None
    # the entry's prediction (metadata.prediction): later turns that ran its command and passed
    # (hits) or failed (misses)
    hits: int = 0
    misses: int = 0

    @property
    def standing(self) -> Standing:
        if self.failed >= HARMFUL_MIN and self.failed > self.passed:
            return "harmful"
        if self.passed > self.failed:
            return "helpful"
        if self.followed == 0 and self.shown >= UNFOLLOWED_AFTER:
            return "unfollowed"
        return "neutral"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "standing": self.standing}

    def add(self, other: EntryCounters) -> None:
        """Fold `other` (the same entry's later turns) into these counters."""
        for name in ("shown", "followed", "passed", "failed", "failed_gates", "failed_cells"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("cancelled", "rolled_back", "corrected", "hits", "misses"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if other.last_shown and (self.last_shown is None or other.last_shown > self.last_shown):
            self.last_shown = other.last_shown

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> EntryCounters:
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for name in known:
            value = raw.get(name)
            if name == "last_shown":
                values[name] = value if isinstance(value, str) else None
            elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                values[name] = value
        return cls(**values)

    def describe(self) -> str:
        """One line: `shown 5, followed 3 (2 passed, 1 failed: 1 with failed gates) — helpful`."""
        text = f"shown {self.shown}, followed {self.followed}"
        if self.followed:
            causes = [
                f"{n} {what}"
                for n, what in (
                    (self.failed_gates, "with failed gates"),
                    (self.failed_cells, "with failed cells"),
                    (self.cancelled, "cancelled"),
                    (self.rolled_back, "rolled back"),
                    (self.corrected, "corrected by the user"),
                )
                if n
            ]
            text += f" ({self.passed} passed, {self.failed} failed" + (
                f": {', '.join(causes)})" if causes else ")"
            )
        text = f"{text} — {self.standing}"
        if self.hits or self.misses:
            text += f"; prediction: {self.hits} hit{'s' * (self.hits != 1)}, {self.misses} miss{'es' * (self.misses != 1)}"
        return text


def fold(
    records: Sequence[Mapping[str, Any]], rolled_back: set[int] | None = None
) -> dict[str, EntryCounters]:
    """The counters of every entry key in the ledger `records` (indexes in `rolled_back`: turns
    whose refinement was rolled back later, entry_usage.rolled_back_turns)."""
    out: dict[str, EntryCounters] = {}
    corrected_turns = corrected(records)
    for index, record in enumerate(records):
        gates = int(record.get("gates_failed") or 0) > 0
        cells = int(record.get("cells_failed") or 0) > 0
        cancelled = record.get("stop_reason") == "cancelled"
        undone = rolled_back is not None and index in rolled_back
        fixed = index in corrected_turns
        bad = gates or cells or cancelled or undone or fixed
        follow = {str(k) for k in record.get("followed") or [] if isinstance(k, str)}
        at = str(record.get("at") or "") or None
        for raw in record.get("predicted") or []:
            if isinstance(raw, str):
                checked = out.setdefault(raw, EntryCounters())
                checked.hits += not bad
                checked.misses += bad
        for raw in record.get("entries") or []:
            key = str(raw)
            counters = out.setdefault(key, EntryCounters())
            counters.shown += 1
            if at and (counters.last_shown is None or at > counters.last_shown):
                counters.last_shown = at
            if key not in follow:
                continue
            counters.followed += 1
            counters.passed += not bad
            counters.failed += bad
            counters.failed_gates += gates
            counters.failed_cells += cells
            counters.cancelled += cancelled
            counters.rolled_back += undone
            counters.corrected += fixed
    return out


def corrected(records: Sequence[Mapping[str, Any]]) -> set[int]:
    """Indexes of the ledger `records` a later line of the same session names in `corrects` (the
    user's next prompt read as a correction of that turn)."""
    turns = {(str(r.get("session")), str(r.get("started"))): i for i, r in enumerate(records)}
    out: set[int] = set()
    for record in records:
        target = record.get("corrects")
        if isinstance(target, str):
            index = turns.get((str(record.get("session")), target))
            if index is not None:
                out.add(index)
    return out


def predictions(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Entry key -> the command its prediction names, over a prompt view's entries by kind."""
    out: dict[str, str] = {}
    for items in entries.values():
        for key, entry in items.items():
            prediction = getattr(entry, "metadata", {}).get("prediction")
            if isinstance(prediction, dict) and isinstance(prediction.get("command"), str):
                command = prediction["command"].strip()
                if len(command) >= 3:
                    out[str(key)] = command
    return out


def lookup(counters: Mapping[str, EntryCounters], entry_id: str, scope: str | None = None) -> EntryCounters:
    """An entry's counters under the key the prompt showed it by: `<scope>:<id>` for a local or
    project entry whose id collided with another scope's, else `<id>`."""
    found = counters.get(f"{scope}:{entry_id}") if scope in ("local", "project") else None
    return found or counters.get(entry_id) or EntryCounters()


def prompt_order(counters: Mapping[str, EntryCounters]) -> dict[str, int]:
    """Key -> place in the prompt's order within what relevance chose: helpful 0, harmful 2 (the
    rest 1, left out)."""
    order: dict[str, int] = {}
    for key, value in counters.items():
        standing = value.standing
        if standing == "helpful":
            order[key] = 0
        elif standing == "harmful":
            order[key] = 2
    return order


# ------------------------------------------------------------------ kept beside the ledger


def _sizes(paths: Iterable[Path]) -> dict[str, int]:
    out: dict[str, int] = {}
    for path in paths:
        try:
            out[str(path)] = path.stat().st_size
        except OSError:
            out[str(path)] = -1
    return out


_MEMO: dict[str, tuple[dict[str, int], dict[str, EntryCounters]]] = {}
_MEMO_LOCK = threading.Lock()


class CounterFile:
    """`<home>/harness/entry-counters.json`: the counters and the sizes of their sources."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / "harness" / COUNTERS_NAME

    def read(self) -> tuple[dict[str, int], dict[str, EntryCounters]] | None:
        """The stored sources and counters, or None when the file is missing or damaged."""
        from harness_store.safe_read import HISTORY_MAX_BYTES, Refused, read_text

        try:
            raw = json.loads(read_text(self.path, limit=HISTORY_MAX_BYTES))
            sources = {str(k): int(v) for k, v in raw["sources"].items()}
            counters = {str(k): EntryCounters.from_json(v) for k, v in raw["counters"].items()}
        except FileNotFoundError:
            return None
        except (Refused, OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning(
                "entry counters %s are damaged (%s); rebuilding them from the usage ledger", self.path, exc
            )
            return None
        return sources, counters

    def write(self, sources: Mapping[str, int], counters: Mapping[str, EntryCounters]) -> None:
        from host_base.private_files import private_dir, write_atomic

        body = {"sources": dict(sources), "counters": {k: v.to_json() for k, v in counters.items()}}
        private_dir(self.path.parent, exact=False)
        write_atomic(self.path, json.dumps(body, ensure_ascii=False, sort_keys=True), sync=False)


def _ledger_records(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete ledger lines from byte `offset`, and the offset after the last one (a torn
    last line is left for later). Damaged lines are skipped, as `UsageLedger.read` does."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return [], 0
    end = data.rfind(b"\n") + 1
    records: list[dict[str, Any]] = []
    for line in data[:end].decode("utf-8", errors="replace").splitlines():
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and isinstance(value.get("entries"), list):
            records.append(value)
    return records, offset + end


def rebuild(home: Path) -> tuple[dict[str, int], dict[str, EntryCounters]]:
    """Fold the ledger and the histories it needs (rollbacks) from scratch. The ledger's source
    is the offset folded up to (whole lines), the histories' their sizes."""
    ledger = UsageLedger(home).path
    records, end = _ledger_records(ledger, 0)
    roots = history_roots(home, records)
    sources = {str(ledger): end, **_sizes(root / "refinements.jsonl" for root in roots)}
    return sources, fold(records, rolled_back_turns(records, turn_history(roots)))


def _grown(
    home: Path, stored: tuple[dict[str, int], dict[str, EntryCounters]]
) -> tuple[dict[str, int], dict[str, EntryCounters]] | None:
    """The stored counters with the turns appended to the ledger since folded in, when only the
    ledger grew (no history changed, no new session with a history of its own); else None.

    A rollback already in an unchanged history that undoes a refinement of one of the new turns
    (made while that turn ran, before its line was written) is counted at the next full refold,
    which any change of a history triggers."""
    sources, counters = stored
    ledger = str(UsageLedger(home).path)
    offset = sources.get(ledger)
    if offset is None:
        return None
    histories = {p: n for p, n in sources.items() if p != ledger}
    if _sizes(Path(p) for p in histories) != histories:
        return None
    if _sizes([Path(ledger)])[ledger] < offset:
        return None  # replaced or cut: refold from the start
    records, end = _ledger_records(Path(ledger), offset)
    if any(record.get("corrects") for record in records):
        return None  # a correction changes how an earlier turn went: refold (corrections are rare)
    for root in history_roots(home, records):
        path = str(root / "refinements.jsonl")
        if path not in histories:
            size = _sizes([Path(path)])[path]
            if size > 0:
                return None  # a new session's own history: its rollbacks need the full fold
            histories[path] = size
    merged = {key: replace(value) for key, value in counters.items()}
    for key, value in fold(records).items():
        mine = merged.setdefault(key, EntryCounters())
        mine.add(value)
    return {ledger: end, **histories}, merged


def _current(sources: Mapping[str, int]) -> bool:
    """True when no source moved since: the ledger's size is the offset folded up to."""
    sizes = _sizes(Path(p) for p in sources)
    return all(sizes[p] == n for p, n in sources.items())


def home_counters(home: Path, *, persist: bool = True) -> dict[str, EntryCounters]:
    """Every entry key's counters: from memory or the counters file while their sources are
    unchanged; the turns appended since folded in when only the ledger grew; else rebuilt from the
    ledger and histories (and the file rewritten, unless `persist` is False: a reader such as the
    review panel writes nothing to the data home)."""
    memo_key = str(home)
    with _MEMO_LOCK:
        hit = _MEMO.get(memo_key)
    if hit is not None and _current(hit[0]):
        return hit[1]
    store = CounterFile(home)
    stored = hit if hit is not None else store.read()
    if stored is not None and stored[0] and _current(stored[0]):
        sources, counters = stored
    else:
        grown = _grown(home, stored) if stored is not None and stored[0] else None
        sources, counters = grown if grown is not None else rebuild(home)
        if persist:
            try:
                store.write(sources, counters)
            except OSError as exc:
                log.warning("could not save entry counters %s: %s", store.path, exc)
    with _MEMO_LOCK:
        _MEMO[memo_key] = (sources, counters)
    return counters
