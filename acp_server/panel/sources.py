"""What the panel reads: the global store and every session's local store, through the store API.

One `HarnessStore` object per store root for the panel's lifetime (it caches the state and the
history index across reads), and per store a list of history records extended with only what was
appended since the last look (`history_page` from the newest end until the known last id), so a
page of the timeline does not re-parse 10,000 records. Nothing is copied to disk: the files the
agent writes are the only data.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_server.panel.diffs import line_diff
from acp_server.panel.evidence import EvidenceReader
from acp_server.panel.sessions import describe_sessions, session_ids
from agent_core.trust.entry_counters import EntryCounters, home_counters
from agent_core.trust.entry_counters import lookup as lookup_counters
from agent_core.trust.entry_usage import EntryUsage, home_usage
from agent_core.trust.entry_usage import describe as describe_usage

if TYPE_CHECKING:
    from agent_core import HarnessStore
    from agent_core.refinement.surface import HarnessEntry, RefinementResult

GLOBAL = "global"
KIND_ORDER = ("prompt", "memory", "skill", "subagent")
SYNC_PAGE = 500
PREVIEW_CHARS = 240


class PanelQueryError(ValueError):
    """A request names something that does not exist or asks with a bad value (HTTP 400/404)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


@dataclass
class StoreView:
    """One store (global, or a session's local one) and its history as the panel has read it."""

    key: str  # "global" or the session id
    store: HarnessStore  # named through agent_core: acp_server never imports harness_store
    records: list[RefinementResult] = field(default_factory=list)  # oldest first
    positions: dict[str, int] = field(default_factory=dict)
    last_writer: dict[tuple[str, str], str] = field(default_factory=dict)
    undone: dict[str, str] = field(default_factory=dict)  # refinement id -> applied rollback of it
    history_key: tuple[int, int, int] | None = None

    @property
    def scope(self) -> str:
        return "global" if self.key == GLOBAL else "local"

    @property
    def session_id(self) -> str | None:
        return None if self.key == GLOBAL else self.key

    def sync(self) -> bool:
        """Read what was appended since the last call; True when something changed."""
        key = _stat_key(self.store.history_path)
        if key == self.history_key:
            return False
        newest = self.store.history(1)
        if not newest:
            changed = bool(self.records)
            self._reset([])
            self.history_key = key
            return changed
        known = self.records[-1].id if self.records else None
        if newest[-1].id == known:
            self.history_key = key
            return False
        fresh: list[RefinementResult] = []
        before: str | None = None
        # Usually a few records were appended: read a small page first, then larger ones.
        size = 8 if known is not None else SYNC_PAGE
        while True:
            page, cursor = self.store.history_page(size, before)
            size = min(size * 8, SYNC_PAGE)
            ids = [r.id for r in page]
            if known is not None and known in ids:
                fresh = page[ids.index(known) + 1 :] + fresh
                self._extend(fresh)
                break
            fresh = page + fresh
            if cursor is None or not page:
                self._reset(fresh)  # the known record is gone: the file was replaced
                break
            before = page[0].id
        self.history_key = key
        return True

    def _reset(self, records: list[RefinementResult]) -> None:
        self.records, self.positions, self.last_writer, self.undone = [], {}, {}, {}
        self._extend(records)

    def _extend(self, records: Iterable[RefinementResult]) -> None:
        for record in records:
            self.positions[record.id] = len(self.records)
            self.records.append(record)
            for edit in record.applied_edits:
                if edit.applied and edit.id:
                    self.last_writer[(edit.kind, edit.id)] = record.id
            if record.rollback_of is not None and record.applied:
                self.undone[record.rollback_of] = record.id

    def rolled_back_by(self, refinement_id: str) -> str | None:
        """The applied rollback currently undoing `refinement_id` (None if it is in effect)."""
        later = self.undone.get(refinement_id)
        if later is None or later in self.undone:
            return None
        return later


def _usage(
    entry: HarnessEntry, usage: dict[str, EntryUsage], counters: Mapping[str, EntryCounters] | None = None
) -> dict[str, Any]:
    """The entry's use in prompts (agent_core.trust.entry_usage), keyed as the prompt showed it."""
    found = usage.get(entry.id) or usage.get(f"{entry.scope}:{entry.id}")
    return {
        "turns": found.turns if found else 0,
        "last_used": found.last_used if found else None,
        "bad_turns": found.bad_turns if found else 0,
        "review": (found or EntryUsage()).review_reason(created_at=entry.created_at, now=datetime.now(UTC)),
        "text": describe_usage(found, created_at=entry.created_at),
        # shown / followed / outcomes, and the standing the prompt orders by (entry_counters.py)
        "counters": lookup_counters(counters or {}, entry.id, entry.scope).to_json(),
    }


def _entry_row(
    view: StoreView,
    entry: HarnessEntry,
    key: str,
    usage: dict[str, EntryUsage] | None = None,
    counters: Mapping[str, EntryCounters] | None = None,
) -> dict[str, Any]:
    content = entry.content
    return {
        "store": view.key,
        "key": key,
        "id": entry.id,
        "kind": entry.kind,
        "scope": entry.scope,
        "session_id": view.session_id,
        "title": entry.title,
        "trust": entry.trust,
        "version": entry.version,
        "source": entry.source,
        "path": entry.path,
        "updated_at": entry.updated_at,
        "created_at": entry.created_at,
        "preview": content if len(content) <= PREVIEW_CHARS else content[:PREVIEW_CHARS] + " …",
        "last_refinement": view.last_writer.get((entry.kind, entry.id)),
        "usage": _usage(entry, usage or {}, counters),
    }


def _summary(view: StoreView, record: RefinementResult) -> dict[str, Any]:
    edits = record.applied_edits
    return {
        "id": record.id,
        "store": view.key,
        "scope": record.scope,
        "session_id": record.session_id,
        "trigger": record.trigger,
        "summary": record.summary,
        "created_at": record.created_at,
        "applied": sum(1 for e in edits if e.applied),
        "refused": sum(1 for e in edits if not e.applied),
        "edits": [
            {"action": e.action, "kind": e.kind, "id": e.id, "applied": e.applied, "error": e.error}
            for e in edits
        ],
        "rollback_of": record.rollback_of,
        "review_of": record.review_of,
        # A rejection before apply or a lift: tombstones changed, no entry did.
        "tombstoned": [t.id for t in record.tombstoned],
        "lifted": [t.id for t in record.lifted],
        "rolled_back_by": view.rolled_back_by(record.id),
    }


def welcome_text(home: Path) -> str:
    """What the panel shows instead of an empty table while the harness under `home` holds nothing:
    what the panel is, how an entry gets into it, and why the demo left nothing here."""
    return (
        "This panel shows the continual harness: what the agent keeps between sessions (prompt "
        "notes, memories, skills and subagents), in a global store and one store per session, under "
        f"{home}.\n\n"
        "Nothing is in it yet. An entry gets here from a session in your editor: after a turn (or "
        "when you type /refine) the agent proposes a refinement; local ones apply as candidates, "
        "global ones wait under Review until you approve them, here or in the editor. Each one then "
        "shows under Entries and in the Timeline, where it can be rolled back.\n\n"
        "`continual-acp demo` keeps its session in a throwaway data directory, so nothing from it "
        "appears here."
    )


class PanelData:
    """Queries over every store under one data home (thread-safe; call from worker threads)."""

    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.evidence = EvidenceReader(self.home)
        self._lock = threading.RLock()
        self._views: dict[str, StoreView] = {}
        self._timeline: list[tuple[StoreView, RefinementResult]] | None = None
        self._timeline_key: tuple[tuple[str, int, str | None], ...] | None = None

    def welcome(self) -> str | None:
        """`welcome_text` while no store holds an entry, a refinement or a pending review, else None."""
        if self.entries(limit=1)["total"] or self.timeline(limit=1)["total"] or self.pending():
            return None
        return welcome_text(self.home)

    # ------------------------------------------------------------ stores

    def root_of(self, key: str) -> Path:
        """The store root of `global` or a session id (validated: no path tricks)."""
        if key == GLOBAL:
            return self.home / "harness"
        if not key or "/" in key or "\\" in key or key.startswith("."):
            raise PanelQueryError(f"invalid session id {key!r}")
        return self.home / "sessions" / key / "harness"

    def view(self, key: str) -> StoreView:
        """The view of one store, created on first use (the store itself creates nothing by reading)."""
        with self._lock:
            found = self._views.get(key)
            if found is None:
                from agent_core import HarnessStore

                found = StoreView(key, HarnessStore(self.root_of(key)))
                self._views[key] = found
            return found

    def store_keys(self) -> list[str]:
        """`global` and every session that has a harness directory."""
        keys = [GLOBAL]
        keys += [sid for sid in session_ids(self.home) if (self.home / "sessions" / sid / "harness").is_dir()]
        return keys

    def views(self, scope: str | None = None, session: str | None = None) -> list[StoreView]:
        """The synced views selected by a scope and/or session filter."""
        if scope not in (None, "", "global", "local"):
            raise PanelQueryError(f"scope must be global or local, not {scope!r}")
        keys = self.store_keys()
        if session:
            self.root_of(session)
            keys = [k for k in keys if k == session or (k == GLOBAL and scope == "global")]
        if scope == "global":
            keys = [k for k in keys if k == GLOBAL]
        elif scope == "local":
            keys = [k for k in keys if k != GLOBAL]
        with self._lock:
            views = [self.view(k) for k in keys]
            for v in views:
                v.sync()
            return views

    def find_refinement(self, refinement_id: str) -> tuple[StoreView, RefinementResult]:
        """The store holding `refinement_id` and its record; 404 when no store has it."""
        for view in self.views():
            position = view.positions.get(refinement_id)
            if position is not None:
                return view, view.records[position]
        raise PanelQueryError(f"no refinement {refinement_id!r} in any store under {self.home}", 404)

    # ------------------------------------------------------------ entries

    def entries(
        self,
        *,
        scope: str | None = None,
        session: str | None = None,
        kind: str | None = None,
        trust: str | None = None,
        query: str | None = None,
        marked: bool = False,
        offset: int = 0,
        limit: int = 100,
    ) -> dict[str, Any]:
        """Current entries, grouped by kind (prompt, memory, skill, subagent), paged; `marked`: only
        those their use in prompts marks for review (agent_core.entry_usage)."""
        if kind and kind not in KIND_ORDER:
            raise PanelQueryError(f"kind must be one of {', '.join(KIND_ORDER)}, not {kind!r}")
        if trust and trust not in ("candidate", "verified", "rejected"):
            raise PanelQueryError(f"trust must be candidate, verified or rejected, not {trust!r}")
        words = (query or "").lower().split()
        rows: list[dict[str, Any]] = []
        counts = {k: 0 for k in KIND_ORDER}
        usage = home_usage(self.home)
        counters = home_counters(self.home, persist=False)
        for view in self.views(scope, session):
            state = view.store.load()
            for entry_kind in KIND_ORDER:
                if kind and entry_kind != kind:
                    continue
                for key, entry in state.entries.get(entry_kind, {}).items():
                    if trust and entry.trust != trust:
                        continue
                    if words:
                        hay = f"{key} {entry.title} {entry.content} {entry.path}".lower()
                        if not all(w in hay for w in words):
                            continue
                    row = _entry_row(view, entry, key, usage, counters)
                    if marked and not row["usage"]["review"]:
                        continue
                    counts[entry_kind] += 1
                    rows.append(row)
        rows.sort(key=lambda r: (KIND_ORDER.index(r["kind"]), r["scope"] != "global", r["id"], r["store"]))
        return {
            "total": len(rows),
            "counts": counts,
            "offset": offset,
            "entries": rows[offset : offset + limit],
        }

    def entry(self, store_key: str, kind: str, entry_id: str) -> dict[str, Any]:
        """One entry in full, with the refinements that wrote it (newest first)."""
        view = self.view(store_key)
        with self._lock:
            view.sync()
        current = view.store.load().get(kind, entry_id)
        if current is None:
            raise PanelQueryError(f"no {kind} entry {entry_id!r} in the {store_key} store", 404)
        writers = [
            _summary(view, r)
            for r in reversed(view.records)
            if any(e.applied and e.kind == kind and e.id == entry_id for e in r.applied_edits)
        ]
        row = _entry_row(
            view, current, entry_id, home_usage(self.home), home_counters(self.home, persist=False)
        )
        row.update(
            content=current.content,
            reference=current.reference,
            arguments=current.arguments,
            metadata=current.metadata,
            evidence=self.evidence.quotes(view.session_id, list(current.evidence))
            if current.evidence
            else [],
            refinements=writers[:50],
        )
        return row

    # ------------------------------------------------------------ timeline

    def _merged(self) -> list[tuple[StoreView, RefinementResult]]:
        views = self.views()
        key = tuple((v.key, len(v.records), v.records[-1].id if v.records else None) for v in views)
        with self._lock:
            if self._timeline is None or self._timeline_key != key:
                merged = [(v, r) for v in views for r in v.records]
                merged.sort(key=lambda pair: (pair[1].created_at, pair[1].id), reverse=True)
                self._timeline, self._timeline_key = merged, key
            return self._timeline

    def timeline(
        self,
        *,
        scope: str | None = None,
        session: str | None = None,
        kind: str | None = None,
        trigger: str | None = None,
        before: str | None = None,
        limit: int = 50,
    ) -> dict[str, Any]:
        """Refinements newest first, filtered; `before` is the cursor (the last id of the previous page)."""
        if scope not in (None, "", "global", "local"):
            raise PanelQueryError(f"scope must be global or local, not {scope!r}")
        if session:
            self.root_of(session)
        merged = self._merged()
        start = 0
        if before:
            start = next((i + 1 for i, (_v, r) in enumerate(merged) if r.id == before), -1)
            if start < 0:
                raise PanelQueryError(f"unknown cursor {before!r}")
        page: list[dict[str, Any]] = []
        next_cursor: str | None = None
        for view, record in merged[start:]:
            if scope and record.scope != scope:
                continue
            if session and record.session_id != session:
                continue
            if trigger and record.trigger != trigger:
                continue
            if kind and not any(e.kind == kind for e in record.applied_edits):
                continue
            if len(page) == limit:
                next_cursor = page[-1]["id"]
                break
            page.append(_summary(view, record))
        total = sum(len(v.records) for v in self.views())
        return {"refinements": page, "next_cursor": next_cursor, "total": total}

    def refinement(self, refinement_id: str) -> dict[str, Any]:
        """One refinement in full: every edit with its diff, refusal reason and quoted evidence."""
        from agent_core.refinement.reporting import edit_summary

        view, record = self.find_refinement(refinement_id)
        body = _summary(view, record)
        body.update(rationale=record.rationale, expected_outcome=record.expected_outcome)
        edits = []
        for edit in record.applied_edits:
            shown = edit_summary(edit, scope=record.scope)
            titled = edit.after or edit.before
            edits.append(
                {
                    "action": edit.action,
                    "kind": edit.kind,
                    "id": edit.id,
                    "scope": shown["scope"],
                    "applied": edit.applied,
                    "error": edit.error,
                    "reason": edit.reason,
                    "before_version": edit.before.version if edit.before else None,
                    "after_version": edit.after.version if edit.after else None,
                    "before_trust": edit.before.trust if edit.before else None,
                    "after_trust": edit.after.trust if edit.after else None,
                    "title": titled.title if titled is not None else edit.title,
                    "diff": line_diff(shown.get("before"), shown.get("after")) if "after" in shown else [],
                    "proposed": None if "after" in shown else (edit.content or ""),
                    "evidence": self.evidence.quotes(record.session_id, list(edit.evidence or [])),
                }
            )
        body["edits"] = edits
        return body

    # ------------------------------------------------------------ tombstones, pending, as-of, sessions

    def tombstones(self) -> list[dict[str, Any]]:
        """Every tombstone of every store, newest first."""
        out: list[dict[str, Any]] = []
        for view in self.views():
            for stone in view.store.load().tombstones:
                out.append({"store": view.key, "scope": view.scope, **stone.model_dump(mode="json")})
        out.sort(key=lambda t: str(t["created_at"]), reverse=True)
        return out

    def pending(self) -> list[dict[str, Any]]:
        """Every proposal waiting for review (global and local), with one diff per edit."""
        from agent_core.refinement.pending_files import PendingFiles
        from agent_core.refinement.reporting import preview_edits

        out: list[dict[str, Any]] = []
        keys = [GLOBAL, *session_ids(self.home)]
        for key in keys:
            directory = self.root_of(key) / "pending"
            if not directory.is_dir():
                continue
            files = PendingFiles(directory)
            view = self.view(key)
            state = view.store.load()
            for waiting in files.load_all():
                proposer = proposer_of(directory, waiting.proposal_id) or view.session_id
                edits = [
                    {**e, "diff": line_diff(e.get("before"), e.get("after")), "before": None, "after": None}
                    for e in preview_edits(waiting, state)
                ]
                for shown, edit in zip(edits, waiting.proposal.edits, strict=False):
                    shown["evidence"] = self.evidence.quotes(proposer, list(edit.evidence or []))
                if waiting.held is not None:  # a cell's change to .continual-acp/, held: its files
                    edits = [
                        {"action": f.action, "kind": "file", "id": f.path, "path": f.path, "diff": f.diff()}
                        for f in waiting.held.files
                    ]
                out.append(
                    {
                        "proposal_id": waiting.proposal_id,
                        "store": key,
                        "scope": waiting.scope,
                        "session_id": proposer,
                        "trigger": waiting.trigger,
                        "summary": waiting.proposal.summary,
                        "rationale": waiting.proposal.rationale,
                        "created_at": waiting.created_at,
                        "edits": edits,
                    }
                )
        out.sort(key=lambda p: p["created_at"], reverse=True)
        return out

    def as_of(self, refinement_id: str) -> dict[str, Any]:
        """The harness right after `refinement_id`: its store replayed to it (`state_as_of`) and,
        for a local refinement, the global store as of the same moment."""
        view, record = self.find_refinement(refinement_id)
        rows: list[dict[str, Any]] = []
        state = view.store.state_as_of(refinement_id)
        rows += [
            _entry_row(view, e, k) for kind in KIND_ORDER for k, e in state.entries.get(kind, {}).items()
        ]
        global_head: str | None = None
        if view.key != GLOBAL:
            glob = self.view(GLOBAL)
            earlier = [r for r in glob.records if (r.created_at, r.id) <= (record.created_at, record.id)]
            if earlier:
                global_head = earlier[-1].id
                gstate = glob.store.state_as_of(global_head)
                rows += [
                    _entry_row(glob, e, k)
                    for kind in KIND_ORDER
                    for k, e in gstate.entries.get(kind, {}).items()
                ]
        for row in rows:
            row["last_refinement"] = None  # "last change" means now; as-of rows carry their version
        rows.sort(key=lambda r: (KIND_ORDER.index(r["kind"]), r["scope"] != "global", r["id"]))
        return {"refinement": _summary(view, record), "global_as_of": global_head, "entries": rows}

    def sessions(self) -> list[dict[str, Any]]:
        """Sessions with open/closed, owner pid, pending-review count and refinement count."""
        out = []
        for info in describe_sessions(self.home):
            body = info.to_json()
            if info.has_harness:
                view = self.view(info.session_id)
                with self._lock:
                    view.sync()
                body["refinements"] = len(view.records)
                body["last_refinement_at"] = view.records[-1].created_at if view.records else None
            else:
                body["refinements"], body["last_refinement_at"] = 0, None
            out.append(body)
        return out

    def transcript(self, session_id: str, limit: int = 200) -> dict[str, Any]:
        """A session's last messages (the page evidence links point into)."""
        self.root_of(session_id)
        if not (self.home / "sessions" / session_id).is_dir():
            raise PanelQueryError(f"no session {session_id!r}", 404)
        return {"session_id": session_id, "messages": self.evidence.transcript(session_id, limit)}


def proposer_of(directory: Path, proposal_id: str) -> str | None:
    """The session that proposed a saved review (pending_files.py writes it beside the proposal)."""
    try:
        raw = json.loads((directory / f"{proposal_id}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    sid = raw.get("session_id") if isinstance(raw, dict) else None
    return sid if isinstance(sid, str) and sid else None


__all__ = ["GLOBAL", "PanelData", "PanelQueryError", "StoreView", "proposer_of"]
