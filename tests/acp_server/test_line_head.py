"""line_head: the id and top-level keys of a JSON-RPC line read from its first bytes only."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from acp_server.protocol.line_head import read_head


def test_the_id_and_method_of_a_request_are_read_from_its_head() -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": 42, "method": "session/prompt", "params": {"x": "y" * 100}})
    found = read_head(line.encode()[:60])
    assert found.ident == 42 and {"jsonrpc", "id", "method"} <= found.keys and not found.is_response


def test_an_id_cut_off_by_the_head_is_not_guessed() -> None:
    assert read_head(b'{"jsonrpc":"2.0","id":12').ident is None  # 12 could be 123...
    assert read_head(b'{"jsonrpc":"2.0","id":"abc').ident is None


def test_an_id_nested_in_params_is_not_the_request_id() -> None:
    found = read_head(b'{"method":"x","params":{"id":5,"s":"}"},"id":"outer"')
    assert found.ident == "outer"
    assert read_head(b'{"method":"x","params":{"id":5,').ident is None


def test_a_response_is_recognised() -> None:
    found = read_head(b'{"jsonrpc":"2.0","id":3,"result":{"content":"aaaa')
    assert found.is_response and found.ident == 3


def test_a_head_that_is_not_an_object_names_nothing() -> None:
    assert read_head(b"[1,2,3]").keys == frozenset() and read_head(b"garbage").ident is None


@given(
    ident=st.one_of(st.integers(-(10**20), 10**20), st.text(max_size=30)),
    pad=st.text(min_size=0, max_size=200),
)
def test_a_whole_request_head_gives_back_exactly_its_id(ident: int | str, pad: str) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": ident, "method": "m", "params": {"pad": pad}})
    assert read_head(line.encode()).ident == ident
