"""acp_driver's framing: whole lines out of arbitrary chunks, and a defined report for a bad line."""

from __future__ import annotations

from acp_driver.framing import BadLine, LineDecoder, encode, parse


def test_a_line_split_across_chunks_and_several_lines_in_one_chunk_decode_in_order() -> None:
    decoder = LineDecoder()
    first = decoder.feed(b'{"a": 1}\n{"b"')
    rest = decoder.feed(b': 2}\n{"c": 3}\n')
    assert first == [b'{"a": 1}\n']
    assert rest == [b'{"b": 2}\n', b'{"c": 3}\n']
    assert decoder.end() == []


def test_a_line_over_the_limit_is_reported_and_the_next_line_still_decodes() -> None:
    decoder = LineDecoder(limit=16)
    out = decoder.feed(b'{"pad": "' + b"x" * 10)
    out += decoder.feed(b"x" * 40)  # still the same runaway line: nothing more is reported
    out += decoder.feed(b'"}\n{"ok": true}\n')
    assert len(out) == 2
    assert isinstance(out[0], BadLine) and "over the 16-byte limit" in out[0].reason
    assert out[1] == b'{"ok": true}\n'


def test_a_non_json_line_and_a_json_non_object_are_bad_lines_and_an_object_parses() -> None:
    garbage = parse(b"hello\n")
    array = parse(b"[1, 2]\n")
    assert isinstance(garbage, BadLine) and garbage.reason.startswith("not JSON")
    assert isinstance(array, BadLine) and array.reason == "not a JSON object: list"
    assert parse(encode({"jsonrpc": "2.0", "id": 1})) == {"jsonrpc": "2.0", "id": 1}


def test_a_last_line_without_its_newline_is_reported_at_the_end_of_the_stream() -> None:
    decoder = LineDecoder()
    assert decoder.feed(b'{"cut": ') == []
    [cut] = decoder.end()
    assert isinstance(cut, BadLine) and cut.raw == b'{"cut": ' and "no newline" in cut.reason
