"""Review and replay across restarts and sessions: pending reviews on disk, review cards of kernel writes,
slash-command replay, already-rolled-back refinements. Real stdio, real kernel, scripted model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_core.testing.scripted_model import ScriptedModelServer, text, tool_call

from .acp_support import RpcError, messages_between, new_session, prompt, select, servers

REVIEW_ALWAYS = 'auto_refine_every = 0\nrefine_review = "always"\n'
CELL = (
    "harness.create('memory', 'Local fact', 'Tabs in this repo.')\n"
    "harness.create('memory', 'Global fact', 'Prefer uv everywhere.', global_=True)\n"
)


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


def _pending_files(root: Path) -> list[Path]:
    return sorted((root / "pending").glob("*.json")) if (root / "pending").is_dir() else []


def _entries(client: object, sid: str, scope: str) -> list[str]:
    state = client.request("_harness/state", {"sessionId": sid, "scope": scope})  # type: ignore[attr-defined]
    return [e["content"] for e in state["entries"]]


def _propose_both(group: object, model: ScriptedModelServer, cwd: Path) -> str:
    """A first server: a cell writes a local and a global memory, both wait for review; then EOF."""
    model.push(tool_call(CELL, "Remember two facts"), text("Both wait for your review."))
    first = group.spawn(cwd)  # type: ignore[attr-defined]
    sid, _ = new_session(first, cwd)
    prompt(first, sid, "Remember these.")
    assert first.request("_harness/status", {"sessionId": sid})["awaitingReview"] == 2
    assert first.close() == 0  # stdin EOF: the server process exits
    return sid


def test_pending_reviews_survive_a_restart_and_review_applies_them_after_session_load(
    model: ScriptedModelServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    with servers(home, model.base_url, config=REVIEW_ALWAYS) as group:
        sid = _propose_both(group, model, tmp_path)
        local_root, global_root = home / "sessions" / sid / "harness", home / "harness"
        [local_file], [global_file] = _pending_files(local_root), _pending_files(global_root)
        assert oct(local_file.stat().st_mode & 0o777) == "0o600"
        assert oct((global_root / "pending").stat().st_mode & 0o777) == "0o700"

        second = group.spawn(tmp_path)
        second.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        status = second.request("_harness/status", {"sessionId": sid})
        assert status["awaitingReview"] == 2
        assert _entries(second, sid, "local") == [] and _entries(second, sid, "global") == []
        second.permission_policy = select("apply")
        before = len(second.frames)
        done = prompt(second, sid, "/review")
        said = messages_between(second, before, done.seq)
        assert local_file.stem in said and global_file.stem in said  # /review lists what waits
        assert "Reviewed 2 of 2 waiting proposals." in said
        asked = [r for r in second.agent_requests if r["method"] == "session/request_permission"]
        assert [r["params"]["toolCall"]["toolCallId"] for r in asked] == [
            f"review-{local_file.stem}",
            f"review-{global_file.stem}",
        ]
        assert _entries(second, sid, "local") == ["Tabs in this repo."]
        assert _entries(second, sid, "global") == ["Prefer uv everywhere."]
        assert second.request("_harness/status", {"sessionId": sid})["awaitingReview"] == 0
        assert _pending_files(local_root) == [] and _pending_files(global_root) == []  # removed when decided


def test_a_global_pending_review_is_decided_from_a_new_session_after_a_restart(
    model: ScriptedModelServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    with servers(home, model.base_url, config=REVIEW_ALWAYS) as group:
        sid = _propose_both(group, model, tmp_path)
        [global_file] = _pending_files(home / "harness")

        second = group.spawn(tmp_path)
        other, _ = new_session(second, tmp_path)
        # Only the global proposal is visible to another session; the local one stays with its own.
        assert second.request("_harness/status", {"sessionId": other})["awaitingReview"] == 1
        decided = second.request(
            "_harness/review", {"sessionId": other, "proposalId": global_file.stem, "decision": "apply"}
        )
        assert decided["status"] == "applied"
        assert _entries(second, other, "global") == ["Prefer uv everywhere."]
        assert _pending_files(home / "harness") == []

        # The original session, loaded afterwards, still has its local proposal and not the global one.
        second.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        assert second.request("_harness/status", {"sessionId": sid})["awaitingReview"] == 1
        with pytest.raises(Exception, match="no pending review"):
            second.request(
                "_harness/review", {"sessionId": sid, "proposalId": global_file.stem, "decision": "apply"}
            )


def test_a_global_kernel_write_in_auto_mode_shows_a_review_card_and_reaches_new_sessions_once_approved(
    model: ScriptedModelServer, tmp_path: Path
) -> None:
    cell = "harness.create('memory', 'GlobalFact', 'The build uses meson.', global_=True)"
    model.push(tool_call(cell, "Remember the build tool"), text("It waits for your review."))
    with servers(tmp_path / "home", model.base_url, config="auto_refine_every = 0\n") as group:
        client = group.spawn(tmp_path)
        sid, _ = new_session(client, tmp_path)  # auto mode, refine_review = global_only (the defaults)
        prompt(client, sid, "Remember the build tool, everywhere.")
        # The card comes from the harness event worker, which is not ordered before the prompt's answer.
        client.wait_for(
            lambda m: (
                m.get("method") == "session/update"
                and str(m["params"]["update"].get("toolCallId", "")).startswith("review-")
            ),
            timeout=30.0,
        )
        cards = [u for u in client.updates(sid) if str(u.get("toolCallId", "")).startswith("review-")]
        assert cards and cards[0]["sessionUpdate"] == "tool_call" and cards[0]["status"] == "pending"
        assert "GlobalFact" in str(cards[0]["rawInput"])
        assert client.request("_harness/status", {"sessionId": sid})["awaitingReview"] == 1
        assert _entries(client, sid, "global") == []  # not applied before the review

        client.permission_policy = select("apply")
        before = len(client.frames)
        done = prompt(client, sid, "/review")
        assert "Reviewed 1 of 1 waiting proposals." in messages_between(client, before, done.seq)
        [asked] = [r for r in client.agent_requests if r["method"] == "session/request_permission"]
        assert asked["params"]["toolCall"]["toolCallId"] == cards[0]["toolCallId"]

        fresh, _ = new_session(client, tmp_path)
        before = len(client.frames)
        done = prompt(client, fresh, "/harness")
        assert "GlobalFact" in messages_between(client, before, done.seq)
        model.push(text("Hello."))
        prompt(client, fresh, "hi")
        assert "The build uses meson." in str(model.requests[-1]["messages"][0]["content"])


def test_session_load_replays_refinement_cards_and_slash_command_exchanges_in_order(
    model: ScriptedModelServer, tmp_path: Path
) -> None:
    cell = "harness.create('memory', 'Local fact', 'Tabs in this repo.')"
    model.push(tool_call(cell, "Remember it"), text("Noted."))
    with servers(tmp_path / "home", model.base_url, config="auto_refine_every = 0\n") as group:
        first = group.spawn(tmp_path)
        sid, _ = new_session(first, tmp_path)
        prompt(first, sid, "Remember the tabs.")  # auto mode: a local write applies as a candidate
        prompt(first, sid, "/history")
        prompt(first, sid, "/undo")
        shown = _thread(first.updates(sid))
        assert first.close() == 0

        second = group.spawn(tmp_path)
        second.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        replayed = _thread(second.updates(sid))
        users = [text for kind, text in replayed if kind == "user"]
        assert users == ["Remember the tabs.", "/history", "/undo"]
        # The same thread as the user saw live (the prompts themselves the editor had shown itself).
        assert [item for item in replayed if item[0] != "user"] == shown
        created = next(t for k, t in replayed if k == "card").removeprefix("refinement-")
        at_history = replayed.index(("user", "/history"))
        assert replayed[at_history + 1][0] == "agent" and created in replayed[at_history + 1][1]
        at_undo = replayed.index(("user", "/undo"))
        after_undo = replayed[at_undo + 1 :]
        assert [k for k, _ in after_undo].count("card") == 1  # the rollback's card, after the command
        assert any(k == "agent" and created in t for k, t in after_undo)


def _thread(updates: list[dict[str, object]]) -> list[tuple[str, str]]:
    """Messages (coalesced per message id) and refinement cards, in order."""
    thread: list[tuple[str, str]] = []
    last_id: object = None
    for update in updates:
        kind = update["sessionUpdate"]
        if kind in ("user_message_chunk", "agent_message_chunk"):
            who = "user" if kind == "user_message_chunk" else "agent"
            chunk = str(update["content"]["text"])  # type: ignore[index]
            if thread and thread[-1][0] == who and update.get("messageId") == last_id:
                thread[-1] = (who, thread[-1][1] + chunk)
            else:
                thread.append((who, chunk))
            last_id = update.get("messageId")
        elif kind == "tool_call" and str(update.get("toolCallId", "")).startswith("refinement-"):
            thread.append(("card", str(update["toolCallId"])))
            last_id = None
    return thread


def test_a_local_kernel_write_from_an_allowed_cell_in_ask_mode_waits_for_review(
    model: ScriptedModelServer, tmp_path: Path
) -> None:
    cell = "print(harness.create('memory', 'Local fact', 'Tabs in this repo.')['status'])"
    model.push(tool_call(cell, "Remember it"), text("Asked."))
    with servers(tmp_path / "home", model.base_url, config="auto_refine_every = 0\n") as group:
        client = group.spawn(tmp_path)
        sid, _ = new_session(client, tmp_path)
        client.request("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "ask"})
        client.permission_policy = select("allow_once")  # the cell is allowed, once
        prompt(client, sid, "Remember the tabs.")
        asked = [
            r["params"]["toolCall"]
            for r in client.agent_requests
            if r["method"] == "session/request_permission"
        ]
        assert len(asked) == 1 and not str(asked[0]["toolCallId"]).startswith("review-")  # only the cell
        assert "pending_review" in str(model.requests[1]["messages"])  # what the cell printed
        assert _entries(client, sid, "local") == []  # not applied silently
        assert client.request("_harness/status", {"sessionId": sid})["awaitingReview"] == 1
        assert [u for u in client.updates(sid) if str(u.get("toolCallId", "")).startswith("review-")]

        client.permission_policy = select("apply")
        prompt(client, sid, "/review")
        state = client.request("_harness/state", {"sessionId": sid, "scope": "local"})
        assert [(e["content"], e["trust"]) for e in state["entries"]] == [("Tabs in this repo.", "verified")]


def test_rollback_command_of_an_already_rolled_back_refinement_names_the_later_one_and_writes_nothing(
    model: ScriptedModelServer, tmp_path: Path
) -> None:
    cell = "harness.create('memory', 'Local fact', 'Tabs in this repo.')"
    model.push(tool_call(cell, "Remember it"), text("Noted."))
    with servers(tmp_path / "home", model.base_url, config="auto_refine_every = 0\n") as group:
        client = group.spawn(tmp_path)
        sid, _ = new_session(client, tmp_path)
        prompt(client, sid, "Remember the tabs.")
        [created] = [h["id"] for h in client.request("_harness/history", {"sessionId": sid})["refinements"]]
        prompt(client, sid, "/undo")
        history = client.request("_harness/history", {"sessionId": sid})["refinements"]
        [undone_by] = [h["id"] for h in history if h["id"] != created]
        before = len(client.frames)
        done = prompt(client, sid, f"/rollback {created}")
        said = messages_between(client, before, done.seq)
        assert f"Refinement {created} was already rolled back by {undone_by}." in said
        assert client.request("_harness/history", {"sessionId": sid})["refinements"] == history


def test_harness_rollback_of_an_already_rolled_back_refinement_is_refused_naming_the_later_one(
    model: ScriptedModelServer, tmp_path: Path
) -> None:
    cell = "harness.create('memory', 'Local fact', 'Tabs in this repo.')"
    model.push(tool_call(cell, "Remember it"), text("Noted."))
    with servers(tmp_path / "home", model.base_url, config="auto_refine_every = 0\n") as group:
        client = group.spawn(tmp_path)
        sid, _ = new_session(client, tmp_path)
        prompt(client, sid, "Remember the tabs.")
        [created] = [h["id"] for h in client.request("_harness/history", {"sessionId": sid})["refinements"]]
        undone = client.request("_harness/rollback", {"sessionId": sid, "refinementId": created})
        history = client.request("_harness/history", {"sessionId": sid})["refinements"]
        with pytest.raises(RpcError) as refused:
            client.request("_harness/rollback", {"sessionId": sid, "refinementId": created})
        assert refused.value.code == -32010
        assert f"already rolled back by {undone['id']}" in str(refused.value.message)
        assert refused.value.data["rolledBackBy"] == undone["id"]
        assert client.request("_harness/history", {"sessionId": sid})["refinements"] == history
