"""The panel beside a running ACP server (real process over stdio, the scripted model): what the
session writes appears on the open page, and what the panel does the session sees."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent_core.testing.scripted_model import ScriptedModelServer, text
from harness_store import HarnessStore

from .cdp import Page, chromium_path
from .conftest import open_panel, start_panel

from refinement.acp_support import messages_between, new_session, prompt, servers  # isort: skip

MANUAL_ONLY = "auto_refine_every = 0\n"
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
@pytest.mark.skipif(chromium_path() is None, reason="needs Debian's chromium (apt-get install chromium)")
async def test_a_refinement_by_a_running_session_appears_on_the_open_page(page: Page, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with ScriptedModelServer() as model, servers(home, model.base_url, config=MANUAL_ONLY) as group:
        client = group.spawn(tmp_path)
        sid, _ = new_session(client, tmp_path)
        panel = start_panel(home)
        try:
            await open_panel(page, panel)
            await page.wait_for("document.querySelector('#view .empty')")  # no refinement yet
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
