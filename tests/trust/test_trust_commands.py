"""`/why` replies for a real agent session (real stores, real transcripts), after `/promote`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent_core import Agent
from agent_core.config.loader import load_config
from agent_core.ports import NoEditor
from agent_core.refinement import harness_of
from agent_core.trust.commands import session_stores, why_reply
from harness_store.project import ProjectStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_why_explains_a_reviewed_project_promotion_in_a_session_inside_a_repository(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    config = load_config(
        {
            "CONTINUAL_ACP_HOME": str(tmp_path / "home"),
            "HOME": str(tmp_path),
            "CONTINUAL_ACP_KERNEL_POOL": "0",
        }
    )
    config.eager_kernel = False
    agent = Agent(config)
    await agent.start()
    try:
        session = await agent.new_session(str(repo), NoEditor())
        assert [scope for scope, _ in session_stores(session)] == ["local", "project", "global"]
        session.local_store.apply(
            {"edits": [{"action": "create", "kind": "memory", "title": "Build", "content": "make all"}]},
            scope="local",
            trigger="model",
            session_id=session.id,
        )
        harness = harness_of(session)
        done = await harness.promote("build", "project")
        assert done.proposal_id is not None  # a project edit is reviewed
        assert (await harness.decide(done.proposal_id, "apply")).status == "applied"
        assert ProjectStore(repo).load().get("memory", "build") is not None
        text = why_reply(session, "memory/build")
        assert "Now: memory in the project harness, verified" in text
        assert "(project, user" in text and "(local, model" in text
    finally:
        await agent.aclose()


async def test_why_usage_is_explained(tmp_path: Path) -> None:
    config = load_config(
        {
            "CONTINUAL_ACP_HOME": str(tmp_path / "home"),
            "HOME": str(tmp_path),
            "CONTINUAL_ACP_KERNEL_POOL": "0",
        }
    )
    config.eager_kernel = False
    agent = Agent(config)
    await agent.start()
    try:
        session = await agent.new_session(str(tmp_path), NoEditor())
        assert (
            why_reply(session, "")
            == "Usage: /why <entry-id>  (e.g. /why test_command, or /why memory/test_command)"
        )
    finally:
        await agent.aclose()
