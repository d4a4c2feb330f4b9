"""Harness records as camelCase wire JSON (the shapes of the `_harness/*` answers)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING

from acp_server.protocol import frames

if TYPE_CHECKING:
    from acp_server.harness.state_pages import StateQuery
    from agent_core.refinement.records import RefinementOutcome
    from agent_core.refinement.surface import HarnessState, HarnessStatus, HistoryPage, RefinementResult

JsonObject = dict[str, object]

# User data inside entries keeps its own keys (a skill's arguments contract is not ours to rename).
_OPAQUE = frozenset({"reference", "arguments", "metadata"})


@lru_cache(maxsize=512)  # a few dozen field names, renamed for every entry of every answer
def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def to_wire(value: object) -> object:
    """snake_case model dumps -> camelCase JSON (user data under reference/arguments/metadata untouched)."""
    if value is None or isinstance(value, str | int | float):  # most leaves: no dump, no recursion
        return value
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        value = dump(mode="json")
    if isinstance(value, Mapping):
        return {
            _camel(str(k)): (v if k in _OPAQUE else to_wire(v))
            for k, v in value.items()
            if v is not None or k in ("before", "after")
        }
    if isinstance(value, list | tuple):
        return [to_wire(v) for v in value]
    return value


def to_wire_object(value: object) -> JsonObject:
    """`to_wire` of something that dumps to an object (a model, a mapping)."""
    wired = to_wire(value)
    if not isinstance(wired, dict):
        raise TypeError(f"{type(value).__name__} is not an object on the wire")
    return wired


def result_summary(result: RefinementResult) -> JsonObject:
    """One `_harness/history` line: id, summary, scope, trigger, time and the edits' outcomes."""
    body: JsonObject = {
        "id": result.id,
        "summary": result.summary,
        "scope": result.scope,
        "trigger": result.trigger,
        "createdAt": result.created_at,
        "edits": [
            {
                "action": e.action,
                "kind": e.kind,
                "id": e.id,
                "applied": e.applied,
                **({"error": e.error} if e.error else {}),
            }
            for e in result.applied_edits
        ],
    }
    if result.rollback_of:
        body["rollbackOf"] = result.rollback_of
    if result.review_of:
        body["reviewOf"] = result.review_of
    if result.tombstoned:  # a record that only added or lifted tombstones (no edits)
        body["tombstoned"] = [t.id for t in result.tombstoned]
    if result.lifted:
        body["lifted"] = [t.id for t in result.lifted]
    return body


def result_full(result: RefinementResult) -> JsonObject:
    """A whole history record (`_harness/show`, `_harness/rollback`): every field, edits with snapshots."""
    body = to_wire_object(result)
    body["edits"] = body.pop("appliedEdits", [])
    body["applied"] = bool(result.applied)
    return body


# Entry (by identity, held so the id stays its own) -> its wire object: entries are frozen, and a
# large harness is paged through many times; the dump + rename is most of a page's cost.
_WIRED: dict[int, tuple[object, JsonObject]] = {}


def _entry_wire(entry: object) -> JsonObject:
    hit = _WIRED.get(id(entry))
    if hit is not None and hit[0] is entry:
        return hit[1]
    wired = to_wire_object(entry)
    if len(_WIRED) >= 20_000:
        _WIRED.clear()
    _WIRED[id(entry)] = (entry, wired)
    return wired


def state_answer(
    state: HarnessState,
    query: StateQuery,
    cursor: str | None,
    limit: int,
    counters: Callable[[str, str], JsonObject] | None = None,
) -> JsonObject:
    """`_harness/state`: one page of at most `limit` entries under their keys (kind, then key order)
    after `cursor`, `total` (the entries of every page), `nextCursor` when more follow, and the
    tombstones (of the asked kind) on the first page only."""
    from acp_server.harness import state_pages  # at the first call: not on the start-up path

    after = state_pages.decode_cursor(query, cursor) if cursor else None
    page = state_pages.select(state.entries, query.kind, after, limit)
    entries = [{"key": key, **_entry_wire(state.entries[kind][key])} for kind, key in page.keys]
    if counters is not None:  # shown / followed / outcomes (agent_core/trust/entry_counters.py)
        for row in entries:
            row["counters"] = counters(str(row["id"]), str(row["scope"]))
    tombstones = (
        [to_wire_object(t) for t in state.tombstones if query.kind is None or t.kind == query.kind]
        if after is None
        else []
    )
    next_cursor = state_pages.encode_cursor(query, page.next_last) if page.next_last else None
    return frames.harness_state_response(entries, tombstones, next_cursor, page.total)


def status_answer(status: HarnessStatus) -> JsonObject:
    """`_harness/status`: quiescence, counts, and the last refinement id when there is one."""
    return frames.harness_status_response(
        status.quiescent, status.pending, status.in_flight, status.awaiting_review, status.last_refinement_id
    )


def history_answer(page: HistoryPage) -> JsonObject:
    """`_harness/history`: one page of refinement summaries, newest first, and the next cursor."""
    return frames.harness_history_response([result_summary(r) for r in page.records], page.next_cursor)


def await_quiescence_answer(quiescent: bool, last_refinement_id: str | None) -> JsonObject:
    """`_harness/await_quiescence`: settled or not, and the last refinement id."""
    return frames.await_quiescence_response(quiescent, last_refinement_id)


def rollback_refused(refinement_id: str, result: RefinementResult, *, force: bool) -> JsonObject:
    """The -32010 error of a rollback the store refused (data names the edits)."""
    return frames.rollback_refused_error(refinement_id, result.errors, result_full(result), force=force)


def already_rolled_back(refinement_id: str, rolled_back_by: str) -> JsonObject:
    """The -32010 error of a rollback of a refinement that an applied rollback already undoes."""
    reason = f"refinement {refinement_id} was already rolled back by {rolled_back_by}"
    return frames.rpc_error(
        frames.ROLLBACK_REFUSED,
        f"rollback of {refinement_id} was refused: {reason}",
        {"refinementId": refinement_id, "rolledBackBy": rolled_back_by, "errors": [reason]},
    )


def outcome_answer(outcome: RefinementOutcome) -> JsonObject:
    """A decided review's outcome (`_harness/review`), camelCase."""
    return to_wire_object(outcome.to_json())
