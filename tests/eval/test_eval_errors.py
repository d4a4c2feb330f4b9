"""What the eval does with bad input and a broken server: a clear error, nothing else lost."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from continual_eval.cli import main
from continual_eval.runner import Endpoint, RunOptions, plan_arm, run
from continual_eval.task import TaskError, load_task

TASKS = Path(__file__).parent / "tasks"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--scripted", "--arms", "learning,clever"], "unknown arm 'clever'; arms: learning, frozen, seeded"),
        (["--scripted", "--tasks", "nope"], "unknown task(s) nope; the suite has"),
        (["--base-url", ""], "name the model: --base-url URL --model ID"),
        (["--scripted", "--sessions", "0"], "--sessions must be at least 1"),
        (["--scripted", "--max-turn-requests", "0"], "--max-turn-requests must be at least 1"),
        (["--scripted", "--prompt-timeout", "-1"], "--prompt-timeout must be a positive number of seconds"),
        (["--scripted", "--without", "r-1"], "--without needs --from RUN_DIR"),
        (["--scripted", "--server-env", "NOEQUALS"], "--server-env wants KEY=VALUE"),
        (["/no/such/suite", "--scripted"], "/no/such/suite: no such suite"),
        # A bundled suite by its name: the lessons suite's tasks are the ones named.
        (["lessons", "--scripted", "--tasks", "nope"], "the suite has c-locale-a, c-locale-b"),
        (["--scripted", "--orders", "0"], "--orders must be at least 1"),
        (["--scripted", "--jobs", "0"], "--jobs must be at least 1"),
        (["--scripted", "--resume"], "--resume needs --out RUN_DIR"),
        (["--scripted", "--mode", "stream", "--without", "r-1"], "--without replays one task's sessions"),
        (["--scripted", "--server-command", ""], "--server-command is empty"),
        (
            ["--scripted", "--server-command", "python 'x"],
            '--server-command "python \'x": No closing quotation',
        ),
        (
            ["--scripted", "--server-command", "no-such-server --stdio"],
            "--server-command: 'no-such-server' is not an executable program (or not on PATH)",
        ),
        (
            ["--scripted", "--server-command", "./no/such/server"],
            "--server-command: './no/such/server' is not an executable program",
        ),
    ],
)
def test_bad_arguments_are_an_error_naming_what_is_wrong(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("CONTINUAL_ACP_MODEL", raising=False)
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_run_directory_is_never_written_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "traces").mkdir()
    assert main([str(TASKS / "bad-lesson"), "--scripted", "--out", str(tmp_path)]) == 2
    assert f"{tmp_path} already holds a run; choose another --out" in capsys.readouterr().err


def test_resume_refuses_a_directory_without_a_run_or_with_other_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = str(TASKS / "bad-lesson")
    assert main([suite, "--scripted", "--resume", "--out", str(tmp_path)]) == 2
    assert f"{tmp_path} holds no run to resume (no run.json)" in capsys.readouterr().err
    shape = {"suite": suite, "tasks": ["bad-lesson"], "arms": ["learning"], "sessions": None, "mode": "task",
             "orders": None, "seeds": 0, "temperature": None, "scripted": True, "model": "scripted-model",
             "without": None}  # fmt: skip
    (tmp_path / "run.json").write_text(json.dumps(shape))
    assert (
        main([suite, "--scripted", "--arms", "frozen", "--seeds", "2", "--resume", "--out", str(tmp_path)])
        == 2
    )
    assert "was run with other arms, seeds; resume with the same arguments" in capsys.readouterr().err


def test_without_names_a_refinement_no_task_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "traces").mkdir()
    assert main([str(TASKS / "bad-lesson"), "--scripted", "--without", "r-x", "--from", str(tmp_path)]) == 2
    assert f"no task in {tmp_path} recorded refinement r-x" in capsys.readouterr().err


def test_report_on_a_directory_that_is_not_a_run_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "no results.json (is it an eval run directory?)" in capsys.readouterr().err
    (tmp_path / "results.json").write_text("{not json")
    assert main(["report", str(tmp_path)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_a_server_that_dies_at_start_is_a_failed_session_with_its_error_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    task = load_task(TASKS / "bad-lesson")
    options = RunOptions(
        out=tmp_path / "out",
        endpoint=Endpoint(scripted=True),
        sessions=2,
        server_argv=(sys.executable, "-c", "import sys; sys.stderr.write('boom\\n'); sys.exit(3)"),
    )
    results = run([task], [plan_arm("frozen")], options)
    assert [(r.session, r.passed) for r in results] == [(1, False), (2, False)]
    assert all(r.error == "initialize failed: the server closed its stdout" for r in results)
    folder = tmp_path / "out" / "traces" / "bad-lesson" / "frozen" / "session-1"
    assert json.loads((folder / "session.json").read_text())["exit_code"] == 3
    assert (folder / "server.log").read_text() == "boom\n"


def test_the_server_command_option_starts_every_server_and_harness_call_of_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A "server" that logs its arguments and dies: each session's server.log shows what was run.
    server = tmp_path / "server.py"
    server.write_text("import sys\nsys.stderr.write(' '.join(sys.argv[1:]) + '\\n')\nsys.exit(3)\n")
    command = f"{sys.executable} {server} --as-given"
    out = tmp_path / "out"
    argv = [str(TASKS / "bad-lesson"), "--scripted", "--arms", "frozen", "--sessions", "1"]
    assert main([*argv, "--server-command", command, "--out", str(out)]) == 0
    folder = out / "traces" / "bad-lesson" / "frozen" / "session-1"
    assert (folder / "server.log").read_text() == "--as-given\n"
    assert json.loads((folder / "session.json").read_text())["exit_code"] == 3
    # The seeded arm's `harness import` goes through the same command (and its failure is reported).
    task = tmp_path / "seeded"
    task.mkdir()
    (task / "task.toml").write_text((TASKS / "bad-lesson" / "task.toml").read_text())
    seed = {"edits": [{"action": "create", "kind": "memory", "title": "Seed", "content": "A."}]}
    (task / "seed.json").write_text(json.dumps(seed))
    capsys.readouterr()
    assert (
        main(
            [
                str(task),
                "--scripted",
                "--arms",
                "seeded",
                "--server-command",
                command,
                "--out",
                str(tmp_path / "s"),
            ]
        )
        == 2
    )
    assert "the harness import failed: --as-given harness import" in capsys.readouterr().err


def test_the_seeded_arm_starts_each_session_from_the_tasks_seed_harness(tmp_path: Path) -> None:
    from continual_eval.runner import _prepare_harness, _server_env
    from harness_store import HarnessStore

    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "task.toml").write_text("prompt = 'x'\n[checker]\ncommand = 'true'\n")
    seed = {
        "summary": "notes",
        "edits": [{"action": "create", "kind": "memory", "title": "Seed", "content": "A."}],
    }
    (folder / "seed.json").write_text(json.dumps(seed))
    task = load_task(folder)
    assert task.seed == folder / "seed.json"
    arm = tmp_path / "arm"
    env = _server_env(arm, Endpoint(scripted=True), "http://127.0.0.1:9/v1")
    argv = (sys.executable, "-m", "acp_server")
    store = HarnessStore(arm / "home" / "harness")
    for _ in range(2):  # re-imported before every session: never two copies, never a learned extra
        _prepare_harness(plan_arm("seeded"), task, arm, env, argv)
        assert [e.title for e in store.load().entries["memory"].values()] == ["Seed"]
    (folder / "seed.json").write_text('{"edits": [{"action": "update", "kind": "memory", "id": "nope"}]}')
    with pytest.raises(TaskError, match="the harness import failed"):
        _prepare_harness(plan_arm("seeded"), load_task(folder), arm, env, argv)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_endpoint_that_does_not_answer_is_an_error_naming_the_users_url(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CONTINUAL_ACP_CONFIG", str(tmp_path / "absent.toml"))
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    assert main(["--base-url", url, "--model", "m", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"the model endpoint {url} does not answer" in err
    assert not (tmp_path / "run").exists()


def test_the_endpoint_and_model_come_from_config_toml_as_serve_reads_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("CONTINUAL_ACP_MODEL", raising=False)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    config = tmp_path / "config.toml"
    config.write_text(f'base_url = "{url}"\nmodel = "from-config"\n')
    monkeypatch.setenv("CONTINUAL_ACP_CONFIG", str(config))
    assert main(["--out", str(tmp_path / "run")]) == 2
    assert f"the model endpoint {url} does not answer" in capsys.readouterr().err
