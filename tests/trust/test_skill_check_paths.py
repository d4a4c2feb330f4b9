"""The skill check on the paths that write skills: the coordinator (planner proposals and kernel
`harness.write`) and `continual-acp harness import`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_core.refinement import Policy, RefinementCoordinator
from agent_core.refinement.host_ops import harness_write
from agent_core.trust.skill_check import SkillCheckService
from harness_store import HarnessStore, Proposal

from .test_skill_check import edit

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _coordinator(tmp_path: Path, service: SkillCheckService, cwd: Path) -> RefinementCoordinator:
    coordinator = RefinementCoordinator(
        session_id="s1",
        local_store=HarnessStore(tmp_path / "sessions" / "s1" / "harness"),
        global_store=HarnessStore(tmp_path / "harness"),
        planner=None,
        trajectory=lambda: [],
        policy=lambda: Policy(mode="auto", refine_review="never"),
    )
    coordinator.service.skill_verifier = lambda scope: service.verifier(cwd)
    return coordinator


async def test_planner_proposal_with_a_failing_skill_is_refused_with_the_check_output(
    service: SkillCheckService, skill_dir: Path, tmp_path: Path
) -> None:
    coordinator = _coordinator(tmp_path, service, skill_dir)
    proposal = Proposal.model_validate({"summary": "s", "edits": [edit("needs_two", {"a": {}})]})
    # the path a planner's proposal takes (pipeline.py -> the service's submit)
    outcome = await coordinator.service.submit(proposal, scope="local", trigger="auto", baseline=None)
    assert outcome.status == "refused"
    assert outcome.error is not None and "skill check failed: signature check failed" in outcome.error
    assert "parameter 'b' has no default" in outcome.error


async def test_kernel_harness_write_of_a_good_skill_applies_verified(
    service: SkillCheckService, skill_dir: Path, tmp_path: Path
) -> None:
    coordinator = _coordinator(tmp_path, service, skill_dir)
    from agent_core.refinement import HarnessSurface

    answer: dict[str, Any] = await harness_write(
        HarnessSurface.of(coordinator),
        {"edit": edit("add", {"x": {}, "y": {}}, [{"args": [2, 3], "expect": 5}]), "scope": "local"},
    )
    assert answer["status"] == "applied"
    record = coordinator.scopes.local.get_refinement(answer["id"])
    assert record.applied_edits[0].check.startswith("verified in a scratch kernel")


async def test_harness_create_in_a_real_kernel_is_refused_by_a_failing_example(
    service: SkillCheckService, skill_dir: Path, tmp_path: Path
) -> None:
    from agent_core.refinement import HarnessSurface, register_host_ops
    from kernel_bridge import KernelPool
    from skills.loader import setup_code

    coordinator = _coordinator(tmp_path, service, skill_dir)
    pool = KernelPool(0)
    await pool.start()
    kernel = await pool.acquire(cwd=skill_dir, setup_code=setup_code([]))
    try:
        register_host_ops(kernel.host_bridge, HarnessSurface.of(coordinator))
        code = (
            "import json\n"
            "r = harness.create('skill', 'add', 'adds', id='add', arguments={'x': {}, 'y': {}},\n"
            "    reference={'type': 'python', 'import': 'trustskills', 'callable': 'add'},\n"
            "    examples=[{'args': [1, 1], 'expect': 3}])\n"
            "print(json.dumps(r))\n"
        )
        result = await kernel.execute(code, timeout=120).result()
        assert result.status == "ok", result.output
        answer = json.loads(result.output.strip().splitlines()[-1])
        assert answer["status"] == "refused"
        assert "returned 2, expected 3" in answer["error"]
    finally:
        await kernel.shutdown(final_snapshot=False)
        await pool.aclose()
