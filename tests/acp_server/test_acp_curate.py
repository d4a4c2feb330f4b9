"""`/curate` over the real server: a dry run changes nothing, `apply` archives as one refinement
that a single `/undo` takes back, and a person's entry is never touched."""

from __future__ import annotations

from pathlib import Path

from acp_client import AcpClient, server_env
from acp_helpers import initialize, new_session, run_command

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call
from harness_store import HarnessStore


def _seed(home: Path) -> None:
    store = HarnessStore(home / "harness")

    def write(title: str, content: str, trigger: str) -> str:
        edit = {"action": "create", "kind": "memory", "title": title, "content": content}
        result = store.apply({"edits": [edit]}, scope="global", trigger=trigger)
        assert result.applied, result.errors
        if trigger == "model":
            store.record_review(result.id, "apply")  # a reviewed, verified model entry
        return str(result.applied_edits[0].id)

    write("Tests", "Run `make check` before committing.", "model")
    store.apply(
        {
            "edits": [
                {
                    "action": "create",
                    "kind": "memory",
                    "title": "Tests again",
                    "content": "run make check before committing",
                }
            ]
        },
        scope="global",
        trigger="model",
    )
    write("Mine", "Before committing, run make check", "user")  # a person's duplicate


def _global(client: AcpClient, sid: str) -> dict[str, dict[str, object]]:
    state = client.request("_harness/state", {"sessionId": sid, "scope": "global"})
    return {str(e["id"]): e for e in state["entries"]}


def test_curate_dry_run_then_apply_archives_as_one_refinement_that_one_undo_takes_back(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    _seed(home)
    config = home / "xdg-config" / "continual-acp"
    config.mkdir(parents=True)
    (config / "config.toml").write_text('refine_review = "never"\n', encoding="utf-8")
    # A cell tries to shield its own duplicate from the curator by pinning it.
    cell = (
        "harness.create('memory', 'Pinned copy', 'Run make check; before committing.', "
        "metadata={'pinned': True}, global_=True)"
    )
    with ScriptedModelServer() as model:
        model.push(tool_call(cell, "Remember"), text("noted"))
        client = AcpClient(server_env(home, model.base_url), cwd=str(tmp_path))
        try:
            initialize(client)
            sid, _ = new_session(client, tmp_path)
            run_command(client, sid, "remember this")
            before = _global(client, sid)
            assert before["pinned_copy"]["metadata"] == {"pinned": True}
            dry = run_command(client, sid, "/curate --global")
            # The person's verified entry is the merge target; it is kept as it is.
            assert "Dry run (global harness). Curator pass: 3 merge" in dry
            assert "merge `memory/tests_again` into `memory/mine` (near duplicate (same words))" in dry
            assert "merge `memory/pinned_copy` into `memory/mine`" in dry  # a model's pin shields nothing
            renames = dry.split("Rename map: ")[1].splitlines()[0].split(", ")
            assert sorted(renames) == [
                "memory/pinned_copy -> memory/mine",
                "memory/tests -> memory/mine",
                "memory/tests_again -> memory/mine",
            ]
            assert dry.endswith("Apply it with `/curate apply --global`.")
            assert _global(client, sid) == before  # a dry run writes nothing
            applied = run_command(client, sid, "/curate apply --global")
            assert "Applied the curator pass to the global harness as refinement r-" in applied
            after = _global(client, sid)
            assert set(after) == set(before)  # archived, never deleted
            archived = after["tests_again"]
            assert archived["trust"] == "rejected"
            assert archived["metadata"]["archived"]["merged_into"] == "mine"  # type: ignore[index]
            assert after["tests"]["trust"] == "rejected"
            assert after["mine"] == before["mine"]  # a person's entry is never touched
            undone = run_command(client, sid, "/undo")
            assert "Rolled back r-" in undone
            restored = _global(client, sid)
            assert (
                restored["tests_again"]["trust"] == "candidate" and restored["tests"]["trust"] == "verified"
            )
            assert "archived" not in restored["tests_again"]["metadata"]  # type: ignore[operator]
        finally:
            client.close()
        assert not client.garbage and not client.violations, (client.garbage, client.violations)
