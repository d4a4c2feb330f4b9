"""merge() keeps colliding entries visible; render_overview ranks, budgets, counts, hides rejected."""

from __future__ import annotations

from harness_store import HarnessEntry, HarnessState, OverviewBudget, merge, render_overview

NOW = "2026-01-01T00:00:00.000Z"


def entry(
    kind: str,
    entry_id: str,
    content: str,
    *,
    trust: str = "verified",
    scope: str = "global",
    updated: str = NOW,
    title: str | None = None,
) -> HarnessEntry:
    return HarnessEntry.model_validate(
        {
            "id": entry_id,
            "kind": kind,
            "title": title or entry_id.title(),
            "content": content,
            "scope": scope,
            "trust": trust,
            "created_at": NOW,
            "updated_at": updated,
        }
    )


def state(*entries: HarnessEntry) -> HarnessState:
    built = HarnessState()
    for e in entries:
        built.entries[e.kind][e.id] = e
    return built


def test_merge_keeps_colliding_local_and_global_entries_visible() -> None:
    merged = merge(
        state(entry("memory", "style", "global style"), entry("memory", "only_global", "g")),
        state(
            entry("memory", "style", "local style", scope="local"),
            entry("skill", "only_local", "l", scope="local"),
        ),
    )
    assert merged.get("memory", "style").content == "global style"  # type: ignore[union-attr]
    assert merged.get("memory", "local:style").content == "local style"  # type: ignore[union-attr]
    assert merged.get("memory", "only_global") is not None and merged.get("skill", "only_local") is not None
    text = render_overview(merged)
    assert "global style" in text and "local style" in text and "`local:style`" in text


def test_rejected_entries_never_reach_the_overview() -> None:
    text = render_overview(
        state(entry("memory", "good", "keep me"), entry("memory", "bad", "SECRET-REJECTED", trust="rejected"))
    )
    assert "keep me" in text
    assert "SECRET-REJECTED" not in text and "bad" not in text.lower().replace("+", "")
    only_rejected = render_overview(state(entry("memory", "bad", "SECRET-REJECTED", trust="rejected")))
    assert only_rejected == ""


def test_verified_entries_rank_before_candidates_whatever_the_insertion_order() -> None:
    items = [entry("memory", f"cand{i}", f"candidate {i}", trust="candidate") for i in range(5)]
    items.append(entry("memory", "trusted", "verified fact"))
    text = render_overview(state(*items), budget=OverviewBudget(entries_per_kind=1))
    assert "verified fact" in text and "candidate 0" not in text
    assert "+5 more memory entries; use harness.search()" in text


def test_relevance_to_the_prompt_ranks_before_recency() -> None:
    old_relevant = entry(
        "memory", "pandas", "pandas dataframe merge tips", updated="2020-01-01T00:00:00.000Z"
    )
    new_irrelevant = entry("memory", "git", "rebase workflow", updated="2026-06-01T00:00:00.000Z")
    text = render_overview(
        state(new_irrelevant, old_relevant),
        query="how do I merge two pandas frames",
        budget=OverviewBudget(entries_per_kind=1),
    )
    assert "pandas dataframe" in text and "rebase" not in text


def test_a_candidate_the_prompt_needs_ranks_before_verified_entries_it_does_not() -> None:
    verified = [entry("memory", f"v{i}", f"verified unrelated fact {i}") for i in range(5)]
    needed = entry("memory", "kafka", "kafka offsets reset after a rebalance", trust="candidate")
    text = render_overview(
        state(*verified, needed),
        query="why do my kafka offsets jump after a rebalance",
        budget=OverviewBudget(entries_per_kind=2),
    )
    assert "kafka offsets reset" in text
    shown = [f"verified unrelated fact {i}" in text for i in range(5)]
    assert shown.count(True) == 1  # the second slot goes to a verified entry (trust breaks the tie)


def test_recency_breaks_ties() -> None:
    older = entry("memory", "older", "older note", updated="2020-01-01T00:00:00.000Z")
    newer = entry("memory", "newer", "newer note", updated="2026-01-01T00:00:00.000Z")
    text = render_overview(state(older, newer), budget=OverviewBudget(entries_per_kind=1))
    assert "newer note" in text and "older note" not in text


def test_character_budget_is_respected_and_the_overflow_is_counted() -> None:
    items = [entry("memory", f"m{i:03d}", "x" * 300) for i in range(100)]
    items += [entry("skill", f"s{i}", "skill body") for i in range(3)]
    text = render_overview(state(*items), budget=OverviewBudget(entries_per_kind=50, max_chars=2000))
    assert len(text) <= 2000 + 200  # the heading and overflow lines may add a little
    assert "more memory entries; use harness.search()" in text
    shown_memories = text.count("[`m")
    assert f"+{100 - shown_memories} more memory entries" in text
    # One large kind does not starve the others.
    assert text.count("skill body") == 3


def test_skills_show_their_call_signature() -> None:
    skill = entry("skill", "csv", "summarize a csv").model_copy(
        update={
            "reference": {"type": "python", "import": "skills.csv", "callable": "summarize"},
            "arguments": {"path": {}, "limit": {}},
        }
    )
    assert "`skills.csv.summarize(path, limit)`" in render_overview(state(skill))


def test_integer_budget_means_characters() -> None:
    items = [entry("memory", f"m{i}", "y" * 200) for i in range(50)]
    assert len(render_overview(state(*items), budget=1000)) < 1300
