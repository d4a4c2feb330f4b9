"""How a run is cut into independent units: per task or per stream, per arm and seed; skipped arms."""

from __future__ import annotations

import json
from pathlib import Path

from continual_eval.runner import Endpoint, RunOptions, plan_arm, plan_units
from continual_eval.task import Task, load_task


def _task(root: Path, name: str, misleading: bool = False) -> Task:
    folder = root / name
    folder.mkdir()
    (folder / "task.toml").write_text(
        "prompts = ['first', 'second']\nsessions = 2\n[checker]\ncommand = 'true'\n"
    )
    if misleading:
        wrong = {"action": "create", "kind": "memory", "title": "Build", "content": "Run make twice."}
        (folder / "misleading.json").write_text(json.dumps({"edits": [wrong]}))
    return load_task(folder)


def test_per_task_units_are_one_per_task_arm_and_seed_with_their_own_traces(tmp_path: Path) -> None:
    a, b = _task(tmp_path, "a", misleading=True), _task(tmp_path, "b")
    options = RunOptions(out=tmp_path / "out", endpoint=Endpoint(scripted=True), seeds=2)
    units = plan_units([a, b], [plan_arm("learning"), plan_arm("misleading")], options)
    # b has no misleading.json: no misleading unit for it.
    assert [(u.steps[0].task.name, u.plan.name, u.seed) for u in units] == [
        ("a", "learning", 1), ("a", "learning", 2), ("a", "misleading", 1), ("a", "misleading", 2),
        ("b", "learning", 1), ("b", "learning", 2),
    ]  # fmt: skip
    assert units[1].steps[1].folder == tmp_path / "out" / "traces" / "a" / "learning" / "seed-2" / "session-2"
    assert len({u.name for u in units}) == len(units)  # each unit its own data dir


def test_a_stream_unit_runs_every_task_in_its_order_then_again(tmp_path: Path) -> None:
    a, b = _task(tmp_path, "a"), _task(tmp_path, "b")
    options = RunOptions(out=tmp_path / "out", endpoint=Endpoint(scripted=True), mode="stream", orders=2)
    units = plan_units([a, b], [plan_arm("learning"), plan_arm("frozen")], options)
    assert [(u.stream, u.plan.name) for u in units] == [
        (1, "learning"),
        (1, "frozen"),
        (2, "learning"),
        (2, "frozen"),
    ]
    first, second = units[0], units[2]
    assert [(s.task.name, s.session, s.round, s.position) for s in first.steps] == [
        ("a", 1, 1, 1), ("b", 2, 1, 2), ("a", 3, 2, 1), ("b", 4, 2, 2),
    ]  # fmt: skip
    assert [s.task.name for s in second.steps] == ["b", "a", "b", "a"]  # the second order is another
    assert first.steps[2].folder == tmp_path / "out" / "traces" / "stream-1" / "learning" / "03-a"
    assert first.steps[2].task.prompt_for(first.steps[2].round) == "second"  # round 2: the variant prompt


def test_the_learning_replay_arm_runs_its_servers_with_replay_verification(tmp_path: Path) -> None:
    from continual_eval.runner import _write_config

    task = _task(tmp_path, "a")
    for arm, expected in (("learning+replay", True), ("learning", False)):
        arm_dir = tmp_path / arm
        arm_dir.mkdir()
        _write_config(arm_dir, task, plan_arm(arm))
        config = (arm_dir / "config" / "continual-acp" / "config.toml").read_text(encoding="utf-8")
        assert ('refine_verify = "replay"' in config) is expected, config
