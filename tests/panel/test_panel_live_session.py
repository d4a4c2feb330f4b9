"""The panel beside a running ACP server (real process over stdio, the scripted model): what the
session writes appears on the open page, and what the panel does the session sees."""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from system_deps import requires

from agent_core.testing.scripted_model import ScriptedModelServer, response, text
from harness_store import HarnessStore

from .cdp import Page, chromium_path
from .conftest import open_panel, start_panel
from .populate import create, proposal, write_pending

from refinement.acp_support import (  # isort: skip
    AcpClient,
    messages_between,
    new_session,
    prompt,
    select,
    servers,
)

MANUAL_ONLY = "auto_refine_every = 0\n"
AUTO_EVERY_TURN = "auto_refine_every = 1\nrefine_cooldown_seconds = 0\n"
MEMORY = "Release notes go in CHANGES.md, newest first."


def _plan() -> str:
    edit = {
        "action": "create",
        "kind": "memory",
        "id": "release_notes",
        "title": "Release notes",
        "content": MEMORY,
    }
    return json.dumps(
        {"summary": "Where release notes go", "rationale": "said so", "expected_outcome": "", "edits": [edit]}
    )


@pytest.mark.anyio
@requires(chromium_path() is not None, "needs Debian's chromium (apt-get install chromium)")
async def test_a_refinement_by_a_running_session_appears_on_the_open_page(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with ScriptedModelServer() as model, servers(home, model.base_url, config=MANUAL_ONLY) as group:
        client = group.spawn(tmp_path)
        sid, _ = new_session(client, tmp_path)
        panel = start_panel(home)
        try:
            await open_panel(page, panel)
            # No refinement yet, the harness empty: the page says what it is and how entries get here.
            welcome = await page.wait_for("document.querySelector('#view .empty')?.textContent")
            assert "This panel shows the continual harness" in welcome and "/refine" in welcome
            await page.evaluate("window.__sameDocument = true")
            model.push(text(_plan()))
            await asyncio.to_thread(prompt, client, sid, "/refine")
            [record] = HarnessStore(home / "sessions" / sid / "harness").history()
            shown = await page.wait_for(
                "document.querySelectorAll('#timeline .tl-item').length === 1 &&"
                " document.querySelector('#timeline .tl-item').dataset.refinement"
            )
            assert shown == record.id and await page.evaluate("window.__sameDocument") is True
        finally:
            panel.stop()


def test_a_running_session_sees_a_rollback_made_in_the_panel(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with ScriptedModelServer() as model, servers(home, model.base_url, config=MANUAL_ONLY) as group:
        client = group.spawn(tmp_path)
        sid, _ = new_session(client, tmp_path)
        model.push(text(_plan()))
        prompt(client, sid, "/refine")
        [record] = HarnessStore(home / "sessions" / sid / "harness").history()
        start = len(client.frames)
        done = prompt(client, sid, "/harness")
        assert MEMORY in messages_between(client, start, done.seq)
        panel = start_panel(home)
        try:
            status, body = panel.request("/api/actions/rollback", body={"refinement_id": record.id})
        finally:
            panel.stop()
        assert status == 200, body
        start = len(client.frames)
        done = prompt(client, sid, "/harness")
        assert MEMORY not in messages_between(client, start, done.seq)
        start = len(client.frames)
        done = prompt(client, sid, "/history")
        assert f"`{body['refinement_id']}`" in messages_between(client, start, done.seq)


def _panel_url(client: AcpClient, sid: str) -> str:
    """`/harness ui` in the session: the panel this server started, by the URL it answered."""
    done = prompt(client, sid, "/harness ui")
    found = re.search(r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", messages_between(client, 0, done.seq))
    assert found, "no panel URL in the answer to /harness ui"
    return found.group(0)


def _post(url: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
    base, token = url.split("/?token=")
    request = urllib.request.Request(
        f"{base}/api/actions/{action}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "X-Panel-Token": token},
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        result: dict[str, Any] = json.loads(answer.read())
    return result


@dataclass
class InServer:
    """One ACP server (auto review every turn) shared by the `/harness ui` tests; each test opens
    its own session in it and none needs a kernel."""

    home: Path
    cwd: Path
    model: ScriptedModelServer
    client: AcpClient


@pytest.fixture(scope="module")
def in_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InServer]:
    root = tmp_path_factory.mktemp("harness-ui")
    with (
        ScriptedModelServer() as model,
        servers(root / "home", model.base_url, config=AUTO_EVERY_TURN) as group,
    ):
        yield InServer(root / "home", root, model, group.spawn(root))


def test_a_rollback_in_the_panel_of_harness_ui_shows_its_card_in_the_session(in_server: InServer) -> None:
    client = in_server.client
    sid, _ = new_session(client, in_server.cwd)
    url = _panel_url(client, sid)
    # A refinement of the session's own store, written through the store API by another writer.
    store = HarnessStore(in_server.home / "sessions" / sid / "harness")
    record = store.apply(json.loads(_plan()), scope="local", trigger="user")
    seen = len(client.frames)
    answer = _post(url, "rollback", {"refinement_id": record.id})
    assert answer["ok"] and answer["via_session"] == sid, answer
    assert _cards_after(client, sid, seen, answer["refinement_ids"]) == [
        f"refinement-{answer['refinement_id']}"
    ]


def _cards_after(client: AcpClient, sid: str, seen: int, ids: list[str]) -> list[str]:
    """The refinement cards `sid` got after the first `seen` frames, once the last of `ids` arrived
    (the server wrote them before the action answered; the client reads them in its own thread)."""
    last = f"refinement-{ids[-1]}"
    client.wait_for_after(
        seen,
        lambda m: (
            m.get("method") == "session/update"
            and m["params"]["update"].get("sessionUpdate") == "tool_call"
            and m["params"]["update"].get("toolCallId") == last
        ),
    )
    return [
        f.message["params"]["update"]["toolCallId"]
        for f in client.frames[seen:]
        if f.message.get("method") == "session/update"
        and f.message["params"]["sessionId"] == sid
        and f.message["params"]["update"].get("sessionUpdate") == "tool_call"
        and str(f.message["params"]["update"].get("toolCallId", "")).startswith("refinement-")
    ]


def _local_entry(in_server: InServer, sid: str, entry_id: str) -> str:
    """A local memory of `sid`, written through the store API by another writer; its refinement id."""
    store = HarnessStore(in_server.home / "sessions" / sid / "harness")
    made = store.apply(
        proposal(create("memory", entry_id.title(), f"{entry_id} is a fact.", id=entry_id), summary="add"),
        scope="local",
        trigger="user",
    )
    assert made.applied
    return made.id


def test_a_promotion_in_the_panel_of_harness_ui_shows_both_cards_in_the_session(in_server: InServer) -> None:
    client = in_server.client
    sid, _ = new_session(client, in_server.cwd)
    url = _panel_url(client, sid)
    _local_entry(in_server, sid, "promoted_fact")
    seen = len(client.frames)
    answer = _post(
        url, "promote", {"store": sid, "kind": "memory", "id": "promoted_fact", "target": "global"}
    )
    assert answer["ok"] and answer["via_session"] == sid, answer
    shown = _cards_after(client, sid, seen, answer["refinement_ids"])
    assert shown == [f"refinement-{rid}" for rid in answer["refinement_ids"]] and len(shown) == 2


def test_a_delete_in_the_panel_of_harness_ui_shows_its_card_in_the_session(in_server: InServer) -> None:
    client = in_server.client
    sid, _ = new_session(client, in_server.cwd)
    url = _panel_url(client, sid)
    _local_entry(in_server, sid, "deleted_fact")
    seen = len(client.frames)
    answer = _post(url, "delete", {"store": sid, "kind": "memory", "id": "deleted_fact"})
    assert answer["ok"] and answer["via_session"] == sid, answer
    shown = _cards_after(client, sid, seen, answer["refinement_ids"])
    assert shown == [f"refinement-{answer['refinement_id']}"]


def test_approving_a_global_review_in_the_panel_of_harness_ui_shows_its_card_in_the_proposing_session(
    in_server: InServer,
) -> None:
    client = in_server.client
    sid, _ = new_session(client, in_server.cwd)
    url = _panel_url(client, sid)
    body = proposal(
        create("memory", "Shared fact", "A reviewed global fact.", id="reviewed_fact"), summary="x"
    )
    write_pending(in_server.home, sid, "global", "p-20261201-120000-0000beef", body)
    seen = len(client.frames)
    answer = _post(
        url, "review", {"proposal_id": "p-20261201-120000-0000beef", "decision": "apply", "store": "global"}
    )
    assert answer["ok"] and answer["via_session"] == sid, answer
    shown = _cards_after(client, sid, seen, answer["refinement_ids"])
    assert shown == [f"refinement-{answer['refinement_id']}"]
    assert HarnessStore(in_server.home / "harness").load().get("memory", "reviewed_fact").trust == "verified"


_TIMES = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


def _hold_global_promotion(home: Path, sid: str, entry_id: str, proposal_id: str) -> None:
    """A local memory of `sid` and, waiting on disk, its promotion to global (`promotion_of` set),
    saved by the product's own pending-review writer."""
    from agent_core.refinement.pending_files import PendingFiles
    from agent_core.refinement.records import PendingReview
    from agent_core.trust.promotion import create_proposal

    local = HarnessStore(home / "sessions" / sid / "harness")
    fact = create("memory", "Promoted fact", "Deploys go out on Tuesdays.", id=entry_id)
    assert local.apply(proposal(fact, summary="add"), scope="local", trigger="user", session_id=sid).applied
    entry = local.load().get("memory", entry_id)
    assert entry is not None
    pending = PendingReview(
        proposal_id=proposal_id,
        proposal=create_proposal(entry, "global", sid),
        scope="global",
        trigger="user",
        baseline=HarnessStore(home / "harness").load(),
        source="user",
        interactive=True,
        promotion_of=("memory", entry_id),
    )
    assert PendingFiles(home / "harness" / "pending").save(pending, sid)


def _decision_records(home: Path, sid: str, entry_id: str) -> str:
    """The records the decision wrote (the global create, then the local removal), as JSON with
    what must differ between routes replaced: refinement ids and times (made new per record), the
    session id and the entry id (each route has its own session and promotes its own entry, as
    they share one global store)."""
    [create_record] = [
        r for r in HarnessStore(home / "harness").history() if any(e.id == entry_id for e in r.applied_edits)
    ]
    removal = HarnessStore(home / "sessions" / sid / "harness").history()[-1]
    text = json.dumps(
        [create_record.model_dump(mode="json"), removal.model_dump(mode="json")], sort_keys=True
    )
    for name, value in (
        ("CREATED", create_record.id),
        ("REMOVED", removal.id),
        ("SID", sid),
        ("FACT", entry_id),
    ):
        text = text.replace(value, name)
    return _TIMES.sub("TIME", text)


def test_one_promotion_review_decided_through_each_route_writes_the_same_history_records(
    in_server: InServer,
) -> None:
    client, home = in_server.client, in_server.home
    routes = ["command", "method", "in_server_panel", "standalone_panel"]
    sessions = {route: new_session(client, in_server.cwd)[0] for route in routes}
    written: dict[str, str] = {}
    standalone = start_panel(home)
    try:
        for n, route in enumerate(routes):
            sid, entry_id, pid = sessions[route], f"fact_{route}", f"p-20261201-120000-0000ab{n:02d}"
            _hold_global_promotion(home, sid, entry_id, pid)
            if route == "command":
                client.permission_policy = select("apply")
                prompt(client, sid, "/review")
            elif route == "method":
                client.request("_harness/review", {"sessionId": sid, "proposalId": pid, "decision": "apply"})
            elif route == "in_server_panel":
                answer = _post(
                    _panel_url(client, sid),
                    "review",
                    {"proposal_id": pid, "decision": "apply", "store": "global"},
                )
                assert answer["ok"] and answer["via_session"] == sid, answer
            else:
                status, answer = standalone.request(
                    "/api/actions/review", body={"proposal_id": pid, "decision": "apply", "store": "global"}
                )
                assert status == 200 and answer["ok"] and answer["via_session"] is None, answer
                assert len(answer["refinement_ids"]) == 2, answer  # the promotion's removal too
            assert HarnessStore(home / "sessions" / sid / "harness").load().get("memory", entry_id) is None, (
                route
            )
            written[route] = _decision_records(home, sid, entry_id)
    finally:
        standalone.stop()
    # The second half of the promotion (`promotion_of`): the local removal names the global create.
    assert "Promoted memory FACT to global (CREATED)" in written["command"]
    assert {route: text for route, text in written.items()} == {route: written["command"] for route in routes}


def _hanging_gate() -> Any:
    """The automatic review's gate reply, hanging until the model server stops: refinement runs."""
    return response([{"sleep": 120.0}, {"content": '{"should_refine": false, "rationale": "x"}'}])


def _events(url: str) -> Iterator[tuple[str, Any]]:
    """The panel's event stream as (event, data); keep-alive comments as ("keep-alive", None)."""
    base, token = url.split("/?token=")
    stream = urllib.request.urlopen(f"{base}/api/events?token={token}", timeout=60)
    event = None
    for raw in stream:
        line = raw.decode().rstrip("\n")
        if line.startswith(":"):
            yield "keep-alive", None
        elif line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: ") and event is not None:
            yield event, json.loads(line[len("data: ") :])


def _held_gate(name: str) -> Any:
    """The automatic review's gate reply, held until the test releases `name`: refinement runs."""
    return response([{"hold": name}, {"content": '{"should_refine": false, "rationale": "x"}'}])


def _quiescence_of(
    events: Iterator[tuple[str, Any]], sid: str, until: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The first `quiescence` event's state of `sid` that satisfies `until` (bounded)."""
    deadline = time.monotonic() + 60
    for name, data in events:
        if name == "quiescence" and until(data["sessions"].get(sid) or {}):
            found: dict[str, Any] = data["sessions"][sid]
            return found
        assert time.monotonic() < deadline, f"the panel never showed {sid} as wanted"
    raise AssertionError("the event stream ended")


def test_a_standalone_panel_shows_a_session_of_another_process_busy_then_settled(in_server: InServer) -> None:
    # Runs before the tests below leave refinements hanging: the script is empty when this pushes.
    client = in_server.client
    sid, _ = new_session(client, in_server.cwd)
    panel = start_panel(in_server.home)  # `continual-acp harness ui`: no link to the ACP server
    try:
        events = _events(panel.url)
        assert next(events)[0] == "hello"
        in_server.model.push(text("Hello."), _held_gate("standalone-gate"))
        prompt(client, sid, "hi")
        busy = _quiescence_of(events, sid, lambda q: q.get("state") == "busy" and q.get("in_flight") == 1)
        in_server.model.release("standalone-gate")
        settled = _quiescence_of(events, sid, lambda q: q.get("state") == "settled")
    finally:
        panel.stop()
    assert (busy["source"], busy["pid"], busy["background"][0]["title"]) == (
        "file",
        client.proc.pid,
        "Refining the harness",
    )
    assert (settled["source"], settled["pid"], settled["background"]) == ("file", client.proc.pid, [])


def test_a_session_closed_in_its_server_is_published_as_ended(in_server: InServer) -> None:
    from acp_server.sessions.quiescence_file import read_quiescence

    client = in_server.client
    sid, _ = new_session(client, in_server.cwd)
    assert client.request("session/close", {"sessionId": sid}) == {}
    directory = in_server.home / "sessions" / sid
    reading = read_quiescence(directory, sid, is_open=None, owner_pid=None)  # the file alone
    assert (reading.state, reading.reason) == (
        "not running",
        f"the session was closed by its server (pid {client.proc.pid})",
    )


def test_the_panel_of_harness_ui_shows_a_running_refinement_as_not_quiescent_live(
    in_server: InServer,
) -> None:
    client = in_server.client
    sid, _ = new_session(client, in_server.cwd)
    url = _panel_url(client, sid)
    events = _events(url)
    assert next(events)[0] == "hello"
    in_server.model.push(text("Hello."), _hanging_gate())
    prompt(client, sid, "hi")
    deadline = time.monotonic() + 60
    for name, data in events:
        if name == "quiescence" and data["sessions"].get(sid, {}).get("quiescent") is False:
            break
        assert time.monotonic() < deadline, "the panel never said the session is busy"
    state = data["sessions"][sid]
    assert (state["in_flight"], state["background"][0]["title"]) == (1, "Refining the harness")


@pytest.mark.anyio
@requires(chromium_path() is not None, "needs Debian's chromium (apt-get install chromium)")
async def test_the_sessions_tab_shows_a_session_busy_while_it_refines_without_a_reload(
    page: Page, in_server: InServer
) -> None:
    client = in_server.client
    sid, _ = await asyncio.to_thread(new_session, client, in_server.cwd)
    url = await asyncio.to_thread(_panel_url, client, sid)
    await page.navigate(f"{url}#sessions")
    await page.wait_for("document.body.dataset.ready === '1'")
    cell = f"document.querySelector(\"tr[data-session='{sid}'] td.quiescence\")"
    assert await page.wait_for(f"{cell}?.textContent") == "settled"
    await page.evaluate("window.__sameDocument = true")
    in_server.model.push(text("Hello."), _hanging_gate())
    await asyncio.to_thread(prompt, client, sid, "hi")
    busy = await page.wait_for(f"{cell}?.textContent.startsWith('busy') && {cell}.textContent")
    assert busy == "busyRefining the harness" and await page.evaluate("window.__sameDocument") is True


def test_the_panel_token_is_shown_to_the_editor_but_never_kept_in_the_session_history(
    in_server: InServer,
) -> None:
    """The token approves reviews; the data dir is readable by a local cell, so it must not be there."""
    client = in_server.client
    sid, _ = new_session(client, in_server.cwd)
    url = _panel_url(client, sid)
    token = url.split("?token=")[1]
    session_dir = in_server.home / "sessions" / sid
    on_disk = "".join(p.read_text(errors="replace") for p in session_dir.rglob("*") if p.is_file())
    assert "/harness ui" in on_disk and "its token is not kept in the history" in on_disk
    assert token not in on_disk
    seen = len(client.frames)
    client.request("session/load", {"sessionId": sid, "cwd": str(in_server.cwd), "mcpServers": []})
    assert token not in json.dumps([f.message for f in client.frames[seen:]])
