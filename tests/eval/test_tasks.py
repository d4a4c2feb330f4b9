"""The task format: loading with clear errors, building the repository, a checker that cannot be gamed."""

from __future__ import annotations

from pathlib import Path

import pytest

from continual_eval.task import TaskError, bundled_suite, load_suite, load_task


def _task(folder: Path, toml: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.toml").write_text(toml, encoding="utf-8")
    return folder


def test_the_bundled_suite_has_at_least_eight_scripted_tasks_that_load() -> None:
    tasks = load_suite(bundled_suite())
    assert len(tasks) >= 8
    assert all(t.scripted is not None for t in tasks)
    assert len({t.name for t in tasks}) == len(tasks)


SCRIPTED = "prompt = 'x'\n[checker]\ncommand = 'true'\n[scripted]\nknows = 'k'\nlesson = 'l'\nlearned_from = 'f'\nnaive = ['a']\ninformed = ['b']\n"


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("prompt = 'x'\n", "needs a \\[checker\\] table"),
        ("[checker]\ncommand = 'true'\n", "needs prompt"),
        ("prompt = 'x'\nreset = 'never'\n[checker]\ncommand = 'true'\n", "reset must be one of session, arm"),
        ("prompt = 'x'\nsessions = 0\n[checker]\ncommand = 'true'\n", "sessions must be at least 1"),
        ("prompt = 'x'\nsessions = 'two'\n[checker]\ncommand = 'true'\n", "sessions must be a whole number"),
        ("prompt = [1]\n[checker]\ncommand = 'true'\n", "prompt must be a string or a list of strings"),
        (
            "prompt = 'x'\n[checker]\ncommand = 'true'\n[scripted]\nknows = 'k'\n",
            "missing lesson, learned_from",
        ),
        ("prompt = 'x\n", "not valid TOML"),
        (f"{SCRIPTED}lesson_kind = 'skill'\n", "a skill lesson needs lesson_reference"),
        (f"{SCRIPTED}lesson_kind = 'recipe'\n", "lesson_kind must be memory or skill"),
    ],
)
def test_a_bad_task_file_is_an_error_naming_what_is_wrong(tmp_path: Path, toml: str, message: str) -> None:
    with pytest.raises(TaskError, match=message):
        load_task(_task(tmp_path / "t", toml))


def test_an_unknown_task_name_lists_the_suite(tmp_path: Path) -> None:
    _task(tmp_path / "a", "prompt = 'x'\n[checker]\ncommand = 'true'\n")
    with pytest.raises(TaskError, match="unknown task\\(s\\) nope; the suite has a"):
        load_suite(tmp_path, ["nope"])


def test_the_checker_runs_its_own_files_restored_from_the_task(tmp_path: Path) -> None:
    folder = _task(tmp_path / "t", "prompt = 'x'\n[checker]\ncommand = 'python3 check.py'\n")
    (folder / "repo").mkdir()
    (folder / "repo" / "check.py").write_text("raise SystemExit(1)\n")
    (folder / "checker").mkdir()
    (folder / "checker" / "check.py").write_text(
        "import pathlib\nraise SystemExit(pathlib.Path('done').read_text() != 'yes')\n"
    )
    task = load_task(folder)
    repo = task.build(tmp_path / "repo")
    (repo / "done").write_text("yes")
    (repo / "check.py").write_text("raise SystemExit(0)\n")  # an agent "fixing" the checker
    assert task.check(repo).passed
    (repo / "done").write_text("no")
    (repo / "check.py").write_text("raise SystemExit(0)\n")
    result = task.check(repo)
    assert not result.passed
    assert result.exit_code == 1


def test_a_checker_that_hangs_is_killed_and_fails(tmp_path: Path) -> None:
    folder = _task(tmp_path / "t", "prompt = 'x'\n[checker]\ncommand = 'sleep 30'\ntimeout = 0.5\n")
    task = load_task(folder)
    result = task.check(task.build(tmp_path / "repo"))
    assert not result.passed
    assert result.exit_code is None
    assert "checker killed after 0.5 s" in result.output


def test_a_failing_setup_script_is_an_error_with_its_output(tmp_path: Path) -> None:
    folder = _task(tmp_path / "t", "prompt = 'x'\n[checker]\ncommand = 'true'\n")
    (folder / "setup.sh").write_text("echo broken setup >&2\nexit 3\n")
    with pytest.raises(TaskError, match="exited with 3: broken setup"):
        load_task(folder).build(tmp_path / "repo")
