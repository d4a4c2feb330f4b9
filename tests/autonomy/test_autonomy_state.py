"""A session's goal and autonomy state: budgets exclude cache reads, the file survives and fails safe."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agent_core.autonomy import (
    AutonomyState,
    AutonomyStateFile,
    Gate,
    billable_tokens,
    goal_context_block,
    new_goal,
)


def test_billable_tokens_count_input_output_and_cache_writes_only() -> None:
    assert billable_tokens(input_tokens=100, output_tokens=20, cache_write_tokens=5) == 125


def test_a_goal_needs_an_objective_and_a_positive_budget() -> None:
    with pytest.raises(ValueError, match="objective"):
        new_goal("  ", None)
    with pytest.raises(ValueError, match="positive"):
        new_goal("ship it", 0)
    assert new_goal("  ship\n it ", 500).objective == "ship it"


def test_the_context_block_shows_budget_used_and_left_and_excludes_cache_reads() -> None:
    goal = new_goal("fix the tests", 1000)
    from dataclasses import replace

    goal = replace(goal, tokens_used=250, cache_read_tokens=9000)
    block = goal_context_block(goal)
    assert block is not None
    assert "Objective: fix the tests" in block
    assert "250 of 1,000 tokens used, 750 left" in block
    assert "cache reads are not counted" in block
    assert "cache reads not counted: 9,000" in goal.status_line()


def test_the_context_block_says_when_the_budget_is_used_up() -> None:
    from dataclasses import replace

    goal = replace(new_goal("x", 100), tokens_used=100)
    block = goal_context_block(goal)
    assert block is not None and "budget is used up" in block


def test_a_completed_or_missing_goal_gives_no_context_block() -> None:
    from dataclasses import replace

    assert goal_context_block(None) is None
    assert goal_context_block(replace(new_goal("x", None), state="complete")) is None


def test_state_round_trips_through_a_private_file(tmp_path: Path) -> None:
    store = AutonomyStateFile(tmp_path / "s1")
    state = AutonomyState(goal=new_goal("green build", 5000), gates=(Gate("make test", 60.0),)).with_failure(
        "make test", "git:abc"
    )
    store.save(state)
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.path.parent).st_mode) == 0o700
    assert store.load() == state


@pytest.mark.parametrize("damage", [b"", b"{not json", b"[]", b'{"goal": {"objective": 5}}', b"\xff\xfe"])
def test_a_damaged_state_file_is_kept_aside_and_the_session_starts_without_a_goal(
    tmp_path: Path, damage: bytes
) -> None:
    store = AutonomyStateFile(tmp_path)
    store.path.write_bytes(damage)
    assert store.load() == AutonomyState()
    assert (tmp_path / "autonomy.json.damaged").read_bytes() == damage


def test_a_symlinked_state_file_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    AutonomyStateFile(tmp_path / "other").save(AutonomyState(goal=new_goal("planted", None)))
    outside.write_bytes((tmp_path / "other" / "autonomy.json").read_bytes())
    session = tmp_path / "session"
    session.mkdir()
    (session / "autonomy.json").symlink_to(outside)
    assert AutonomyStateFile(session).load().goal is None
