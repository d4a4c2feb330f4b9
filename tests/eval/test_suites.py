"""The bundled suites: `pipeline` (the pipeline test) and `lessons` (tasks that need the lesson)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from continual_eval.task import Task, TaskError, bundled_suite, in_family_order, load_suite, load_task

LESSONS = load_suite("lessons")
FAMILIES: dict[str, list[Task]] = defaultdict(list)
for _task in LESSONS:
    if _task.family:
        FAMILIES[_task.family].append(_task)


def test_the_suites_load_by_name_and_the_default_is_the_pipeline_test() -> None:
    assert [t.name for t in load_suite("pipeline")] == [t.name for t in load_suite(bundled_suite())]
    assert {t.suite for t in load_suite("pipeline")} == {"pipeline"}
    assert {t.suite for t in LESSONS} == {"lessons"}
    with pytest.raises(TaskError, match="unknown suite 'nope'; bundled suites: lessons, pipeline"):
        bundled_suite("nope")


def test_lessons_has_twelve_family_tasks_and_both_controls() -> None:
    assert len([t for t in LESSONS if t.family]) >= 12
    assert len(FAMILIES) >= 4
    assert {t.control for t in LESSONS if t.control} == {"nothing-to-learn", "impossible"}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_only_session_one_of_the_first_variant_is_told_the_lesson(family: str) -> None:
    """The deciding fact is in no later prompt, no held-out variant's prompt, and no repository file."""
    tasks = FAMILIES[family]
    told = [t for t in tasks if not t.held_out]
    assert len(told) == 1 and len(tasks) - 1 >= 2  # one variant to learn from, held-out ones for transfer
    for task in tasks:
        assert task.scripted is not None and task.misleading is not None and task.seed is not None
        fact = task.scripted.knows
        sessions = [task.prompt_for(k) for k in range(1, task.sessions + 1)]
        assert [fact in p for p in sessions] == [task is told[0]] + [False] * (task.sessions - 1)
        hints = [p for p in task.template.rglob("*") if p.is_file() and fact in p.read_text(errors="replace")]
        assert hints == [], f"{task.name}: the repository tells the lesson: {hints}"
        # The seeded arm holds the lesson; the misleading arm a plausible other one.
        assert fact in task.seed.read_text()
        assert fact not in task.misleading.read_text()
        assert json.loads(task.misleading.read_text())["edits"][0]["kind"] == "memory"
    assert len({t.misleading.read_text() for t in tasks if t.misleading}) == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("control = 'easy'\n", "control must be one of nothing-to-learn, impossible"),
        ("family = 'f'\n", "family and variant go together"),
    ],
)
def test_a_bad_family_or_control_is_an_error(tmp_path: Path, extra: str, message: str) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "task.toml").write_text(f"prompt = 'x'\n{extra}[checker]\ncommand = 'true'\n")
    with pytest.raises(TaskError, match=message):
        load_task(tmp_path / "t")


def test_a_misleading_file_that_is_not_a_proposal_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "task.toml").write_text("prompt = 'x'\n[checker]\ncommand = 'true'\n")
    (tmp_path / "t" / "misleading.json").write_text('{"edits": []}')
    with pytest.raises(TaskError, match=r"misleading\.json: needs an object with a non-empty edits list"):
        load_task(tmp_path / "t")


def test_family_order_puts_each_told_variant_before_its_held_out_ones_and_controls_last() -> None:
    ordered = in_family_order(list(reversed(LESSONS)))
    names = [t.name for t in ordered]
    assert names[:3] == ["c-locale-a", "c-locale-b", "c-locale-c"]
    for family, tasks in FAMILIES.items():
        first = min(names.index(t.name) for t in tasks)
        assert not ordered[first].held_out, family
    assert all(t.control for t in ordered[-4:])


def test_a_task_loaded_by_a_relative_path_runs_its_setup_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "task.toml").write_text("prompt = 'x'\n[checker]\ncommand = 'test -f made'\n")
    (tmp_path / "t" / "setup.sh").write_text("touch made\n")
    monkeypatch.chdir(tmp_path)
    task = load_task(Path("t"))
    assert task.check(task.build(tmp_path / "repo")).passed
