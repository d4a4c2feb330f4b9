"""The per-prompt checkpoint index: which kernel state a prompt's start had, what the store's bounds
drop, and a damaged index file set aside (never a failed session)."""

from __future__ import annotations

from pathlib import Path

from agent_core.history.prompt_checkpoints import Checkpoint, CheckpointIndex, kernel_state_at


def entry(
    turn: int, kernel: str | None = None, *, cells: bool = False, error: str | None = None
) -> Checkpoint:
    return Checkpoint(
        turn=turn, offset=turn * 100, created=float(turn), kernel=kernel, cells=cells, error=error
    )


def test_a_prompt_without_cells_has_the_kernel_state_of_the_next_checkpoint_or_the_live_kernel() -> None:
    entries = [entry(1, "turn1", cells=True), entry(2), entry(3, "turn3", cells=True), entry(4)]
    assert kernel_state_at(entries, 1) == ("turn1", None)
    assert kernel_state_at(entries, 2) == ("turn3", None)  # nothing ran in prompt 2 before prompt 3's cell
    assert kernel_state_at(entries, 4) == (None, None)  # nothing ran since: the live kernel is that state


def test_a_checkpoint_that_failed_says_why_instead_of_using_a_later_state() -> None:
    entries = [entry(1, cells=True, error="the kernel died"), entry(2, "turn2", cells=True)]
    assert kernel_state_at(entries, 1) == (None, "the kernel died")
    unfinished = [entry(1, cells=True), entry(2, "turn2", cells=True)]
    assert kernel_state_at(unfinished, 1) == (None, "the kernel checkpoint of prompt 1 was never completed")


def test_what_the_store_dropped_leaves_the_index_with_the_prompts_before_the_oldest_kept(
    tmp_path: Path,
) -> None:
    index = CheckpointIndex(
        tmp_path / "checkpoints.json",
        [entry(1, "turn1", cells=True), entry(2), entry(3, "turn3", cells=True)],
    )
    index.drop = ["turn0"]
    index.apply_kernel_summary({"dropped": ["turn1", "turn0"], "storeBytes": 42})
    assert [e.turn for e in index.entries] == [3]  # prompt 2's state was prompt 3's, but prompt 1 is gone
    assert index.drop == [] and index.store_bytes == 42


def test_an_index_saved_and_loaded_is_the_same_and_a_damaged_one_is_set_aside(tmp_path: Path) -> None:
    index = CheckpointIndex(tmp_path / "checkpoints.json", [entry(1, "turn1", cells=True)], next_turn=2)
    index.save()
    loaded = CheckpointIndex.load(tmp_path)
    assert loaded.entries == index.entries and loaded.next_turn == 2
    (tmp_path / "checkpoints.json").write_text('{"entries": [{"turn": "x"}', encoding="utf-8")
    damaged = CheckpointIndex.load(tmp_path)
    assert damaged.entries == [] and damaged.next_turn == 1
    assert [p.name.startswith("checkpoints.json.damaged-") for p in tmp_path.iterdir()] == [True]
