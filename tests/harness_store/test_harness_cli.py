"""`continual-acp harness ...` run as the real console script against a temp CONTINUAL_ACP_HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness_store import HarnessStore, global_root, local_root

SCRIPT = Path(sys.executable).with_name("continual-acp")


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTINUAL_ACP_HOME": str(home)}
    return subprocess.run(
        [str(SCRIPT), "harness", *args], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    if not SCRIPT.exists():
        pytest.fail(f"console script missing at {SCRIPT}; install the project with pip install -e .")
    return tmp_path / "home"


def seed(home: Path) -> tuple[str, str]:
    store = HarnessStore(global_root(home))
    first = store.apply(
        {
            "summary": "remember uv",
            "edits": [{"action": "create", "kind": "memory", "title": "Use uv", "content": "Prefer uv"}],
        },
        scope="global",
        trigger="cli",
    )
    local = HarnessStore(local_root(home, "sess1")).apply(
        {
            "summary": "local note",
            "edits": [{"action": "create", "kind": "prompt", "title": "Terse", "content": "Be terse"}],
        },
        scope="local",
        trigger="model",
        session_id="sess1",
    )
    return first.id, local.id


def test_list_shows_global_entries_and_local_ones_with_a_session(home: Path) -> None:
    seed(home)
    out = run(home, "list")
    assert out.returncode == 0 and "use_uv" in out.stdout and "terse" not in out.stdout
    local = run(home, "list", "--scope", "local", "--session", "sess1", "--json")
    assert local.returncode == 0
    assert [e["id"] for e in json.loads(local.stdout)] == ["terse"]
    assert json.loads(run(home, "list", "--kind", "skill", "--json").stdout) == []


def test_show_finds_a_refinement_or_an_entry(home: Path) -> None:
    first, local = seed(home)
    shown = run(home, "show", first, "--json")
    assert (
        shown.returncode == 0
        and json.loads(shown.stdout)["applied_edits"][0]["after"]["content"] == "Prefer uv"
    )
    # A local refinement is found without naming its session (rollback from any later session).
    assert json.loads(run(home, "show", local, "--json").stdout)["id"] == local
    entry = run(home, "show", "use_uv")
    assert entry.returncode == 0 and "# Use uv" in entry.stdout and "Prefer uv" in entry.stdout


def test_history_lists_newest_last_and_honours_n(home: Path) -> None:
    first, _ = seed(home)
    store = HarnessStore(global_root(home))
    second = store.apply({"summary": "second", "edits": []}, scope="global", trigger="cli")
    records = json.loads(run(home, "history", "--json").stdout)
    assert [r["id"] for r in records] == [first, second.id]
    assert [r["id"] for r in json.loads(run(home, "history", "-n", "1", "--json").stdout)] == [second.id]
    assert second.id in run(home, "history").stdout


def test_rollback_undoes_a_refinement_and_refuses_conflicts_without_force(home: Path) -> None:
    first, _ = seed(home)
    store = HarnessStore(global_root(home))
    store.apply(
        {
            "edits": [
                {"action": "update", "kind": "memory", "id": "use_uv", "title": "Use uv", "content": "v2"}
            ]
        },
        scope="global",
        trigger="cli",
    )
    refused = run(home, "rollback", first)
    assert refused.returncode == 1 and "entry changed since refinement" in refused.stdout + refused.stderr
    assert store.state.get("memory", "use_uv") is not None
    forced = run(home, "rollback", first, "--force", "--json")
    assert forced.returncode == 0 and json.loads(forced.stdout)["rollback_of"] == first
    assert store.state.get("memory", "use_uv") is None


def test_tombstones_are_listed_and_can_be_lifted(home: Path) -> None:
    first, _ = seed(home)
    assert run(home, "rollback", first).returncode == 0
    stones = json.loads(run(home, "tombstones", "--json").stdout)
    assert [s["content"] for s in stones] == ["Prefer uv"]
    lifted = run(home, "tombstones", "--lift", stones[0]["id"])
    assert lifted.returncode == 0 and "lifted" in lifted.stdout
    assert json.loads(run(home, "tombstones", "--json").stdout) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("rollback", "r-unknown"), "no refinement 'r-unknown'"),
        (("rollback", "r-unknown"), "`continual-acp harness history` shows the ids"),
        (("show", "nothing-here"), "no entry or refinement 'nothing-here'"),
        (("list", "--scope", "local"), "--scope local needs --session ID"),
        (("frobnicate",), "invalid choice"),
        ((), "a command is needed"),
        (("tombstones", "--lift", "t-nope"), "no tombstone 't-nope'"),
        (("history", "-n", "-3"), "expected 0 or more, got -3"),
    ],
)
def test_errors_go_to_stderr_with_exit_code_1(home: Path, args: tuple[str, ...], message: str) -> None:
    seed(home)
    out = run(home, *args)
    assert out.returncode == 1
    assert message in out.stderr and out.stdout == ""


def test_data_home_prefers_continual_acp_home_then_xdg_then_the_default() -> None:
    from harness_store import data_home

    assert data_home({"CONTINUAL_ACP_HOME": "/a", "XDG_DATA_HOME": "/x"}) == Path("/a")
    assert data_home({"XDG_DATA_HOME": "/x"}) == Path("/x/continual-acp")
    assert data_home({}) == Path.home() / ".local" / "share" / "continual-acp"


def test_cli_uses_xdg_data_home_when_continual_acp_home_is_unset(tmp_path: Path) -> None:
    xdg_home = tmp_path / "xdg" / "continual-acp"
    HarnessStore(global_root(xdg_home)).apply(
        {"edits": [{"action": "create", "kind": "memory", "title": "Via XDG", "content": "x"}]},
        scope="global",
        trigger="cli",
    )
    env = {k: v for k, v in os.environ.items() if k != "CONTINUAL_ACP_HOME"}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    out = subprocess.run(
        [str(SCRIPT), "harness", "list"], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0 and "via_xdg" in out.stdout


def test_rollback_of_a_refinement_already_rolled_back_names_the_later_one_and_writes_nothing(
    home: Path,
) -> None:
    first, _ = seed(home)
    undone = run(home, "rollback", first, "--json")
    assert undone.returncode == 0
    later = json.loads(undone.stdout)["id"]
    store = HarnessStore(global_root(home))
    before = [r.id for r in store.history()]
    again = run(home, "rollback", first)
    assert again.returncode == 1
    assert f"already rolled back by {later}" in again.stderr
    assert [r.id for r in HarnessStore(global_root(home)).history()] == before  # no record written
    # Once the rollback itself is rolled back, the refinement is in effect and can be undone again.
    assert run(home, "rollback", later).returncode == 0
    assert run(home, "rollback", first).returncode == 0


def test_history_shows_a_lift_as_a_cli_record_naming_the_tombstone(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness_store.cli import main

    store = HarnessStore(global_root(home))
    pending = {"edits": [{"action": "create", "kind": "memory", "title": "Guess", "content": "uses emacs"}]}
    [stone] = store.reject_proposal(pending)
    monkeypatch.setenv("CONTINUAL_ACP_HOME", str(home))
    assert main(["tombstones", "--lift", stone.id]) == 0  # in-process: no console script start-up
    capsys.readouterr()
    assert main(["history"]) == 0
    rejected, lifted = capsys.readouterr().out.splitlines()
    assert rejected.endswith(f"(+tombstone {stone.id})")
    assert lifted.endswith(f"(lifted tombstone {stone.id})") and lifted.split()[1] == "cli"


def test_curate_is_a_dry_run_until_apply_and_reads_the_entries_standing_from_their_counters(
    home: Path,
) -> None:
    store = HarnessStore(global_root(home))
    for title, content in (("Idle", "Nobody reads this note."), ("Used", "Run `make check`.")):
        store.apply(
            {"edits": [{"action": "create", "kind": "memory", "title": title, "content": content}]},
            scope="global",
            trigger="model",
        )
    ledger = home / "harness" / "entry-usage.jsonl"
    turn = {
        "at": "2026-11-01T10:00:00+00:00",
        "session": "s",
        "entries": ["idle", "used"],
        "followed": ["used"],
    }
    ledger.write_text("".join(json.dumps(turn) + "\n" for _ in range(10)), encoding="utf-8")
    dry = run(home, "curate", "--json")
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert report["dry_run"] is True
    assert [(a["action"], a["id"]) for a in report["actions"]] == [("archive", "idle")]
    assert store.state.get("memory", "idle").trust == "candidate"  # type: ignore[union-attr]
    applied = run(home, "curate", "--apply")
    assert applied.returncode == 0, applied.stderr
    assert (
        "archive `memory/idle`" in applied.stdout
        and "Undo the pass: continual-acp harness rollback r-" in applied.stdout
    )
    assert store.state.get("memory", "idle").trust == "rejected"  # type: ignore[union-attr]
    assert store.state.get("memory", "used").trust == "candidate"  # type: ignore[union-attr]


def test_a_rollback_prints_what_changed_as_a_diff(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # In-process (the console script is covered above): a change of a field the title and content do
    # not show, which the old "before: title — content / after: title — content" lines hid.
    from harness_store.cli import main

    seed(home)
    store = HarnessStore(global_root(home))
    moved = store.apply(
        {
            "edits": [
                {
                    "action": "update",
                    "kind": "memory",
                    "id": "use_uv",
                    "title": "Use uv",
                    "content": "Prefer uv",
                    "path": "tools/python",
                }
            ]
        },
        scope="global",
        trigger="cli",
    )
    monkeypatch.setenv("CONTINUAL_ACP_HOME", str(home))
    assert main(["rollback", moved.id]) == 0
    printed = capsys.readouterr().out
    assert "    v2 -> v3:" in printed
    assert "      -- path: tools/python" in printed and "      +- path: general" in printed
    assert "before v2" not in printed and "after  v3" not in printed
