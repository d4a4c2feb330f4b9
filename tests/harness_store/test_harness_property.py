"""Property: any sequence of random proposals (and reviews), then rolling back every result newest
first, restores the initial entries exactly in their content fields."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness_store import HarnessState, HarnessStore

IDS = ["alpha", "beta", "gamma"]
KINDS = ["prompt", "memory", "skill", "subagent"]
TEXT = st.sampled_from(["one", "two", "Alpha", "Beta", "three words here", "", "  "])
REFERENCE = st.sampled_from(
    [
        {"type": "python", "import": "skills.a", "callable": "run"},
        {"type": "python", "import": "skills.b", "callable": "go"},
        {"type": "shell", "import": "x", "callable": "y"},
    ]
)


@st.composite
def edits(draw: st.DrawFn) -> dict[str, Any]:
    edit: dict[str, Any] = {
        "action": draw(st.sampled_from(["create", "update", "delete", "create", "update", "rename"])),
        "kind": draw(st.sampled_from([*KINDS, "tool"])),
    }
    if draw(st.booleans()):
        edit["id"] = draw(st.sampled_from(IDS))
    for name in ("title", "content"):
        if draw(st.integers(0, 4)):
            edit[name] = draw(TEXT)
    if draw(st.booleans()):
        edit["path"] = draw(st.sampled_from(["general", "tools", "data"]))
    if draw(st.booleans()):
        edit["reference"] = draw(REFERENCE)
    if draw(st.booleans()):
        edit["arguments"] = draw(st.sampled_from([{}, {"x": {"type": "int"}}]))
    if draw(st.booleans()):
        edit["metadata"] = draw(st.sampled_from([{}, {"n": 1}, {"n": 2}]))
    return edit


OPERATION = st.one_of(
    st.tuples(
        st.just("apply"),
        st.lists(edits(), max_size=5),
        st.sampled_from(["local", "global"]),
        st.sampled_from(["model", "auto", "user", "cli"]),
    ),
    st.tuples(
        st.just("review"),
        st.integers(0, 20),
        st.sampled_from(["apply", "reject", "reject_forever"]),
        st.just(""),
    ),
)


def content_view(state: HarnessState) -> dict[tuple[str, str], tuple[Any, ...]]:
    return {
        (k, i): (*e.content_key(), e.trust) for k, items in state.entries.items() for i, e in items.items()
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(initial=st.lists(edits(), max_size=4), operations=st.lists(OPERATION, max_size=8))
def test_random_proposals_rolled_back_newest_first_restore_the_initial_entries(
    initial: list[dict[str, Any]], operations: list[tuple[Any, ...]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = HarnessStore(Path(tmp) / "harness")
        store.apply({"summary": "seed", "edits": initial}, scope="global", trigger="user")
        expected = content_view(store.state)
        results = []
        for op in operations:
            if op[0] == "apply":
                _, edit_list, scope, trigger = op
                results.append(
                    store.apply({"summary": "random", "edits": edit_list}, scope=scope, trigger=trigger)
                )
            elif results:
                target = results[op[1] % len(results)]
                results.append(store.record_review(target.id, op[2]))
        for result in reversed(results):
            undo = store.rollback(result.id)
            assert not undo.errors, undo.errors
        assert content_view(store.state) == expected
        # A fresh reader of the files sees the same thing, and history explains the state.
        reread = HarnessStore(store.root)
        assert content_view(reread.load()) == expected
        last = store.history()[-1].id
        assert content_view(reread.state_as_of(last)) == expected
