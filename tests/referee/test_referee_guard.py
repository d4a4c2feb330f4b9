"""The control-plane guard without a kernel: what counts as a cell's change, what is restored, what
the server's own writes and a person's edits between prompts do."""

from __future__ import annotations

from pathlib import Path

from agent_core.control_plane.guard import ControlPlaneGuard
from agent_core.control_plane.held import HeldChange
from agent_core.refinement.pending_files import PendingFiles
from agent_core.refinement.records import PendingReview
from harness_store import HarnessState, Proposal
from harness_store.project import ProjectStore


def _plane(tmp_path: Path) -> tuple[Path, ControlPlaneGuard]:
    root = tmp_path / ".continual-acp"
    (root / "harness" / "entries" / "memory").mkdir(parents=True)
    (root / "gates.toml").write_text('[[gate]]\ncommand = "pytest"\n')
    (root / "harness" / "entries" / "memory" / "a.md").write_text("old\n")
    guard = ControlPlaneGuard([root], lock_path=root / "harness" / ".lock")
    guard.refresh()
    return root, guard


def test_a_change_restores_every_file_to_its_state_before_and_holds_each_one(tmp_path: Path) -> None:
    root, guard = _plane(tmp_path)
    (root / "gates.toml").write_text('[[gate]]\ncommand = "true"\n')
    (root / "harness" / "entries" / "memory" / "a.md").unlink()
    (root / "harness" / "entries" / "prompt").mkdir()
    (root / "harness" / "entries" / "prompt" / "new.md").write_text("cheat\n")
    held = guard.check("call_1", "print('cheat')")
    assert held is not None
    assert {(Path(f.path).name, f.action) for f in held.files} == {
        ("gates.toml", "changed"),
        ("a.md", "deleted"),
        ("new.md", "created"),
    }
    assert (root / "gates.toml").read_text() == '[[gate]]\ncommand = "pytest"\n'
    assert (root / "harness" / "entries" / "memory" / "a.md").read_text() == "old\n"
    assert not (root / "harness" / "entries" / "prompt").exists()  # the directory it made, too
    assert held.cell_id == "call_1" and "cheat" in held.code
    assert guard.check("call_2", "") is None  # restored: nothing left to hold


def test_a_file_touched_but_not_changed_is_not_held(tmp_path: Path) -> None:
    root, guard = _plane(tmp_path)
    (root / "gates.toml").write_text('[[gate]]\ncommand = "pytest"\n')  # same bytes, new mtime
    assert guard.check("call_1", "") is None


def test_changes_made_between_prompts_are_accepted_as_the_new_baseline_in_accept_mode(tmp_path: Path) -> None:
    root, guard = _plane(tmp_path)
    guard.outside_changes = "accept"  # the default, "hold", holds them (test_referee_guard_content.py)
    (root / "gates.toml").write_text('[[gate]]\ncommand = "make test"\n')  # a person, a git pull
    guard.refresh()  # the next prompt starts
    assert guard.check("call_1", "") is None
    assert "make test" in (root / "gates.toml").read_text()


def test_the_project_stores_own_writes_during_a_cell_are_not_held(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    store = ProjectStore(tmp_path)
    root = tmp_path / ".continual-acp"
    guard = ControlPlaneGuard([root], lock_path=store.backend.lock_path)
    guard.refresh()
    proposal = Proposal.model_validate(
        {"summary": "s", "edits": [{"action": "create", "kind": "memory", "title": "t", "content": "fact"}]}
    )
    result = store.apply(proposal, scope="project", trigger="user")
    assert result.applied, result.errors
    (root / "gates.toml").write_text("cheat\n")  # and a cell's write beside it
    held = guard.check("call_1", "")
    guard.close()
    assert held is not None and [Path(f.path).name for f in held.files] == ["gates.toml"]
    assert [e.content for e in store.load().entries["memory"].values()] == ["fact"]


def test_an_append_to_a_log_too_large_to_keep_is_cut_back(tmp_path: Path) -> None:
    root, guard = _plane(tmp_path)
    log = root / "harness" / "history.jsonl"
    log.write_bytes(b"x" * (2 << 20))
    guard.outside_changes = "accept"  # the log as it is now is the verified state
    guard.refresh()
    with log.open("ab") as fh:
        fh.write(b'{"forged": true}\n')
    held = guard.check("call_1", "")
    assert held is not None and held.files[0].too_large
    assert log.stat().st_size == 2 << 20


def test_approving_a_held_change_writes_it_back_unless_the_file_moved_since(tmp_path: Path) -> None:
    root, guard = _plane(tmp_path)
    (root / "gates.toml").write_text("edited by the cell\n")
    held = guard.check("call_1", "")
    assert held is not None
    again = HeldChange.from_json(held.to_json())  # as kept on disk
    assert again.write_back() == []
    assert (root / "gates.toml").read_text() == "edited by the cell\n"
    (root / "gates.toml").write_text("a person's edit\n")
    problems = HeldChange.from_json(held.to_json()).write_back()
    assert problems and "changed since the cell ran" in problems[0]


def test_a_held_change_survives_a_restart_as_a_pending_review_file(tmp_path: Path) -> None:
    root, guard = _plane(tmp_path)
    (root / "gates.toml").write_bytes(b"\xff\xfe binary\n")
    held = guard.check("call_1", "code")
    assert held is not None
    files = PendingFiles(tmp_path / "pending")
    pending = PendingReview(
        "p-1", Proposal(summary=held.summary()), "project", "model", HarnessState(), held=held
    )
    assert files.save(pending, "s1")
    loaded = files.load("p-1")
    assert loaded is not None and loaded.held is not None
    assert loaded.held.files[0].after == b"\xff\xfe binary\n"
    assert loaded.to_json()["held"]["cellId"] == "call_1"


def test_an_approved_write_back_is_not_taken_for_a_cell_of_another_session(tmp_path: Path) -> None:
    root, guard = _plane(tmp_path)
    (root / "gates.toml").write_text("edited by a cell of session A\n")
    held = guard.check("call_1", "")
    assert held is not None
    other = ControlPlaneGuard([root], lock_path=root / "harness" / ".lock")  # session B, mid-cell
    other.refresh()
    assert held.write_back() == []  # approved from a panel while B's cell runs
    assert other.check("call_9", "") is None
    other.close()
    guard.close()
    assert (root / "gates.toml").read_text() == "edited by a cell of session A\n"


def test_a_check_that_must_not_wait_says_the_store_lock_is_busy(tmp_path: Path) -> None:
    from agent_core.control_plane.guard import LockBusy
    from harness_store.lock import StoreLock

    root, guard = _plane(tmp_path)
    (root / "gates.toml").write_text("cheat\n")
    with StoreLock(root / "harness" / ".lock"):  # a store write in progress (another process)
        try:
            guard.check("call_1", "", wait=False)
        except LockBusy:
            pass
        else:
            raise AssertionError("the check did not report the busy lock")
    held = guard.check("call_1", "")
    assert held is not None and (root / "gates.toml").read_text() == '[[gate]]\ncommand = "pytest"\n'


def test_the_panel_lists_a_held_change_with_its_diff_and_approving_it_writes_it_back(tmp_path: Path) -> None:
    from acp_server.panel.actions import PanelActions
    from acp_server.panel.sources import PanelData

    root, guard = _plane(tmp_path / "repo")
    (root / "gates.toml").write_text('[[gate]]\ncommand = "true"\n')
    held = guard.check("call_1", "open('gates.toml', 'w')")
    guard.close()
    assert held is not None
    home = tmp_path / "home"
    files = PendingFiles(home / "sessions" / "s1" / "harness" / "pending")
    pending = PendingReview(
        "p-held", Proposal(summary=held.summary()), "local", "model", HarnessState(), held=held
    )
    assert files.save(pending, "s1")
    data = PanelData(home)
    [shown] = [p for p in data.pending() if p["proposal_id"] == "p-held"]
    assert shown["edits"][0]["path"] == str(root / "gates.toml")
    assert '+command = "true"' in shown["edits"][0]["diff"]
    result = PanelActions(data).review("p-held", "apply", store_key="s1")
    assert result.ok, result
    assert (root / "gates.toml").read_text() == '[[gate]]\ncommand = "true"\n'
    assert files.load("p-held") is None
