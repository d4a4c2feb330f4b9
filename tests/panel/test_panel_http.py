"""The panel's server side over real HTTP on 127.0.0.1, over stores filled by real refinements."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from acp_server.sessions.quiescence_file import write_quiescence
from agent_core.history.ownership import SessionOwnerLock
from harness_store import HarnessStore

from .conftest import RunningPanel, start_panel
from .populate import Populated, create, proposal, write_pending, write_transcript

ROUTES = [
    "/",
    "/static/panel.js",
    "/static/panel.css",
    "/api/overview",
    "/api/entries",
    "/api/timeline",
    "/api/pending",
    "/api/tombstones",
    "/api/events",
]


@pytest.mark.parametrize("path", ROUTES)
def test_a_request_without_the_token_is_refused_with_403(panel: RunningPanel, path: str) -> None:
    status, body = panel.request(path, token=None)
    assert status == 403 and "token" in body


def test_a_wrong_token_of_the_same_length_is_refused(panel: RunningPanel) -> None:
    wrong = ("A" if panel.server.token[0] != "A" else "B") + panel.server.token[1:]
    assert panel.request("/api/timeline", token=wrong)[0] == 403


def test_an_action_without_the_token_changes_nothing(panel: RunningPanel, populated: Populated) -> None:
    before = len(populated.store("global").history())
    status, _ = panel.request(
        "/api/actions/rollback", token=None, body={"refinement_id": populated.ids["tests"]}
    )
    assert status == 403 and len(populated.store("global").history()) == before


def test_the_token_in_the_query_string_is_accepted(panel: RunningPanel) -> None:
    status, body = panel.request(f"/api/timeline?token={panel.server.token}", header=False)
    assert status == 200 and body["total"] == 8


def test_the_page_links_its_script_and_stylesheet_with_the_token(panel: RunningPanel) -> None:
    html = panel.get("/")
    assert f'src="/static/panel.js?token={panel.server.token}"' in html
    assert f'href="/static/panel.css?token={panel.server.token}"' in html


def test_the_panel_listens_on_loopback_only(panel: RunningPanel) -> None:
    assert panel.url.startswith(f"http://127.0.0.1:{panel.server.port}/?token=")


def test_entries_show_kind_scope_trust_version_and_the_refinement_that_made_them(
    panel: RunningPanel, populated: Populated
) -> None:
    body = panel.get("/api/entries")
    rows = {(e["store"], e["id"]): e for e in body["entries"]}
    assert body["counts"] == {"prompt": 1, "memory": 3, "skill": 1, "subagent": 1}
    test_command = rows[("global", "test_command")]
    assert (test_command["kind"], test_command["scope"], test_command["trust"], test_command["version"]) == (
        "memory",
        "global",
        "verified",
        3,
    )
    assert test_command["last_refinement"] == populated.ids["refused"]
    money = rows[("sess-web-checkout", "money_is_integer_cents")]
    assert (money["scope"], money["trust"], money["last_refinement"]) == (
        "local",
        "candidate",
        populated.ids["money"],
    )
    assert [e["kind"] for e in body["entries"]] == [
        "prompt",
        "memory",
        "memory",
        "memory",
        "skill",
        "subagent",
    ]


def test_entries_page_with_offset_and_limit(panel: RunningPanel) -> None:
    first = panel.get("/api/entries?limit=4")
    second = panel.get("/api/entries?limit=4&offset=4")
    assert first["total"] == second["total"] == 6
    assert len(first["entries"]) == 4 and len(second["entries"]) == 2
    ids = [e["key"] for e in first["entries"] + second["entries"]]
    assert len(set(ids)) == 6


def test_entries_filter_by_scope_kind_trust_and_text(panel: RunningPanel) -> None:
    assert {e["id"] for e in panel.get("/api/entries?scope=global")["entries"]} == {
        "test_command",
        "run_checks",
    }
    assert {e["id"] for e in panel.get("/api/entries?kind=subagent")["entries"]} == {"query_reviewer"}
    assert {e["id"] for e in panel.get("/api/entries?trust=verified")["entries"]} == {
        "test_command",
        "run_checks",
    }
    assert {e["id"] for e in panel.get("/api/entries?q=postgres")["entries"]} == {"warehouse_limits"}


def test_timeline_is_newest_first_and_pages_with_a_cursor(panel: RunningPanel) -> None:
    first = panel.get("/api/timeline?limit=3")
    assert first["total"] == 8 and len(first["refinements"]) == 3
    rest = panel.get(f"/api/timeline?limit=10&before={first['next_cursor']}")
    assert rest["next_cursor"] is None
    records = first["refinements"] + rest["refinements"]
    stamps = [(r["created_at"], r["id"]) for r in records]
    assert stamps == sorted(stamps, reverse=True) and len({r["id"] for r in records}) == 8


def test_timeline_filters_by_scope_session_kind_and_trigger(
    panel: RunningPanel, populated: Populated
) -> None:
    ids = populated.ids

    def listed(q: str) -> set[str]:
        return {r["id"] for r in panel.get(f"/api/timeline?{q}")["refinements"]}

    assert listed("scope=global") == {ids["tests"], ids["review"], ids["refused"]}
    assert listed("session=sess-data-pipeline") == {
        ids["warehouse"],
        ids["batch"],
        ids["batch_rollback"],
        ids["rejected"],
    }
    assert listed("kind=subagent") == {ids["warehouse"]}
    assert listed("trigger=rollback") == {ids["batch_rollback"]}


def test_a_refinement_shows_a_diff_per_edit_refusals_and_quoted_evidence(
    panel: RunningPanel, populated: Populated
) -> None:
    body = panel.get(f"/api/refinements/{populated.ids['refused']}")
    update_edit, refused = body["edits"]
    assert {
        "op": "+",
        "text": "Run `make check` (it runs ruff, mypy and pytest); never bare pytest.",
    } in update_edit["diff"]
    assert {"op": "-", "text": "Run `make check`, not bare pytest."} in update_edit["diff"]
    assert update_edit["evidence"] == [
        {
            "message_id": "u-1",
            "session_id": "sess-web-checkout",
            "found": True,
            "role": "user",
            "text": "Please run the tests; we always use `make check` here, never bare pytest.",
            "title": None,
        }
    ]
    assert (refused["applied"], refused["error"]) == (False, "base system prompt is not editable")


def test_a_rolled_back_refinement_names_its_rollback(panel: RunningPanel, populated: Populated) -> None:
    body = panel.get(f"/api/refinements/{populated.ids['batch']}")
    assert body["rolled_back_by"] == populated.ids["batch_rollback"]
    assert (
        panel.get(f"/api/refinements/{populated.ids['batch_rollback']}")["rollback_of"]
        == populated.ids["batch"]
    )


def test_as_of_shows_the_harness_right_after_a_refinement(panel: RunningPanel, populated: Populated) -> None:
    body = panel.get(f"/api/as-of/{populated.ids['batch']}")
    assert {e["id"] for e in body["entries"]} == {
        "warehouse_limits",
        "query_reviewer",
        "batch_size",
        "test_command",
        "run_checks",
    }
    assert body["global_as_of"] == populated.ids["refused"]
    assert "batch_size" not in {e["id"] for e in panel.get("/api/entries")["entries"]}


def test_pending_reviews_show_a_diff_against_the_current_entry(panel: RunningPanel) -> None:
    [waiting] = panel.get("/api/pending")["pending"]
    assert (waiting["proposal_id"], waiting["store"], waiting["session_id"]) == (
        "p-20261201-093000-0badf00d",
        "sess-web-checkout",
        "sess-web-checkout",
    )
    diff = waiting["edits"][0]["diff"]
    assert {"op": "+", "text": "Keep answers short; lead with the fix, then the diff."} in diff


def test_tombstones_of_every_store_are_listed(panel: RunningPanel) -> None:
    stones = panel.get("/api/tombstones")["tombstones"]
    assert {(t["store"], t["content"]) for t in stones} == {
        ("sess-data-pipeline", "Insert in 50,000-row chunks."),
        ("sess-data-pipeline", "Skip the tests when in a hurry."),
    }


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/api/timeline?before=r-nope", 400, "unknown cursor"),
        ("/api/timeline?scope=team", 400, "scope must be"),
        ("/api/entries?kind=widget", 400, "kind must be"),
        ("/api/entries?review=yes", 400, "review must be 'marked' or left out"),
        ("/api/entries?limit=0", 400, "limit must be"),
        ("/api/refinements/r-nope", 404, "no refinement"),
        ("/api/as-of/r-nope", 404, "no refinement"),
        ("/api/timeline?session=..", 400, "invalid session id"),
    ],
)
def test_bad_queries_get_a_clear_error(panel: RunningPanel, path: str, status: int, message: str) -> None:
    got, body = panel.request(path)
    assert got == status and message in body["error"]


def test_an_open_session_is_shown_open_with_its_owner(panel: RunningPanel, populated: Populated) -> None:
    lock = SessionOwnerLock.acquire(populated.home / "sessions" / "sess-data-pipeline", "sess-data-pipeline")
    try:
        sessions = {s["session_id"]: s for s in panel.get("/api/overview")["sessions"]}
    finally:
        lock.release()
    assert (sessions["sess-data-pipeline"]["open"], sessions["sess-data-pipeline"]["owner_pid"]) == (
        True,
        os.getpid(),
    )
    assert sessions["sess-web-checkout"]["open"] is False
    assert sessions["sess-web-checkout"]["pending_reviews"] == 1


def _files(home: Path) -> dict[str, tuple[int, int]]:
    return {
        str(path.relative_to(home)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in home.rglob("*")
        if path.is_file()
    }


def test_reading_every_view_writes_nothing_to_the_data_home(
    panel: RunningPanel, populated: Populated
) -> None:
    before = _files(populated.home)
    rid = populated.ids["money"]
    for path in [
        *ROUTES[3:-1],
        f"/api/refinements/{rid}",
        f"/api/as-of/{rid}",
        "/api/sessions/sess-web-checkout/transcript",
    ]:
        panel.get(path)
    panel.get("/api/entries/sess-web-checkout/memory/money_is_integer_cents")
    assert _files(populated.home) == before


def test_an_empty_data_home_shows_an_empty_panel_and_stays_empty(tmp_path: Path) -> None:
    home = tmp_path / "never-used"
    running = start_panel(home)
    try:
        assert running.get("/api/timeline") == {"refinements": [], "next_cursor": None, "total": 0}
        assert running.get("/api/entries")["total"] == 0
        welcome = running.get("/api/overview")["welcome"]
    finally:
        running.stop()
    assert not home.exists()
    # The empty panel (a first run, or right after the demo) says what it is and how an entry gets here.
    assert welcome is not None
    for needed in ("continual harness", str(home), "/refine", "under Review", "continual-acp demo"):
        assert needed in welcome, needed


def test_a_harness_with_entries_shows_no_welcome(panel: RunningPanel, populated: Populated) -> None:
    assert panel.get("/api/entries")["total"] > 0
    assert panel.get("/api/overview")["welcome"] is None


# ---------------------------------------------------------------- actions


def test_a_rollback_through_the_panel_is_recorded_in_the_history(
    panel: RunningPanel, populated: Populated
) -> None:
    target = populated.ids["warehouse"]
    status, body = panel.request("/api/actions/rollback", body={"refinement_id": target})
    assert status == 200 and body["ok"] is True
    last = HarnessStore(populated.home / "sessions" / "sess-data-pipeline" / "harness").history(1)[-1]
    assert (last.id, last.rollback_of, last.trigger) == (body["refinement_id"], target, "rollback")


def test_a_conflicting_rollback_is_refused_until_forced(panel: RunningPanel, populated: Populated) -> None:
    target = populated.ids["tests"]
    status, refused = panel.request("/api/actions/rollback", body={"refinement_id": target})
    assert status == 409 and refused["conflict"] is True
    assert [e for e in refused["errors"] if e.startswith("delete memory")] == [
        f"delete memory test_command: entry changed since refinement {target}; roll back {populated.ids['refused']} first"
    ]
    status, forced = panel.request("/api/actions/rollback", body={"refinement_id": target, "force": True})
    assert status == 200 and forced["ok"] is True
    assert populated.store("global").load().get("memory", "test_command") is None


def test_rolling_back_twice_says_it_was_already_rolled_back(
    panel: RunningPanel, populated: Populated
) -> None:
    status, body = panel.request("/api/actions/rollback", body={"refinement_id": populated.ids["batch"]})
    assert status == 409 and f"already rolled back by {populated.ids['batch_rollback']}" in body["message"]


def test_approving_a_pending_review_applies_it_verified_and_removes_its_file(
    panel: RunningPanel, populated: Populated
) -> None:
    status, body = panel.request(
        "/api/actions/review",
        body={"proposal_id": "p-20261201-093000-0badf00d", "decision": "apply", "store": "sess-web-checkout"},
    )
    assert status == 200 and body["ok"] is True
    store = populated.store("sess-web-checkout")
    entry = store.load().get("prompt", "answer_style")
    assert entry is not None and entry.trust == "verified" and "lead with the fix" in entry.content
    assert body["refinement_id"] in {r.id for r in store.history()}
    assert not (store.root / "pending" / "p-20261201-093000-0badf00d.json").exists()


def test_rejecting_forever_tombstones_the_content_in_one_record_that_changes_no_entry(
    panel: RunningPanel, populated: Populated
) -> None:
    store = populated.store("sess-web-checkout")
    before = len(store.history())
    status, body = panel.request(
        "/api/actions/review",
        body={
            "proposal_id": "p-20261201-093000-0badf00d",
            "decision": "reject_forever",
            "store": "sess-web-checkout",
        },
    )
    assert status == 200 and len(body["tombstones"]) == 1
    assert [t.forever for t in store.tombstones()] == [True]
    added = store.history()[before:]
    assert [(r.tombstone_change, [t.id for t in r.tombstoned]) for r in added] == [(True, body["tombstones"])]


def test_a_decided_review_cannot_be_decided_again(panel: RunningPanel) -> None:
    decide = {"proposal_id": "p-20261201-093000-0badf00d", "decision": "reject", "store": "sess-web-checkout"}
    assert panel.request("/api/actions/review", body=decide)[0] == 200
    status, body = panel.request("/api/actions/review", body=decide)
    assert status == 404 and "no proposal" in body["error"]


def test_marking_an_entry_verified_records_a_review(panel: RunningPanel, populated: Populated) -> None:
    status, body = panel.request(
        "/api/actions/verify",
        body={"store": "sess-web-checkout", "kind": "memory", "id": "money_is_integer_cents"},
    )
    assert status == 200
    store = populated.store("sess-web-checkout")
    entry = store.load().get("memory", "money_is_integer_cents")
    assert entry is not None and entry.trust == "verified"
    last = store.history(1)[-1]
    assert (last.id, last.review_of) == (body["refinement_id"], populated.ids["money"])


def test_deleting_an_entry_is_a_refinement_that_can_be_rolled_back(
    panel: RunningPanel, populated: Populated
) -> None:
    status, body = panel.request(
        "/api/actions/delete", body={"store": "global", "kind": "skill", "id": "run_checks"}
    )
    assert status == 200
    store = populated.store("global")
    assert store.load().get("skill", "run_checks") is None
    store.rollback(body["refinement_id"])
    assert store.load().get("skill", "run_checks") is not None


def test_an_action_with_a_malformed_body_is_refused_clearly(panel: RunningPanel) -> None:
    status, body = panel.request("/api/actions/rollback", body=["not", "an", "object"])
    assert status == 400 and "JSON object" in body["error"]


# ---------------------------------------------------------------- live feed


def _read_event(response: object, name: str) -> dict[str, object]:
    event = None
    for raw in response:  # type: ignore[attr-defined]
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[len("event: ") :]
        elif line.startswith("data: ") and event == name:
            return dict(json.loads(line[len("data: ") :]))
    raise AssertionError(f"the stream ended before a {name} event")


def test_the_event_stream_announces_an_apply_in_another_process_store(
    panel: RunningPanel, populated: Populated
) -> None:
    request = urllib.request.Request(f"{panel.base}/api/events?token={panel.server.token}")
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.headers["Content-Type"] == "text/event-stream"
        _read_event(response, "hello")
        populated.store("global").apply(
            proposal(create("memory", "Deploys", "Deploy with `make release`."), summary="deploys"),
            scope="global",
            trigger="user",
        )
        event = _read_event(response, "change")
    assert event["stores"] == ["global"] and "history" in event["what"]  # type: ignore[operator]


# ---------------------------------------------------------------- the CLI


def test_harness_ui_prints_its_url_and_serves_until_interrupted(populated: Populated, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "CONTINUAL_ACP_HOME": str(populated.home),
        "CONTINUAL_ACP_CONFIG": str(tmp_path / "none.toml"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "acp_server", "harness", "ui", "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.split()[-1]
        assert url.startswith("http://127.0.0.1:") and "?token=" in url
        with urllib.request.urlopen(url.replace("/?", "/api/timeline?"), timeout=30) as response:
            assert json.loads(response.read())["total"] == 8
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
    assert code == 0


def test_a_standalone_action_names_the_open_sessions_that_get_no_card(
    panel: RunningPanel, populated: Populated
) -> None:
    sid = "sess-data-pipeline"
    lock = SessionOwnerLock.acquire(populated.home / "sessions" / sid, sid)
    try:
        status, body = panel.request(
            "/api/actions/delete", body={"store": sid, "kind": "memory", "id": "warehouse_limits"}
        )
    finally:
        lock.release()
    assert status == 200, body
    assert body["open_elsewhere"] == [sid] and body["via_session"] is None
    assert f"open session(s) {sid} in another server" in body["message"]


def test_promoting_a_local_entry_moves_it_to_global_with_two_refinements(
    panel: RunningPanel, populated: Populated
) -> None:
    sid, entry = "sess-web-checkout", "money_is_integer_cents"
    status, body = panel.request(
        "/api/actions/promote", body={"store": sid, "kind": "memory", "id": entry, "target": "global"}
    )
    assert status == 200, body
    created, removed = body["refinement_ids"]
    assert [r.id for r in populated.store("global").history()][-1] == created
    assert [r.id for r in populated.store(sid).history()][-1] == removed
    assert populated.store("global").load().get("memory", entry) is not None
    assert populated.store(sid).load().get("memory", entry) is None


def test_rolling_back_a_promotion_in_the_panel_undoes_both_halves(
    panel: RunningPanel, populated: Populated
) -> None:
    sid, entry = "sess-web-checkout", "money_is_integer_cents"
    _, promoted = panel.request(
        "/api/actions/promote", body={"store": sid, "kind": "memory", "id": entry, "target": "global"}
    )
    status, body = panel.request(
        "/api/actions/rollback", body={"refinement_id": promoted["refinement_ids"][0]}
    )
    assert status == 200 and len(body["refinement_ids"]) == 2, body
    assert populated.store("global").load().get("memory", entry) is None
    assert populated.store(sid).load().get("memory", entry) is not None


def test_an_entry_offers_promotion_to_global_only_from_a_local_store(panel: RunningPanel) -> None:
    local = panel.get("/api/entries/sess-web-checkout/memory/money_is_integer_cents")
    shared = panel.get("/api/entries/global/memory/test_command")
    assert (local["promote_targets"], shared["promote_targets"]) == (["global"], [])


def test_promoting_a_global_entry_is_refused_clearly(panel: RunningPanel) -> None:
    status, body = panel.request(
        "/api/actions/promote",
        body={"store": "global", "kind": "memory", "id": "test_command", "target": "global"},
    )
    assert (status, body["error"]) == (400, "only a session's local entry can be promoted")


def test_the_standalone_panel_shows_closed_sessions_as_not_running(panel: RunningPanel) -> None:
    overview = panel.get("/api/overview")
    assert overview["in_server"] is False
    assert {
        s["session_id"]: (s["quiescence"]["state"], s["quiescence"]["reason"]) for s in overview["sessions"]
    } == {
        "sess-data-pipeline": ("not running", "the session is not open in any server"),
        "sess-web-checkout": ("not running", "the session is not open in any server"),
    }


def _overview_quiescence(panel: RunningPanel, sid: str) -> dict[str, Any]:
    quiet: dict[str, Any] = {
        s["session_id"]: s["quiescence"] for s in panel.get("/api/overview")["sessions"]
    }[sid]
    return quiet


def test_the_standalone_panel_shows_the_quiescence_an_open_sessions_server_publishes(
    panel: RunningPanel, populated: Populated
) -> None:
    sid = "sess-data-pipeline"
    directory = populated.home / "sessions" / sid
    busy = {
        "quiescent": False,
        "pending": 0,
        "in_flight": 1,
        "background": [{"type": "refinement", "title": "Refining the harness"}],
    }
    lock = SessionOwnerLock.acquire(directory, sid)  # this process plays the server that has it open
    try:
        write_quiescence(directory, sid, busy)
        quiet = _overview_quiescence(panel, sid)
    finally:
        lock.release()
    assert (quiet["state"], quiet["in_flight"], quiet["background"], quiet["pid"], quiet["source"]) == (
        "busy",
        1,
        busy["background"],
        os.getpid(),
        "file",
    )


def test_the_standalone_panel_shows_a_corrupt_quiescence_file_as_unknown_with_the_reason(
    panel: RunningPanel, populated: Populated
) -> None:
    sid = "sess-data-pipeline"
    directory = populated.home / "sessions" / sid
    (directory / "quiescence.json").write_text('{"version": 1, "pid": ', encoding="utf-8")
    lock = SessionOwnerLock.acquire(directory, sid)
    try:
        quiet = _overview_quiescence(panel, sid)
    finally:
        lock.release()
    assert (quiet["state"], quiet["reason"]) == (
        "unknown",
        "quiescence.json is unusable: it is not valid JSON",
    )


def _local_skill(home: Path, cwd: Path, sid: str, module: str) -> None:
    """A session opened in `cwd` with one local skill importing `module` (written unchecked)."""
    write_transcript(home, sid, str(cwd), "Skill session", [("u-1", "user", "hi")])
    made = HarnessStore(home / "sessions" / sid / "harness").apply(
        proposal(
            create(
                "skill",
                "Greets",
                "Says hello.",
                id="greet",
                reference={"type": "python", "import": module, "callable": "greet"},
                arguments={},
            ),
            summary="a skill",
        ),
        scope="local",
        trigger="user",
    )
    assert made.applied, made.errors


def test_a_standalone_promotion_the_skill_check_refuses_is_refused_with_the_reason(
    panel: RunningPanel, populated: Populated, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_core.trust.skill_check import shared_service

    monkeypatch.setenv("CONTINUAL_ACP_CONFIG", str(tmp_path / "none.toml"))  # the defaults: checks on
    sid = "sess-skills"
    _local_skill(populated.home, tmp_path, sid, "no_such_module_xyz")
    try:
        status, body = panel.request(
            "/api/actions/promote", body={"store": sid, "kind": "skill", "id": "greet", "target": "global"}
        )
    finally:
        shared_service().close()  # the check's scratch kernels (one per process)
    assert (status, body["ok"]) == (409, False), body
    assert body["message"].startswith("Could not promote skill greet to global")
    assert any("skill check failed" in e and "ModuleNotFoundError" in e for e in body["errors"]), body[
        "errors"
    ]
    assert populated.store("global").load().get("skill", "greet") is None
    assert populated.store(sid).load().get("skill", "greet") is not None


def test_a_standalone_promotion_of_a_skill_whose_session_directory_is_gone_is_refused(
    panel: RunningPanel, populated: Populated, tmp_path: Path
) -> None:
    sid = "sess-skills"
    _local_skill(populated.home, tmp_path / "deleted-checkout", sid, "greeting")
    status, body = panel.request(
        "/api/actions/promote", body={"store": sid, "kind": "skill", "id": "greet", "target": "global"}
    )
    assert status == 409 and populated.store("global").load().get("skill", "greet") is None
    assert any(
        f"the skill check needs the session's working directory ({tmp_path / 'deleted-checkout'}), which is not there"
        in e
        for e in body["errors"]
    ), body["errors"]


def test_a_standalone_approval_runs_the_sessions_skill_check_and_refuses_with_its_reason(
    panel: RunningPanel, populated: Populated, tmp_path: Path
) -> None:
    sid = "sess-skills"
    gone = tmp_path / "deleted-checkout"
    write_transcript(populated.home, sid, str(gone), "Skill session", [("u-1", "user", "hi")])
    skill = create(
        "skill",
        "Greets",
        "Says hello.",
        id="greet",
        reference={"type": "python", "import": "greeting", "callable": "greet"},
        arguments={},
    )
    write_pending(
        populated.home, sid, "global", "p-20261201-120000-5ca1ab1e", proposal(skill, summary="a skill")
    )
    status, body = panel.request(
        "/api/actions/review",
        body={"proposal_id": "p-20261201-120000-5ca1ab1e", "decision": "apply", "store": "global"},
    )
    assert status == 409 and populated.store("global").load().get("skill", "greet") is None
    assert any(
        f"the skill check needs the session's working directory ({gone})" in e for e in body["errors"]
    ), body
