"""Over real stdio: a `/refine` proposal with a skill is checked in a scratch kernel, and the
refinement card shows what the check said (refused with its output, or verified)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from refinement.acp_support import new_session, plan_json, prompt, refinement_cards, servers

from agent_core.testing.scripted_model import ScriptedModelServer, text

from .conftest import SKILLS
from .test_skill_check import edit

CONFIG = "auto_refine_every = 0\nskill_check_timeout = 30\n"


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


def test_refused_skill_card_shows_the_failing_example(model: ScriptedModelServer, tmp_path: Path) -> None:
    (tmp_path / "trustskills.py").write_text(SKILLS, encoding="utf-8")
    model.push(
        text(plan_json(edit("add", {"x": {}, "y": {}}, [{"args": [2, 2], "expect": 5}]), summary="Add skill"))
    )
    with servers(tmp_path / "home", model.base_url, config=CONFIG) as group:
        client = group.spawn(tmp_path)
        sid, _ = new_session(client, tmp_path)
        prompt(client, sid, "/refine", timeout=180)
        card = refinement_cards(client, sid)[-1]
        assert card["status"] == "failed"
        assert "skill check failed: examples check failed" in str(card["content"])
        assert "returned 4, expected 5" in str(card["content"])


def test_verified_skill_card_shows_the_check_note(model: ScriptedModelServer, tmp_path: Path) -> None:
    (tmp_path / "trustskills.py").write_text(SKILLS, encoding="utf-8")
    model.push(
        text(plan_json(edit("add", {"x": {}, "y": {}}, [{"args": [2, 2], "expect": 4}]), summary="Add skill"))
    )
    with servers(tmp_path / "home", model.base_url, config=CONFIG) as group:
        client = group.spawn(tmp_path)
        sid, _ = new_session(client, tmp_path)
        prompt(client, sid, "/refine", timeout=180)
        card = refinement_cards(client, sid)[-1]
        assert card["status"] == "completed"
        assert "**Skill check (add):** verified in a scratch kernel" in str(card["content"])
