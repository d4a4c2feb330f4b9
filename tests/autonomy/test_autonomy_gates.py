"""Where gates come from: the project's gates.toml, the user config, detection of declared checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_core.autonomy import (
    Gate,
    GateConfigError,
    detect_gates,
    load_project_gates,
    make_gate,
    merge_gates,
)
from agent_core.autonomy.gates import parse_gates


def _gates_toml(root: Path, text: str) -> None:
    (root / ".continual-acp").mkdir(exist_ok=True)
    (root / ".continual-acp" / "gates.toml").write_text(text)


def test_project_gates_are_read_from_gate_tables_with_timeouts(tmp_path: Path) -> None:
    _gates_toml(
        tmp_path, '[[gate]]\ncommand = "pytest -q"\ntimeout = 120\n\n[[gate]]\ncommand = "ruff check ."\n'
    )
    gates = load_project_gates(tmp_path)
    assert [(g.command, g.timeout, g.source) for g in gates] == [
        ("pytest -q", 120.0, "project"),
        ("ruff check .", 600.0, "project"),
    ]


def test_project_gates_accept_a_plain_list_of_commands(tmp_path: Path) -> None:
    _gates_toml(tmp_path, 'gates = ["make test"]\n')
    assert [g.command for g in load_project_gates(tmp_path)] == ["make test"]


def test_a_broken_gates_file_is_an_error_naming_the_file(tmp_path: Path) -> None:
    _gates_toml(tmp_path, "gates = [\n")
    with pytest.raises(GateConfigError, match=r"gates\.toml"):
        load_project_gates(tmp_path)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ([""], "non-empty"),
        ([{"command": "x", "timeout": "soon"}], "timeout"),
        ([{"command": "x", "timeout": -1}], "timeout"),
        ([5], "non-empty string"),
        ({"not": "a list"}, "non-empty"),
        (["a\0b"], "NUL"),
    ],
)
def test_a_bad_gate_entry_is_refused_with_what_is_wrong(raw: object, problem: str) -> None:
    with pytest.raises(GateConfigError, match=problem):
        parse_gates(raw, source="user", where="config.toml")


def test_merge_keeps_the_first_gate_of_each_command() -> None:
    project = (Gate("pytest -q", 100, "project"),)
    user = (Gate("pytest -q", 5, "user"), Gate("ruff check .", 5, "user"))
    assert merge_gates(project, user) == (Gate("pytest -q", 100, "project"), Gate("ruff check .", 5, "user"))


def test_make_gate_validates_a_session_gate() -> None:
    assert make_gate("  npm test  ").command == "npm test"
    with pytest.raises(GateConfigError):
        make_gate("   ")


def test_detection_proposes_pytest_for_a_pyproject_that_configures_it(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").write_text("")
    detected = detect_gates(tmp_path)
    assert [d.command for d in detected] == [".venv/bin/python -m pytest -q"]
    assert "pyproject.toml" in detected[0].reason


def test_detection_reads_package_json_scripts_and_skips_npm_placeholder(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text(
        json.dumps({"scripts": {"test": 'echo "Error: no test specified" && exit 1', "lint": "eslint ."}})
    )
    assert [d.command for d in detect_gates(tmp_path)] == ["npm run lint --silent"]


def test_detection_finds_make_cargo_and_go_checks(tmp_path: Path) -> None:
    (tmp_path / "Makefile").write_text("all:\n\techo\ncheck:\n\ttrue\n")
    (tmp_path / "Cargo.toml").write_text("[package]\nname='x'\n")
    (tmp_path / "go.mod").write_text("module x\n")
    assert [d.command for d in detect_gates(tmp_path)] == ["make check", "cargo test", "go test ./..."]


def test_detection_finds_nothing_in_an_empty_directory(tmp_path: Path) -> None:
    assert detect_gates(tmp_path) == []
