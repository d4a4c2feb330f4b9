"""The prompt's view of the harness: `merge` of global + local, and the ranked, budgeted overview.

Which entries fit the budget is decided by rank (trust, then keyword relevance to the current
prompt, then recency), never by insertion order; what does not fit is counted, never silently
dropped; rejected entries never appear (beyond 7).
"""

from __future__ import annotations

import heapq
import re
from dataclasses import dataclass
from functools import lru_cache

from harness_store.models import KINDS, HarnessEntry, HarnessState

_WORD = re.compile(r"[a-z0-9]{3,}")
_TRUST_RANK = {"verified": 0, "candidate": 1}
_HEADINGS = {"prompt": "Prompt notes", "memory": "Memories", "skill": "Skills", "subagent": "Subagents"}
_ENTRY_CHARS = 400


@dataclass(frozen=True)
class OverviewBudget:
    """How much of the prompt the harness overview may take."""

    entries_per_kind: int = 20
    max_chars: int = 8000


DEFAULT_BUDGET = OverviewBudget()


def merge(global_state: HarnessState, local_state: HarnessState) -> HarnessState:
    """Global and local entries together; a local id that collides with a global one is keyed `local:<id>`."""
    entries: dict[str, dict[str, HarnessEntry]] = {}
    for kind in KINDS:
        merged = dict(global_state.entries.get(kind, {}))
        for key, entry in local_state.entries.get(kind, {}).items():
            merged[f"local:{key}" if key in merged else key] = entry
        entries[kind] = merged
    return HarnessState.build(entries, [*global_state.tombstones, *local_state.tombstones])


@lru_cache(maxsize=65536)
def _words(text: str) -> frozenset[str]:
    # Cached on the text itself: entries are immutable, so a 10k-entry overview re-tokenizes nothing.
    return frozenset(_WORD.findall(text.lower()))


def _entry_words(entry: HarnessEntry) -> frozenset[str]:
    return _words(entry.title) | _words(entry.content) | _words(entry.path)


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _format(key: str, entry: HarnessEntry) -> str:
    tag = "" if entry.trust == "verified" else " (candidate)"
    where = f"`{key}`" + ("" if entry.path == "general" else f", {entry.path}")
    if entry.kind == "skill":
        module = entry.reference.get("import", "?")
        func = entry.reference.get("callable", "?")
        args = ", ".join(str(name) for name in entry.arguments)
        head = f"- **{entry.title}**{tag} [{where}] `{module}.{func}({args})`"
    else:
        head = f"- **{entry.title}**{tag} [{where}]"
    return f"{head}: {_one_line(entry.content, _ENTRY_CHARS)}"


def _ranked(
    items: dict[str, HarnessEntry], query_words: frozenset[str], limit: int
) -> list[tuple[str, HarnessEntry]]:
    def key(pair: tuple[str, HarnessEntry]) -> tuple[int, int, str]:
        entry = pair[1]
        relevance = len(query_words & _entry_words(entry)) if query_words else 0
        # heapq.nsmallest: smaller is better, so negate relevance; recency via inverted timestamp order.
        return (_TRUST_RANK[entry.trust], -relevance, _invert(entry.updated_at))

    visible = [(k, e) for k, e in items.items() if e.trust != "rejected"]
    return heapq.nsmallest(limit, visible, key=key)


def _invert(stamp: str) -> str:
    # Newest first inside an ascending sort: map each character so later timestamps sort earlier.
    return stamp.translate(_INVERT)


_INVERT = str.maketrans("0123456789", "9876543210")


def render_overview(
    state: HarnessState, *, query: str | None = None, budget: OverviewBudget | int = DEFAULT_BUDGET
) -> str:
    """The harness section of the system prompt (markdown); empty string when there is nothing to show."""
    if isinstance(budget, int):
        budget = OverviewBudget(max_chars=budget)
    query_words = _words(query) if query else frozenset()
    kinds = [k for k in KINDS if any(e.trust != "rejected" for e in state.entries.get(k, {}).values())]
    if not kinds:
        return ""
    sections: list[str] = []
    remaining_chars = budget.max_chars
    for position, kind in enumerate(kinds):
        items = state.entries[kind]
        total = sum(1 for e in items.values() if e.trust != "rejected")
        # Each kind gets a fair share of what is left, so one big kind cannot starve the others.
        share = remaining_chars // (len(kinds) - position)
        lines = [f"### {_HEADINGS[kind]}"]
        used = len(lines[0]) + 1
        shown = 0
        for key, entry in _ranked(items, query_words, budget.entries_per_kind):
            line = _format(key, entry)
            if used + len(line) + 1 > share and shown > 0:
                break
            if used + len(line) + 1 > share:
                line = line[: max(share - used - 2, 40)] + "…"
            lines.append(line)
            used += len(line) + 1
            shown += 1
        if total > shown:
            lines.append(f"+{total - shown} more {kind} entries; use harness.search()")
            used += len(lines[-1]) + 1
        sections.append("\n".join(lines))
        remaining_chars -= used
    return "## Continual harness\n\n" + "\n\n".join(sections) + "\n"
