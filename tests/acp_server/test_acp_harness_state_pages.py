"""`_harness/state` in pages over real stdio: `limit`, `nextCursor`, `total`, the `kind` filter, and
the -32602 refusal of a cursor the server did not give for this query."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from acp_client import AcpClient, RpcError, server_env
from acp_helpers import initialize, new_session

from harness_store import HarnessStore, Proposal

MEMORIES = ["m1", "m2", "m3", "m4", "m5"]
PROMPTS = ["p1", "p2"]


def _create(store: HarnessStore, kind: str, entry_id: str) -> None:
    edit = {
        "action": "create",
        "kind": kind,
        "id": entry_id,
        "title": entry_id,
        "content": f"{entry_id} text",
    }
    result = store.apply({"summary": f"add {entry_id}", "edits": [edit]}, scope="global", trigger="user")
    assert all(e.applied for e in result.applied_edits), result


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AcpClient, str, HarnessStore]]:
    """One server over a global harness of 5 memories, 2 prompts and one tombstone; the tests that
    edit it put it back as they found it."""
    root = tmp_path_factory.mktemp("pages")
    store = HarnessStore(root / "home" / "harness")
    for kind, ids in (("memory", MEMORIES), ("prompt", PROMPTS)):
        for entry_id in ids:
            _create(store, kind, entry_id)
    rejected = {"action": "create", "kind": "memory", "id": "nope", "title": "nope", "content": "never this"}
    store.reject_proposal(Proposal.model_validate({"summary": "no", "edits": [rejected]}))
    client = AcpClient(server_env(root / "home"), cwd=str(root))
    try:
        initialize(client)
        sid, _ = new_session(client, root)
        yield client, sid, store
    finally:
        client.close()
    assert not client.garbage and not client.violations, (client.garbage, client.violations)


def _keys(answer: dict[str, Any]) -> list[str]:
    return [f"{e['kind']}/{e['key']}" for e in answer["entries"]]


def _walk(client: AcpClient, params: dict[str, Any]) -> list[dict[str, Any]]:
    pages = [client.request("_harness/state", params)]
    while "nextCursor" in pages[-1]:
        pages.append(client.request("_harness/state", {**params, "cursor": pages[-1]["nextCursor"]}))
    return pages


def test_pages_walked_by_next_cursor_give_every_entry_once_in_kind_then_key_order(
    server: tuple[AcpClient, str, HarnessStore],
) -> None:
    client, sid, _ = server
    whole = client.request("_harness/state", {"sessionId": sid, "scope": "global"})
    assert "nextCursor" not in whole and whole["total"] == 7
    assert _keys(whole) == [f"memory/{m}" for m in MEMORIES] + [f"prompt/{p}" for p in PROMPTS]
    pages = _walk(client, {"sessionId": sid, "scope": "global", "limit": 3})
    assert [len(p["entries"]) for p in pages] == [3, 3, 1]
    assert [p["total"] for p in pages] == [7, 7, 7]
    assert [e for p in pages for e in p["entries"]] == whole["entries"]
    # The tombstones ride on the first page only.
    assert [[t["content"] for t in p["tombstones"]] for p in pages] == [["never this"], [], []]


def test_an_edit_between_pages_neither_repeats_nor_skips_the_entries_after_the_cursor(
    server: tuple[AcpClient, str, HarnessStore],
) -> None:
    client, sid, store = server
    params = {"sessionId": sid, "scope": "global", "limit": 2}
    first = client.request("_harness/state", params)
    assert _keys(first) == ["memory/m1", "memory/m2"]
    # Before the cursor one entry goes, after it one comes: an offset would now skip m3.
    store.apply(
        {"summary": "drop", "edits": [{"action": "delete", "kind": "memory", "id": "m1"}]},
        scope="global",
        trigger="user",
    )
    _create(store, "memory", "m35")
    try:
        rest = [first]
        while "nextCursor" in rest[-1]:
            rest.append(client.request("_harness/state", {**params, "cursor": rest[-1]["nextCursor"]}))
        after = [k for page in rest[1:] for k in _keys(page)]
        assert after == ["memory/m3", "memory/m35", "memory/m4", "memory/m5", "prompt/p1", "prompt/p2"]
        assert rest[-1]["total"] == 7
    finally:
        store.apply(
            {"summary": "undo", "edits": [{"action": "delete", "kind": "memory", "id": "m35"}]},
            scope="global",
            trigger="user",
        )
        _create(store, "memory", "m1")


def test_the_kind_filter_pages_that_kind_only_with_its_tombstones(
    server: tuple[AcpClient, str, HarnessStore],
) -> None:
    client, sid, _ = server
    prompts = client.request("_harness/state", {"sessionId": sid, "scope": "global", "kind": "prompt"})
    assert (_keys(prompts), prompts["total"], prompts["tombstones"]) == (["prompt/p1", "prompt/p2"], 2, [])
    memories = _walk(client, {"sessionId": sid, "scope": "merged", "kind": "memory", "limit": 4})
    assert [k for p in memories for k in _keys(p)] == [f"memory/{m}" for m in MEMORIES]
    assert [t["content"] for t in memories[0]["tombstones"]] == ["never this"]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


NOT_OURS = "_harness/state: cursor is not one this server gave"
FOREIGN = "_harness/state: cursor belongs to another query"


@pytest.mark.parametrize(
    ("cursor", "other", "message"),
    [
        ("!!not base64!!", {}, NOT_OURS),
        (_b64(b"\xff\xfe"), {}, NOT_OURS),  # not UTF-8
        (_b64(b'{"a": 1}'), {}, NOT_OURS),  # JSON, not a cursor
        (_b64(b'[9, ["s", "global", null, null], ["memory", "m2"]]'), {}, NOT_OURS),  # another version
        (None, {"scope": "merged"}, FOREIGN),  # a global-scope cursor replayed on merged
        (None, {"kind": "memory"}, FOREIGN),  # ... with a kind filter it was not given for
    ],
    ids=["garbage", "not-utf8", "not-a-cursor", "other-version", "other-scope", "other-kind"],
)
def test_a_garbled_or_foreign_cursor_is_refused_with_invalid_params(
    server: tuple[AcpClient, str, HarnessStore], cursor: str | None, other: dict[str, str], message: str
) -> None:
    client, sid, _ = server
    params = {"sessionId": sid, "scope": "global", "limit": 2}
    if cursor is None:
        cursor = client.request("_harness/state", params)["nextCursor"]
    with pytest.raises(RpcError) as refused:
        client.request("_harness/state", {**params, **other, "cursor": cursor})
    assert refused.value.code == -32602
    assert str(refused.value.message).startswith(message), refused.value.message
    # The server keeps serving, and the harness is untouched.
    assert client.request("_harness/state", {"sessionId": sid, "scope": "global"})["total"] == 7


def test_a_page_is_the_slice_after_the_cursor_of_all_keys_in_kind_then_key_order() -> None:
    """`select` reads each kind's sorted keys (cached per dict) instead of sorting them all for
    every page: it must still answer exactly the slice of the one sorted list."""
    import random
    from bisect import bisect_right

    from acp_server.harness.state_pages import select

    rng = random.Random(7)
    for _ in range(2000):
        kinds = rng.sample(["prompt", "memory", "skill", "subagent"], rng.randrange(5))
        entries = {
            k: {f"{rng.choice('abc')}{rng.randrange(9)}": 0 for _ in range(rng.randrange(6))} for k in kinds
        }
        every = sorted((k, key) for k in entries for key in entries[k])
        kind = rng.choice([None, "memory", "skill"])
        after = rng.choice([None, *every, ("memory", "b4"), ("zzz", "a")])
        limit = rng.randrange(1, 5)
        ordered = [(k, key) for k, key in every if kind is None or k == kind]
        start = bisect_right(ordered, after) if after is not None else 0
        page = select(entries, kind, after, limit)
        more = start + limit < len(ordered)
        expected = ordered[start : start + limit]
        assert (page.keys, page.next_last, page.total) == (
            expected,
            expected[-1] if more else None,
            len(ordered),
        )
