"""No character from the model or the user can break the transcript or leave a session unusable.

Over real stdio with the scripted model (its SSE frames escape non-ASCII, so a
lone surrogate arrives as `\\udc80` and the openai client decodes it to a lone surrogate).
"""

from __future__ import annotations

from pathlib import Path

from defect_support import AcpClient, new_session, prompt, served

from agent_core.testing.scripted_model import ScriptedModelServer, response, text


def _agent_text(client: AcpClient, sid: str) -> str:
    return "".join(
        u["content"]["text"] for u in client.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"
    )


def test_a_lone_surrogate_from_the_model_completes_the_turn_and_the_next_prompt_works(tmp_path: Path) -> None:
    with ScriptedModelServer([text("bad \udc80 x"), text("still fine")]) as model:
        with served(tmp_path / "home", tmp_path, model.base_url) as client:
            sid, _ = new_session(client, str(tmp_path))
            assert prompt(client, sid, "say something odd")[0] == "end_turn"
            assert prompt(client, sid, "and again")[0] == "end_turn"
            assert _agent_text(client, sid) == "bad \ufffd xstill fine"


def test_an_emoji_split_across_two_sse_chunks_arrives_whole_and_the_next_prompt_works(tmp_path: Path) -> None:
    split = response([{"content": "smile \ud83d"}, {"content": "\ude00 done"}])
    with ScriptedModelServer([split, text("next")]) as model:
        with served(tmp_path / "home", tmp_path, model.base_url) as client:
            sid, _ = new_session(client, str(tmp_path))
            assert prompt(client, sid, "smile")[0] == "end_turn"
            assert prompt(client, sid, "again")[0] == "end_turn"
            assert _agent_text(client, sid) == "smile \U0001f600 donenext"


def test_a_lone_surrogate_in_the_user_prompt_completes_the_turn_and_the_next_prompt_works(
    tmp_path: Path,
) -> None:
    with ScriptedModelServer([text("got it"), text("ok")]) as model:
        with served(tmp_path / "home", tmp_path, model.base_url) as client:
            sid, _ = new_session(client, str(tmp_path))
            assert prompt(client, sid, "broken \udc80 prompt")[0] == "end_turn"
            assert prompt(client, sid, "plain prompt")[0] == "end_turn"
            sent = model.requests[0]["messages"][-1]["content"]
    assert "broken \ufffd prompt" in str(sent)


def test_a_session_whose_transcript_holds_a_lone_surrogate_turn_loads_and_replays(tmp_path: Path) -> None:
    with ScriptedModelServer([text("bad \udc80 x")]) as model:
        with served(tmp_path / "home", tmp_path, model.base_url) as client:
            sid, _ = new_session(client, str(tmp_path))
            assert prompt(client, sid, "odd \udc81 prompt")[0] == "end_turn"
        with served(tmp_path / "home", tmp_path, model.base_url) as client:
            client.request("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
            assert _agent_text(client, sid) == "bad \ufffd x"


def test_a_transcript_record_with_lone_surrogates_is_written_and_reads_back_replaced(tmp_path: Path) -> None:
    from agent_core.history.transcript import SessionStore

    store = SessionStore(tmp_path / "home")
    writer = store.create("s-1", str(tmp_path))
    writer.message({"role": "user", "content": "kernel said \udcff and \ud83d\ude00"})
    writer.close()
    assert store.load("s-1").messages == [{"role": "user", "content": "kernel said \ufffd and \U0001f600"}]
