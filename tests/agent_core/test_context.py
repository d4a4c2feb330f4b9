"""The model context and its surgery: every change is in the transcript, so a load rebuilds it."""

from __future__ import annotations

from pathlib import Path

from agent_core.history.transcript import SessionStore
from agent_core.model_events import Usage
from agent_core.turn.content import IMAGE_NOT_SEEN
from agent_core.turn.model_context import CANCELLED_ANSWER, ModelContext


def _context(
    tmp_path: Path, messages: list[dict[str, object]] | None = None
) -> tuple[ModelContext, SessionStore]:
    store = SessionStore(tmp_path)
    writer = store.create("s1", str(tmp_path))
    return ModelContext(writer, context_window=1000, messages=messages), store


def _call(call_id: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": "ipython", "arguments": "{}"}}


def test_an_unanswered_tool_call_gets_the_answer_and_a_load_sees_it(tmp_path: Path) -> None:
    context, store = _context(tmp_path)
    context.append({"role": "user", "content": "go"})
    context.append({"role": "assistant", "content": None, "tool_calls": [_call("a"), _call("b")]})
    context.append({"role": "tool", "tool_call_id": "a", "content": "done"})
    context.answer_dangling_tool_calls()
    expected = {"role": "tool", "tool_call_id": "b", "content": CANCELLED_ANSWER}
    assert context.messages[-1] == expected
    assert store.load("s1").messages[-1] == expected


def test_answered_tool_calls_are_left_alone(tmp_path: Path) -> None:
    context, _ = _context(tmp_path)
    context.append({"role": "assistant", "content": None, "tool_calls": [_call("a")]})
    context.append({"role": "tool", "tool_call_id": "a", "content": "done"})
    before = list(context.messages)
    context.answer_dangling_tool_calls()
    assert context.messages == before


def test_tool_calls_before_the_last_user_message_are_not_looked_at(tmp_path: Path) -> None:
    # Only the last exchange can be dangling; an older one was answered when it ended.
    context, _ = _context(
        tmp_path,
        [
            {"role": "assistant", "content": None, "tool_calls": [_call("old")]},
            {"role": "user", "content": "hi"},
        ],
    )
    context.answer_dangling_tool_calls()
    assert len(context.messages) == 2


def test_dropping_images_replaces_them_by_a_note_and_records_the_new_context(tmp_path: Path) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    context, store = _context(tmp_path)
    context.append({"role": "user", "content": [{"type": "text", "text": "look"}, image]})
    assert context.drop_images() is True
    expected = [{"type": "text", "text": "look"}, {"type": "text", "text": IMAGE_NOT_SEEN}]
    assert context.messages[0]["content"] == expected
    assert store.load("s1").messages[0]["content"] == expected


def test_dropping_images_when_there_are_none_changes_nothing(tmp_path: Path) -> None:
    context, _ = _context(tmp_path, [{"role": "user", "content": "text only"}])
    assert context.drop_images() is False
    assert context.messages == [{"role": "user", "content": "text only"}]


def test_usage_adds_up_per_session_and_the_window_fill_is_the_last_request(tmp_path: Path) -> None:
    context, _ = _context(tmp_path)
    context.usage_event(Usage(input_tokens=100, output_tokens=10, cache_read_tokens=50))
    report = context.usage_event(Usage(input_tokens=200, output_tokens=20))
    assert (report.used, report.size) == (220, 1000)
    assert (report.input_tokens, report.output_tokens, report.cache_read_tokens) == (300, 30, 50)


def test_the_window_counts_as_full_from_the_fraction_on(tmp_path: Path) -> None:
    context, _ = _context(tmp_path)
    assert context.over(0.8) is False  # nothing measured yet
    context.usage_event(Usage(input_tokens=790, output_tokens=10))
    assert context.over(0.8) is True
    assert context.over(0.81) is False


def test_nothing_can_be_compacted_while_the_context_is_only_the_recent_turns(tmp_path: Path) -> None:
    context, _ = _context(
        tmp_path, [{"role": "user", "content": "one"}, {"role": "assistant", "content": "a"}]
    )
    assert context.can_compact(keep_recent_turns=2) is False
