"""TurnRecorder: what of a turn's event stream reaches the transcript."""

from __future__ import annotations

from pathlib import Path

from agent_core import events as ev
from agent_core.history.transcript import SessionStore
from agent_core.turn.recorder import CELL_OUTPUT_KEPT, TurnRecorder


def _replay(tmp_path: Path, events: list[ev.TurnEvent]) -> list[ev.TurnEvent]:
    store = SessionStore(tmp_path)
    writer = store.create("s", str(tmp_path))
    recorder = TurnRecorder(writer)
    for event in events:
        recorder.record(event)
    recorder.flush()
    writer.close()
    return store.load("s").events


def test_deltas_are_coalesced_per_message_and_per_output_stream(tmp_path: Path) -> None:
    events: list[ev.TurnEvent] = [
        *(ev.ThoughtChunk(c, "t1") for c in "hmm"),
        *(ev.MessageChunk(c, "m1") for c in "hello"),
        ev.CellStarted("c1", "print(1)", "p"),
        ev.CellOutput("c1", "stdout", "a"),
        ev.CellOutput("c1", "stdout", "b"),
        ev.CellOutput("c1", "stderr", "warn"),
        ev.CellOutput("c1", "stdout", "c"),
        ev.CellFinished("c1", "completed", output="abc"),
        ev.MessageChunk("bye", "m2"),
        ev.UsageReport(10, 100),
        ev.TurnEnded("end_turn"),
    ]
    assert _replay(tmp_path, events) == [
        ev.ThoughtChunk("hmm", "t1"),
        ev.MessageChunk("hello", "m1"),
        ev.CellStarted("c1", "print(1)", "p"),
        ev.CellOutput("c1", "stdout", "ab"),
        ev.CellOutput("c1", "stderr", "warn"),
        ev.CellOutput("c1", "stdout", "c"),
        ev.CellFinished("c1", "completed", output="abc"),
        ev.MessageChunk("bye", "m2"),
        ev.TurnEnded("end_turn"),
    ]


def test_a_huge_cell_output_is_bounded_with_a_marker(tmp_path: Path) -> None:
    line = "x" * 999 + "\n"
    count = (CELL_OUTPUT_KEPT // len(line)) * 3
    events: list[ev.TurnEvent] = [ev.CellOutput("c1", "stdout", line) for _ in range(count)]
    events.append(ev.CellFinished("c1", "completed"))
    replay = _replay(tmp_path, events)
    outputs = [e for e in replay if isinstance(e, ev.CellOutput)]
    kept = sum(len(e.text) for e in outputs[:-1])
    assert kept == CELL_OUTPUT_KEPT
    assert f"{count * len(line) - CELL_OUTPUT_KEPT} more characters" in outputs[-1].text
    assert isinstance(replay[-1], ev.CellFinished)
    assert len(replay) < 10  # coalesced into a few records, not thousands of lines
