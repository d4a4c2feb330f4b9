"""`continual-acp harness` with the project scope and `import`, as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .conftest import git
from .test_skill_check import edit

TIMEOUT = 180


def cli(
    tmp_path: Path, *args: str, cwd: Path | None = None, config: str = ""
) -> subprocess.CompletedProcess[str]:
    xdg = tmp_path / "xdg"
    (xdg / "continual-acp").mkdir(parents=True, exist_ok=True)
    (xdg / "continual-acp" / "config.toml").write_text(config, encoding="utf-8")
    env = {**os.environ, "CONTINUAL_ACP_HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(xdg)}
    return subprocess.run(
        [sys.executable, "-m", "acp_server.cli", "harness", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or tmp_path,
        timeout=TIMEOUT,
    )


def proposal_file(tmp_path: Path, *edits: dict[str, Any]) -> Path:
    path = tmp_path / "proposal.json"
    path.write_text(json.dumps({"summary": "imported", "edits": list(edits)}), encoding="utf-8")
    return path


def test_import_refuses_a_skill_whose_check_fails(tmp_path: Path, skill_dir: Path) -> None:
    path = proposal_file(tmp_path, edit("add", {"x": {}, "y": {}}, [{"args": [1, 1], "expect": 3}]))
    done = cli(tmp_path, "import", str(path), "--repo", str(skill_dir))
    assert done.returncode == 1, done.stderr
    assert "refused: skill check failed: examples check failed" in done.stdout
    assert "returned 2, expected 3" in done.stdout


def test_import_with_no_verify_applies_and_says_it_was_not_verified(tmp_path: Path) -> None:
    path = proposal_file(tmp_path, edit("anything", {}, module="not_importable"))
    done = cli(tmp_path, "import", str(path), "--no-verify", "--json")
    assert done.returncode == 0, done.stderr
    [applied] = json.loads(done.stdout)["applied_edits"]
    assert (applied["applied"], applied["check"]) == (True, "not verified: --no-verify")


def test_import_with_verify_skills_off_in_config_says_so(tmp_path: Path) -> None:
    path = proposal_file(tmp_path, edit("anything", {}, module="not_importable"))
    done = cli(tmp_path, "import", str(path), "--json", config="verify_skills = false\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["applied_edits"][0]["check"] == "not verified: verify_skills is off"


def test_project_scope_lists_history_and_rolls_back_from_the_terminal(tmp_path: Path) -> None:
    repo = tmp_path / "plain-repo"
    repo.mkdir()
    memory = {"action": "create", "kind": "memory", "title": "Build", "content": "make all"}
    done = cli(tmp_path, "import", str(proposal_file(tmp_path, memory)), "--repo", str(repo), "--json")
    assert done.returncode == 0, done.stderr
    rid = json.loads(done.stdout)["id"]
    listed = cli(tmp_path, "list", "--scope", "project", "--repo", str(repo))
    assert "build" in listed.stdout and "project" in listed.stdout
    assert rid in cli(tmp_path, "history", "--repo", str(repo)).stdout
    back = cli(tmp_path, "rollback", rid, "--repo", str(repo))
    assert back.returncode == 0, back.stderr
    assert not (repo / ".continual-acp" / "harness" / "entries" / "memory" / "build.md").exists()


def test_conflicts_are_listed_and_resolved_from_the_terminal(tmp_path: Path, diverged: Path) -> None:
    git(diverged, "merge", "bob", "-m", "merge bob", check=False)
    git(diverged, "commit", "-qam", "merge")
    listed = cli(tmp_path, "conflicts", "--repo", str(diverged))
    assert listed.returncode == 1
    assert "memory    shared" in listed.stdout and "side 1: Shared — bob's version" in listed.stdout
    done = cli(tmp_path, "resolve", "memory/shared", "1", "--repo", str(diverged))
    assert done.returncode == 0, done.stderr
    assert cli(tmp_path, "conflicts", "--repo", str(diverged)).stdout.strip() == "no conflicts"
