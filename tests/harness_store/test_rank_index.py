"""The overview's word index ranks exactly as the plain pass over every entry does, and the
prompt's view is reused only while every store's state is the same."""

from __future__ import annotations

import random

from test_harness_overview import entry, state

from harness_store import HarnessState, OverviewBudget, render_overview
from harness_store.scopes import ScopeStates

WORDS = "pandas plot csv git rebase kernel model deploy cache docker".split()


def _random_state(seed: int, n: int = 300):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    items = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 5)))
        items.append(
            entry(
                ("memory", "prompt", "skill", "subagent")[i % 4],
                f"e{i}",
                f"{words} note {i}",
                trust=rng.choice(["verified", "candidate", "rejected"]),
                updated=f"2026-01-01T00:{rng.randrange(60):02d}:{rng.randrange(60):02d}.000Z",
            )
        )
    return state(*items)


def test_the_indexed_ranking_equals_the_plain_pass_for_every_query() -> None:
    budget = OverviewBudget(entries_per_kind=7, max_chars=100_000)
    for seed in range(5):
        harness = _random_state(seed)
        for query in (None, "pandas", "git rebase", "deploy cache docker kernel", "nothing shared"):
            plain = render_overview(harness, query=query, budget=budget)  # first sighting: plain pass
            indexed = render_overview(harness, query=query, budget=budget)  # then the index
            again = render_overview(harness, query=query, budget=budget)
            assert indexed == plain == again, (seed, query)


def test_a_changed_scope_state_gives_a_new_prompt_view_and_an_unchanged_one_the_same() -> None:
    first = state(entry("memory", "a", "alpha"))
    local = state()
    view = ScopeStates(local, first).prompt_view()
    assert ScopeStates(state(), first).prompt_view() is view  # an empty local store read afresh
    changed = state(entry("memory", "a", "alpha"), entry("memory", "b", "beta"))
    new_view = ScopeStates(local, changed).prompt_view()
    assert new_view is not view and "b" in new_view.entries["memory"]


def test_a_write_to_one_kind_keeps_the_other_kinds_merged_dicts_so_their_indexes_are_reused(
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    from harness_store import HarnessStore
    from harness_store.project import ProjectStore

    def create(kind: str, entry_id: str) -> dict[str, object]:
        return {
            "action": "create",
            "kind": kind,
            "id": entry_id,
            "title": entry_id,
            "content": f"{entry_id} text",
        }

    (tmp_path / "repo" / ".git").mkdir(parents=True)
    glob, local = HarnessStore(tmp_path / "global"), HarnessStore(tmp_path / "local")
    project = ProjectStore(tmp_path / "repo")
    glob.apply({"edits": [create("memory", "g1"), create("prompt", "g2")]}, scope="global", trigger="user")
    project.apply({"edits": [create("prompt", "p1")]}, trigger="user")
    local.apply({"edits": [create("memory", "g1")]}, scope="local", trigger="user")  # collides: local:g1

    def view():  # type: ignore[no-untyped-def]
        return ScopeStates(local.load(), glob.load(), project.load()).prompt_view()

    before = view()
    glob.apply({"edits": [create("memory", "g3")]}, scope="global", trigger="user")
    after = view()
    assert after is not before
    assert after.entries["prompt"] is before.entries["prompt"]  # untouched kind: the same dict
    assert sorted(after.entries["memory"]) == ["g1", "g3", "local:g1"]
    assert sorted(after.entries["prompt"]) == ["g2", "p1"]


def test_the_prompt_view_and_its_overview_follow_a_rollback_and_a_hand_edit_of_a_project_file(
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    """The merged kinds and their word indexes are reused by the identity of their sources: what a
    rollback restores and what `git pull` writes into a project file must reach the prompt."""
    from harness_store import HarnessStore
    from harness_store.project import ProjectStore, project_root

    def create(kind: str, entry_id: str, content: str) -> dict[str, object]:
        return {"action": "create", "kind": kind, "id": entry_id, "title": entry_id, "content": content}

    (tmp_path / "repo" / ".git").mkdir(parents=True)
    glob, local = HarnessStore(tmp_path / "global"), HarnessStore(tmp_path / "local")
    project = ProjectStore(tmp_path / "repo")
    glob.apply({"edits": [create("memory", "g1", "pandas first")]}, scope="global", trigger="user")
    project.apply({"edits": [create("memory", "p1", "rebase onto main")]}, trigger="user")
    budget = OverviewBudget(entries_per_kind=7, max_chars=100_000)

    def overview() -> str:
        view = ScopeStates(local.load(), glob.load(), project.load()).prompt_view()
        for _ in range(2):  # the second ranking of a dict uses its index
            text = render_overview(view, query="pandas rebase", budget=budget)
        return text

    before = overview()
    added = glob.apply({"edits": [create("memory", "g2", "pandas later")]}, scope="global", trigger="user")
    assert "pandas later" in overview()
    glob.rollback(added.id)
    assert overview() == before
    path = project_root(tmp_path / "repo") / "entries" / "memory" / "p1.md"
    path.write_text(path.read_text().replace("rebase onto main", "rebase onto trunk, pulled"))
    pulled = overview()
    assert "rebase onto trunk, pulled" in pulled and "rebase onto main" not in pulled


def test_an_index_derived_after_a_few_writes_ranks_as_a_fresh_plain_pass() -> None:
    """The next prompt after a write ranks a copy of the kind's dict with a few entries changed: its
    index is derived from the last one, and must choose exactly what a plain pass over it chooses."""
    from harness_store import rank_index

    budget = OverviewBudget(entries_per_kind=7, max_chars=100_000)
    queries = (None, "pandas", "git rebase", "deploy cache docker kernel", "nothing shared")
    for seed in range(4):
        rng = random.Random(seed)
        harness = _random_state(seed)
        for _ in range(2):  # index the view (the second ranking builds it)
            render_overview(harness, query="pandas", budget=budget)
        for step in range(4):  # each index derived from the last derived one
            entries = {kind: dict(items) for kind, items in harness.entries.items()}
            memory = entries["memory"]
            for key in rng.sample(sorted(memory), 3):  # deleted
                del memory[key]
            for i in range(2):  # updated or created now: newer than every entry
                key = rng.choice([*sorted(memory), f"new{step}{i}"])
                words = " ".join(rng.choice(WORDS) for _ in range(3))
                memory[key] = entry(
                    "memory",
                    key,
                    f"{words} fresh",
                    trust=rng.choice(["verified", "candidate", "rejected"]),
                    updated=f"2026-02-0{step + 1}T00:00:0{i}.000Z",
                )
            harness = HarnessState.build(entries)
            derived = [render_overview(harness, query=queries[0], budget=budget)]
            # Indexed at its first sighting, so derived: a plain pass indexes a dict at its second.
            assert rank_index._indexes[id(harness.entries["memory"])][0] is harness.entries["memory"]
            derived += [render_overview(harness, query=q, budget=budget) for q in queries[1:]]
            caches = (rank_index._latest, rank_index._indexes, rank_index._seen)
            kept = [dict(cache) for cache in caches]
            plain = []
            for q in queries:  # each a first sighting of an equal state: the plain pass
                for cache in caches:
                    cache.clear()
                fresh = HarnessState.build({kind: dict(items) for kind, items in entries.items()})
                plain.append(render_overview(fresh, query=q, budget=budget))
            for cache, saved in zip(caches, kept, strict=True):  # the next step derives from this one
                cache.clear()
                cache.update(saved)  # type: ignore[arg-type]
            assert derived == plain, (seed, step)
