"""Harness records on the wire: camelCase keys, user data under reference/arguments/metadata untouched."""

from __future__ import annotations

from acp_server.harness.wire import result_full, result_summary, to_wire
from harness_store import HarnessStore


def test_entries_go_camel_case_but_user_data_keeps_its_keys(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = HarnessStore(tmp_path / "harness")
    edit = {
        "action": "create",
        "kind": "skill",
        "id": "run_checks",
        "title": "Run checks",
        "content": "Runs the checks.",
        "reference": {"type": "python", "import": "tools.checks", "callable": "run_checks"},
        "arguments": {"fail_fast": {"type": "boolean"}},
        "metadata": {"added_by": "pytest"},
    }
    result = store.apply({"summary": "add a skill", "edits": [edit]}, scope="global", trigger="user")
    entry = to_wire(store.load().get("skill", "run_checks"))
    assert {"createdAt", "updatedAt", "id", "trust"} <= set(entry)
    assert entry["arguments"] == {"fail_fast": {"type": "boolean"}}
    assert entry["metadata"] == {"added_by": "pytest"}
    full = result_full(result)
    assert full["applied"] is True and full["edits"][0]["after"]["id"] == "run_checks"
    assert full["edits"][0]["before"] is None
    assert "appliedEdits" not in full and full["expectedOutcome"] == ""
    summary = result_summary(result)
    assert summary["edits"] == [{"action": "create", "kind": "skill", "id": "run_checks", "applied": True}]
    assert "rollbackOf" not in summary


def test_a_rejection_before_apply_lists_its_tombstones_in_the_history_summary(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = HarnessStore(tmp_path / "harness")
    pending = {"edits": [{"action": "create", "kind": "memory", "title": "Guess", "content": "uses emacs"}]}
    [stone] = store.reject_proposal(pending)
    [record] = store.history()
    summary = result_summary(record)
    assert (summary["tombstoned"], summary["edits"], "lifted" in summary) == ([stone.id], [], False)


def test_a_lift_lists_the_lifted_tombstone_in_the_history_summary(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = HarnessStore(tmp_path / "harness")
    pending = {"edits": [{"action": "create", "kind": "memory", "title": "Guess", "content": "uses emacs"}]}
    [stone] = store.reject_proposal(pending)
    store.lift_tombstone(stone.id)
    summary = result_summary(store.history()[-1])
    assert (summary["lifted"], "tombstoned" in summary) == ([stone.id], False)


def test_history_lines_call_a_tombstone_record_tombstoned_not_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from acp_server.harness.commands import describe

    store = HarnessStore(tmp_path / "harness")
    pending = {"edits": [{"action": "create", "kind": "memory", "title": "Guess", "content": "uses emacs"}]}
    [stone] = store.reject_proposal(pending)
    store.lift_tombstone(stone.id)
    rejected, lifted = store.history()
    assert ("tombstoned]" in describe(rejected), "tombstone lifted]" in describe(lifted)) == (True, True)
