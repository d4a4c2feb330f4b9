"""JSON extraction from model replies: three ways to succeed, three distinct ways to fail."""

from __future__ import annotations

import pytest

from agent_core.refinement.extract import (
    TRUNCATED_MESSAGE,
    InvalidJSONReply,
    NoJSONObjectReply,
    TruncatedReply,
    extract_json_object,
)


def test_bare_object_is_parsed() -> None:
    assert extract_json_object('{"summary": "x", "edits": []}') == {"summary": "x", "edits": []}


def test_fenced_block_is_parsed_with_prose_around_it() -> None:
    reply = 'Here is the plan:\n```json\n{"summary": "fenced", "edits": []}\n```\nDone.'
    assert extract_json_object(reply)["summary"] == "fenced"


def test_outermost_braces_are_used_when_prose_surrounds_the_object() -> None:
    reply = 'I propose {"summary": "inline", "edits": [{"action": "create"}]} as the change.'
    assert extract_json_object(reply)["edits"] == [{"action": "create"}]


def test_braces_inside_strings_do_not_confuse_the_scanner() -> None:
    reply = 'prefix {"content": "use {x} and \\"}\\" freely", "n": 1} suffix'
    assert extract_json_object(reply) == {"content": 'use {x} and "}" freely', "n": 1}


def test_length_cut_reply_is_reported_as_truncation() -> None:
    with pytest.raises(TruncatedReply) as info:
        extract_json_object('{"summary": "big", "edits": [{"action": "cre', finish_reason="length")
    assert info.value.problem == "truncated"
    assert str(info.value) == TRUNCATED_MESSAGE


def test_unclosed_fence_without_finish_reason_is_truncation() -> None:
    with pytest.raises(TruncatedReply):
        extract_json_object('```json\n{"summary": "cut", "edits": [')


def test_complete_object_is_accepted_even_when_the_budget_ran_out_after_it() -> None:
    assert extract_json_object('{"a": 1}\nand then I', finish_reason="length") == {"a": 1}


def test_malformed_object_is_invalid_json_not_truncation() -> None:
    with pytest.raises(InvalidJSONReply) as info:
        extract_json_object("{'summary': 'single quotes'}", finish_reason="stop")
    assert info.value.problem == "invalid_json"
    assert "not valid JSON" in str(info.value)
    assert TRUNCATED_MESSAGE not in str(info.value)


def test_object_left_open_when_the_model_said_stop_is_invalid_json() -> None:
    with pytest.raises(InvalidJSONReply, match="never closed"):
        extract_json_object('{"summary": "oops"', finish_reason="stop")


def test_prose_without_braces_is_no_json_object() -> None:
    with pytest.raises(NoJSONObjectReply) as info:
        extract_json_object("I do not think the harness needs changes.", finish_reason="stop")
    assert info.value.problem == "no_json"
    assert "no JSON object" in str(info.value)


def test_json_array_is_rejected_as_not_an_object() -> None:
    with pytest.raises(InvalidJSONReply, match="expected a JSON object"):
        extract_json_object("[1, 2, 3]", finish_reason="stop")


def test_reasoning_only_reply_is_searched_for_the_object() -> None:
    assert extract_json_object("", reasoning='thinking... {"should_refine": false}') == {
        "should_refine": False
    }


def test_reasoning_only_reply_without_object_says_so() -> None:
    with pytest.raises(NoJSONObjectReply, match="reasoning only"):
        extract_json_object("", reasoning="hmm, let me think", finish_reason="stop")


def test_reasoning_that_used_the_whole_budget_is_truncation() -> None:
    with pytest.raises(TruncatedReply):
        extract_json_object("", reasoning="a very long chain of thought", finish_reason="length")


def test_a_raw_newline_inside_a_string_is_kept_not_a_parse_failure() -> None:
    reply = '{"summary": "two\nlines", "edits": [{"content": "a\ttab"}]}'
    value = extract_json_object(reply, finish_reason="stop")
    assert value["summary"] == "two\nlines" and value["edits"][0]["content"] == "a\ttab"
