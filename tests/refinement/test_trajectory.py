"""The trajectory the gate and the planner read: ids on every message, a window on the end."""

from __future__ import annotations

from agent_core.events import CellFinished, CellStarted, MessageChunk, TextPart, ThoughtChunk, UserMessage
from agent_core.refinement.trajectory import (
    TrajectoryItem,
    message_ids,
    render_trajectory,
    trajectory_from_events,
)


def test_events_fold_into_messages_with_their_ids() -> None:
    events = [
        UserMessage((TextPart("run the tests"),), "u-1"),
        ThoughtChunk("private", "a-1"),
        MessageChunk("Running ", "a-1"),
        MessageChunk("them.", "a-1"),
        CellStarted("cell-1", "!pytest -q", "Run tests"),
        CellFinished("cell-1", "failed", error="SystemExit: 1", output="3 failed"),
    ]
    items = trajectory_from_events(events)
    assert [(i.message_id, i.role) for i in items] == [
        ("u-1", "user"),
        ("a-1", "assistant"),
        ("cell-1", "tool_call"),
        ("cell-1", "tool_result"),
    ]
    assert items[1].text == "Running them."
    assert "private" not in render_trajectory(items, max_chars=10_000)
    assert message_ids(items) == {"u-1", "a-1", "cell-1"}


def test_every_rendered_message_starts_with_its_id() -> None:
    items = [TrajectoryItem("m-7", "user", "hello"), TrajectoryItem("m-8", "assistant", "hi")]
    text = render_trajectory(items, max_chars=1_000)
    assert text.startswith("[m-7] user:")
    assert "[m-8] assistant:\nhi" in text


def test_tool_results_are_cut_to_their_budget_in_the_middle() -> None:
    output = "HEAD" + "x" * 10_000 + "TAIL"
    items = [TrajectoryItem("c-1", "tool_result", output, status="completed")]
    text = render_trajectory(items, max_chars=50_000, tool_result_chars=2_000)
    assert "HEAD" in text and "TAIL" in text
    assert "characters omitted" in text
    assert len(text) < 2_300


def test_window_keeps_the_most_recent_messages_and_counts_the_dropped() -> None:
    items = [TrajectoryItem(f"m-{i}", "user", "w" * 900) for i in range(100)]
    text = render_trajectory(items, max_chars=10_000)
    assert len(text) <= 10_100
    assert "[m-99] user:" in text
    assert "[m-0] user:" not in text
    assert "earlier messages omitted" in text


def test_an_oversized_last_message_is_cut_at_its_head_not_dropped() -> None:
    items = [
        TrajectoryItem("m-1", "assistant", "old"),
        TrajectoryItem("m-2", "assistant", "z" * 5_000 + "END"),
    ]
    text = render_trajectory(items, max_chars=1_000)
    assert text.endswith("END")
    assert "[m-1]" not in text
