"""Every turn event maps onto a schema-valid `session/update` (in-process, no agent needed)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from acp_client import check_model

from acp_server.turn.cell_cards import HEAD_CHARS, TAIL_CHARS
from acp_server.turn.presenter import TurnPresenter
from agent_core import events as ev

pytestmark = pytest.mark.anyio


class Recorder:
    """Collects updates; schema problems are kept (not raised: the presenter logs and skips errors)."""

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        self.problems: list[str] = []

    async def __call__(self, update: dict[str, Any]) -> None:
        problem = check_model("SessionNotification", {"sessionId": "s", "update": update})
        if problem:
            self.problems.append(problem)
        self.updates.append(update)


async def _present(events: list[Any], *, terminal: bool = False) -> list[dict[str, Any]]:
    sink = Recorder()
    presenter = TurnPresenter(sink, cwd="/work", terminal_output=terminal)
    async with anyio.create_task_group() as tg:
        presenter.attach(tg)
        for event in events:
            await presenter.present(event)
        await presenter.close()
        tg.cancel_scope.cancel()
    assert not sink.problems, sink.problems
    return sink.updates


async def test_replayed_user_message_parts_become_user_chunks_of_every_block_type() -> None:
    parts = (
        ev.TextPart("hello"),
        ev.ImagePart("aGk=", "image/png"),
        ev.ResourcePart("file:///a.py", text="x = 1", mime_type="text/x-python"),
        ev.ResourcePart("file:///b.bin", blob="AAE="),
        ev.ResourceLinkPart("https://example.com", "example"),
    )
    updates = await _present([ev.UserMessage(parts, "m1")])
    assert [u["content"]["type"] for u in updates] == [
        "text",
        "image",
        "resource",
        "resource",
        "resource_link",
    ]
    assert all(u["sessionUpdate"] == "user_message_chunk" and u["messageId"] == "m1" for u in updates)


async def test_plan_usage_title_and_thoughts_map_to_their_updates() -> None:
    updates = await _present(
        [
            ev.ThoughtChunk("hmm", "t1"),
            ev.PlanChanged((ev.PlanEntry("step one", "in_progress", "high"), ev.PlanEntry("step two"))),
            ev.UsageReport(used=1200, size=128000, input_tokens=1000, output_tokens=200),
            ev.TitleChanged("A title"),
            ev.TurnEnded("end_turn"),
        ]
    )
    assert [u["sessionUpdate"] for u in updates] == [
        "agent_thought_chunk",
        "plan",
        "usage_update",
        "session_info_update",
    ]
    assert updates[1]["entries"][0] == {"content": "step one", "priority": "high", "status": "in_progress"}
    assert updates[2] == {"sessionUpdate": "usage_update", "used": 1200, "size": 128000}


async def test_a_cell_card_carries_output_images_diffs_and_the_terminal_trio() -> None:
    updates = await _present(
        [
            ev.CellStarted("c1", "print('hi')", "Say hi"),
            ev.CellOutput("c1", "stdout", "hi\n"),
            ev.CellDisplay("c1", {"image/png": "aGk=", "text/plain": "<Figure>"}),
            ev.FileEdited("c1", "/work/a.txt", None, "new\n"),
            ev.CellFinished("c1", "completed", output="hi\n"),
        ],
        terminal=True,
    )
    start, final = updates[0], updates[-1]
    assert start["title"] == "Say hi"  # agent_core's cell_title, shown as given
    assert start["_meta"]["terminal_info"] == {"terminal_id": "c1", "cwd": "/work"}
    kinds = [b["type"] if b["type"] != "content" else b["content"]["type"] for b in final["content"]]
    # The output is in the terminal, not repeated as a text block.
    assert kinds == ["text", "terminal", "image", "diff"]
    assert final["locations"] == [{"path": "/work/a.txt"}]
    assert final["_meta"]["terminal_exit"] == {"terminal_id": "c1", "exit_code": 0, "signal": None}
    sent = "".join(u.get("_meta", {}).get("terminal_output", {}).get("data", "") for u in updates)
    assert sent == "hi\r\n"


async def test_cleared_output_is_dropped_from_the_card() -> None:
    updates = await _present(
        [
            ev.CellStarted("c1", "x", "t"),
            ev.CellOutput("c1", "stdout", "before\n"),
            ev.CellClear("c1"),
            ev.CellOutput("c1", "stdout", "after\n"),
            ev.CellFinished("c1", "completed"),
        ]
    )
    text = str(updates[-1]["content"])
    assert "after" in text and "before" not in text


async def test_huge_output_keeps_head_and_tail_with_the_omitted_count() -> None:
    chunk = "0123456789" * 1000
    events: list[Any] = [ev.CellStarted("c1", "x", "t")]
    events += [ev.CellOutput("c1", "stdout", chunk) for _ in range(100)]  # 1,000,000 characters
    events.append(ev.CellFinished("c1", "completed"))
    updates = await _present(events)
    shown = updates[-1]["content"][1]["content"]["text"]
    omitted = 1_000_000 - HEAD_CHARS - TAIL_CHARS
    assert f"[... {omitted} characters omitted ...]" in shown
    assert len(shown) < HEAD_CHARS + TAIL_CHARS + 200


async def test_a_capped_terminal_view_leaves_the_output_tail_in_the_card() -> None:
    chunk = "0123456789" * 1000
    events: list[Any] = [ev.CellStarted("c1", "x", "t")]
    events += [ev.CellOutput("c1", "stdout", chunk) for _ in range(200)]  # 2,000,000 characters
    events.append(ev.CellOutput("c1", "stdout", "THE END\n"))
    events.append(ev.CellFinished("c1", "completed"))
    updates = await _present(events, terminal=True)
    sent = "".join(u.get("_meta", {}).get("terminal_output", {}).get("data", "") for u in updates)
    assert "terminal view stopped here" in sent
    assert "THE END" not in sent
    texts = [b["content"]["text"] for b in updates[-1]["content"] if b["type"] == "content"]
    assert any("THE END" in text and "characters omitted" in text for text in texts)


async def test_a_cancelled_turn_settles_open_cards_instead_of_leaving_them_spinning() -> None:
    updates = await _present([ev.CellStarted("c1", "sleep()", "Sleep"), ev.TurnEnded("cancelled")])
    assert updates[-1]["status"] == "failed"
    assert "cancelled" in str(updates[-1]["content"])


async def test_refinement_reports_show_an_edit_card_and_the_undo_hint() -> None:
    report = ev.RefinementReported(
        "r-1",
        "remember the test command",
        "local",
        (
            {
                "action": "create",
                "kind": "memory",
                "id": "m1",
                "path": "/h/m1.md",
                "before": None,
                "after": "make check",
            },
        ),
    )
    updates = await _present([report])
    card, message = updates
    assert card["kind"] == "edit" and card["title"] == "Refine harness: remember the test command"
    assert card["content"][0] == {
        "type": "diff",
        "path": "/h/m1.md",
        "oldText": None,
        "newText": "make check",
    }
    assert "/rollback r-1" in message["content"]["text"]


async def test_an_edit_outside_any_cell_still_gets_an_edit_card_with_its_diff() -> None:
    updates = await _present([ev.FileEdited("", "/work/b.txt", "old\n", "new\n")])
    assert updates[0]["kind"] == "edit" and updates[0]["title"] == "Edit b.txt"
    assert updates[0]["content"] == [
        {"type": "diff", "path": "/work/b.txt", "oldText": "old\n", "newText": "new\n"}
    ]


async def test_a_replayed_cell_is_sent_whole_not_chunk_by_chunk() -> None:
    sink = Recorder()
    presenter = TurnPresenter(sink, cwd="/work", terminal_output=False)
    presenter.attach(None, replay=True)
    await presenter.present(ev.CellStarted("c1", "x", "t"))
    for i in range(100):
        await presenter.present(ev.CellOutput("c1", "stdout", f"line {i}\n"))
    await presenter.present(ev.CellFinished("c1", "completed"))
    await presenter.close()
    assert not sink.problems
    assert len(sink.updates) == 3  # tool_call, in_progress, final
    assert "line 99" in str(sink.updates[-1]["content"])


async def test_a_malformed_event_is_skipped_and_the_rest_still_presented() -> None:
    bad = ev.PlanChanged(None)  # type: ignore[arg-type]
    updates = await _present(
        [
            ev.CellStarted("c1", "x", "t"),
            bad,
            ev.CellOutput("c1", "stdout", "fine\n"),
            ev.CellFinished("c1", "completed"),
        ]
    )
    assert updates[-1]["status"] == "completed" and "fine" in str(updates[-1]["content"])
