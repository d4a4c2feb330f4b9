"""Head+tail truncation and the live event budget, without a kernel."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_bridge.cell import CellRun
from kernel_bridge.events import CellResult, Finished, Stream
from kernel_bridge.output import OutputCollector, strip_ansi, truncate_middle

pytestmark = pytest.mark.anyio
MARKER = re.compile(r"\n\[\.\.\. (\d+) characters omitted; full output: (.+) \.\.\.\]\n")


@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(st.text(max_size=300), max_size=40), limit=st.integers(min_value=2, max_value=400))
def test_collector_keeps_head_and_tail_of_any_chunking(
    tmp_path_factory: pytest.TempPathFactory, chunks: list[str], limit: int
) -> None:
    path = tmp_path_factory.mktemp("out") / "cell.txt"
    collector = OutputCollector(path, max_chars=limit)
    for chunk in chunks:
        collector.add(chunk)
    collector.close()
    full = "".join(chunks)
    text = collector.text()
    if full:
        assert path.read_bytes() == full.encode("utf-8", "replace")
    else:
        assert not path.exists()  # no output, no file
    if len(full) <= limit:
        assert text == full
        return
    match = MARKER.search(text)
    assert match is not None
    head, tail = text[: match.start()], text[match.end() :]
    assert full.startswith(head) and full.endswith(tail)
    assert len(head) + len(tail) == limit
    assert int(match.group(1)) == len(full) - limit
    assert match.group(2) == str(path)  # the model is told where to page the rest


def test_truncate_middle_marks_what_it_drops() -> None:
    assert truncate_middle("abcdefghij", 4) == "ab\n[... 6 characters omitted ...]\nij"
    assert truncate_middle("short", 10) == "short"


def test_ansi_codes_are_stripped() -> None:
    assert strip_ansi("\x1b[0;31mValueError\x1b[0m: bad") == "ValueError: bad"


async def test_live_buffer_drops_beyond_budget_and_announces_it(tmp_path: Path) -> None:
    run = CellRun("code", live_buffer_chars=100)
    for _ in range(10):
        run.push(Stream("stdout", "x" * 30))
    run.finish(CellResult("ok", "", None, tmp_path / "full.txt", 0.1))
    events = [event async for event in run]
    shown = sum(len(e.text) for e in events if isinstance(e, Stream) and e.text.startswith("x"))
    assert shown == 90
    assert run.peak_buffered_chars <= 100
    assert any(isinstance(e, Stream) and "210 characters not shown live" in e.text for e in events)
    assert isinstance(events[-1], Finished)


async def test_consumer_that_keeps_up_sees_everything(tmp_path: Path) -> None:
    run = CellRun("code", live_buffer_chars=100)
    seen = 0
    for _ in range(10):
        run.push(Stream("stdout", "y" * 30))
        event = await anext(run)
        assert isinstance(event, Stream)
        seen += len(event.text)
    run.finish(CellResult("ok", "", None, tmp_path / "full.txt", 0.1))
    assert [event async for event in run] == [Finished("ok", 0.1)]
    assert seen == 300
