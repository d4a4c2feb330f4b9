"""`session/load` streams its replay: the transcript is read once for the model context (events left
on disk) and the events are decoded as the replay takes them, up to where the load read."""

from __future__ import annotations

from pathlib import Path

from agent_core import events as ev
from agent_core.history.transcript import SessionStore


def _store_with_history(tmp_path: Path) -> SessionStore:
    store = SessionStore(tmp_path)
    writer = store.create("sess_long", str(tmp_path))
    for i in range(50):
        writer.event(ev.UserMessage((ev.TextPart(f"question {i}"),), f"u{i}"))
        writer.message({"role": "user", "content": f"question {i}"})
        writer.event(ev.MessageChunk(f"answer {i}", f"a{i}"))
        writer.message({"role": "assistant", "content": f"answer {i}"})
    writer.close()
    with store.transcript_path("sess_long").open("a") as fh:
        fh.write('{"type":"event","event":{"kind":"no-such-event"}}\n')  # one that does not decode
    return store


def test_a_load_without_events_keeps_the_context_and_the_replay_streams_the_same_events(
    tmp_path: Path,
) -> None:
    store = _store_with_history(tmp_path)
    full = store.load("sess_long")
    light = store.load("sess_long", events=False)
    assert light.events == [] and light.messages == full.messages
    assert list(store.iter_events("sess_long", light.lines)) == full.events
    assert len(full.events) == 100


def test_the_replay_stops_where_the_load_read_so_a_later_append_is_not_replayed_as_history(
    tmp_path: Path,
) -> None:
    store = _store_with_history(tmp_path)
    loaded = store.load("sess_long", events=False)
    replay = store.iter_events("sess_long", loaded.lines)
    writer = store.open("sess_long")
    writer.event(ev.MessageChunk("live, after the load", "late"))
    writer.close()
    texts = [getattr(e, "text", "") for e in replay]
    assert texts[-1] == "answer 49" and "live, after the load" not in texts
