"""Kernel-side skills in a real kernel: setup code, user skills, and host ops over the real bridge."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_core.refinement import HarnessSurface, ModelClientCompletion, refine_model, register_host_ops
from agent_core.refinement.completion import Completion
from harness_store import Proposal
from kernel_bridge import KernelPool, KernelSession
from skills.loader import setup_code
from skills.user_skills import skill_roots

from .conftest import Rig, plan_reply, serving

pytestmark = pytest.mark.anyio

WAIT = 30.0


def _write_skill(folder: Path, name: str, description: str, body: str = "Full instructions.") -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n{body}\n")


@pytest.fixture(scope="module")
def skill_tree(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("skills")
    project, home = base / "project", base / "home"
    project.mkdir()
    deploy = project / ".continual-acp" / "skills" / "deploy-notes"
    _write_skill(deploy, "deploy-notes", "How this project deploys", body="Deploy with `make ship`.")
    (deploy / "deploy_tools").mkdir()
    (deploy / "deploy_tools" / "__init__.py").write_text("def ping() -> str:\n    return 'pong'\n")
    _write_skill(home / ".claude" / "skills" / "deploy-notes", "deploy-notes", "A user-wide copy, shadowed")
    _write_skill(home / ".codex" / "skills" / "pdf", "pdf", "Read and fill PDF forms")
    return {"project": project, "home": home}


@pytest.fixture(scope="module")
async def kernel(skill_tree: dict[str, Path]) -> AsyncIterator[KernelSession]:
    pool = KernelPool(0)
    await pool.start()
    roots = skill_roots(skill_tree["project"], {"HOME": str(skill_tree["home"])})
    session = await pool.acquire(cwd=skill_tree["project"], setup_code=setup_code(roots))
    try:
        assert session.setup_error is None, session.setup_error
        # The module's cells print JSON; each test must work alone (`-k`, a subset), not only after
        # the one whose cell imported json first.
        await run_cell(session, "import json")
        yield session
    finally:
        await session.shutdown(final_snapshot=False)
        await pool.aclose()


async def run_cell(kernel: KernelSession, code: str) -> str:
    result = await kernel.execute(code, timeout=60).result()
    assert result.status == "ok", f"{result.status}: {result.output}"
    return result.output.strip()


async def test_setup_code_binds_the_builtin_skills(kernel: KernelSession) -> None:
    code = "import json\nprint(json.dumps([n.__name__ for n in (refine, harness, editor, goal, skills)]))"
    out = await run_cell(kernel, code)
    assert json.loads(out) == ["skills.refine", "skills.harness", "skills.editor", "skills.goal", "skills"]


async def test_user_skills_are_listed_read_in_full_and_importable(kernel: KernelSession) -> None:
    out = await run_cell(kernel, "print(json.dumps([s['name'] for s in skills.list()]))")
    assert json.loads(out) == ["deploy-notes", "pdf"]
    text = await run_cell(kernel, "print(skills.read('deploy-notes'))")
    assert "Deploy with `make ship`." in text
    assert await run_cell(kernel, "import deploy_tools\nprint(deploy_tools.ping())") == "pong"
    problems = await run_cell(kernel, "print(json.dumps(skills.problems()))")
    assert "shadowed" in problems


async def test_editor_skill_goes_through_the_host_editor_ops(
    kernel: KernelSession, skill_tree: dict[str, Path]
) -> None:
    files: dict[str, str] = {}

    async def write(args: dict[str, Any]) -> None:
        files[args["path"]] = args["text"]

    async def read(args: dict[str, Any]) -> str:
        return files[args["path"]]

    kernel.host_bridge.register("editor.write", write)
    kernel.host_bridge.register("editor.read", read)
    out = await run_cell(
        kernel, "editor.write('notes.txt', 'unsaved buffer text')\nprint(editor.read('notes.txt'))"
    )
    assert out == "unsaved buffer text"
    assert list(files) == [str(skill_tree["project"].resolve() / "notes.txt")]


async def test_harness_writes_from_a_cell_are_refinements_that_roll_back(
    kernel: KernelSession, rig: Rig
) -> None:
    coordinator, _harness = rig.harness(auto_every=0)
    register_host_ops(kernel.host_bridge, HarnessSurface.of(coordinator))
    async with serving(coordinator, rig):
        out = await run_cell(
            kernel,
            "r = harness.create('memory', 'Deploy day', 'We deploy on Tuesdays only.')\nprint(json.dumps(r))",
        )
        answer = json.loads(out)
        assert answer["status"] == "applied" and answer["id"] == answer["refinementId"]
        listed = await run_cell(kernel, "print(json.dumps([e['id'] for e in harness.list('memory')]))")
        assert json.loads(listed) == ["deploy_day"]
        found = await run_cell(kernel, "print(harness.search('tuesdays')[0]['id'])")
        assert found == "deploy_day"
        shown = json.loads(await run_cell(kernel, "print(json.dumps(harness.show('deploy_day')))"))
        assert shown["content"] == "We deploy on Tuesdays only." and shown["source"] == "agent"
        missing = await kernel.execute("harness.show('nope')", timeout=60).result()
        assert missing.error is not None and "no harness entry 'nope'" in missing.error.evalue
        await run_cell(kernel, "harness.update('memory', 'deploy_day', content='We deploy on Wednesdays.')")
    entry = rig.local.load().get("memory", "deploy_day")
    assert entry is not None and entry.content == "We deploy on Wednesdays." and entry.version == 2
    assert entry.title == "Deploy day", "update keeps the fields it was not given"
    first, second = rig.local.history()
    rig.local.rollback(second.id)
    rig.local.rollback(first.id)
    assert rig.local.load().get("memory", "deploy_day") is None


async def test_refine_run_in_a_cell_is_held_until_the_turn_ends(kernel: KernelSession, rig: Rig) -> None:
    coordinator, harness = rig.harness(auto_every=0)
    register_host_ops(kernel.host_bridge, HarnessSurface.of(coordinator))
    rig.server.push(plan_reply())  # an empty proposal: nothing to keep
    async with serving(coordinator, rig):
        out = await run_cell(kernel, "r = await refine.run('remember the deploy day')\nprint(json.dumps(r))")
        assert json.loads(out)["scheduled"] is True
        status = json.loads(await run_cell(kernel, "print(json.dumps(refine.status()))"))
        assert status["pending"] == 1 and status["in_flight"] == 0
        assert rig.server.requests == []
        coordinator.jobs.turn_ended()
        assert await harness.wait_quiescent(WAIT)
    assert "remember the deploy day" in rig.server.requests[0]["messages"][1]["content"]
    assert harness.status().last is not None and harness.status().last.status == "empty"


class GatedCompletion:
    """The real model call, held at the door until the test lets it through."""

    def __init__(self, inner: ModelClientCompletion) -> None:
        self.inner = inner
        self.entered = anyio.Event()
        self.release = anyio.Event()

    async def complete(
        self, *, system: str, user: str, max_tokens: int, schema: Mapping[str, Any] | None = None
    ) -> Completion:
        self.entered.set()
        await self.release.wait()
        return await self.inner.complete(system=system, user=user, max_tokens=max_tokens, schema=schema)


async def test_kernel_write_while_the_planner_runs_is_refused_as_changed_during_planning(
    kernel: KernelSession, rig: Rig
) -> None:
    seed = Proposal.model_validate(
        {
            "summary": "seed",
            "edits": [
                {
                    "action": "create",
                    "kind": "memory",
                    "id": "test_command",
                    "title": "Test command",
                    "content": "Run pytest.",
                }
            ],
        }
    )
    rig.local.apply(seed, scope="local", trigger="user")
    gate = GatedCompletion(ModelClientCompletion(rig.model_client(), model=refine_model(rig.config)))
    coordinator, harness = rig.harness(auto_every=0, completion=gate)
    register_host_ops(kernel.host_bridge, HarnessSurface.of(coordinator))
    rig.server.push(
        plan_reply(
            {
                "action": "update",
                "kind": "memory",
                "id": "test_command",
                "title": "Test command",
                "content": "Run `make check`.",
                "evidence": ["u-1"],
            }
        )
    )
    async with serving(coordinator, rig):
        async with anyio.create_task_group() as tg:
            outcomes: list[Any] = []

            async def refine() -> None:
                outcomes.append(await harness.refine_now())

            tg.start_soon(refine)
            with anyio.fail_after(WAIT):
                await gate.entered.wait()
            await run_cell(kernel, "harness.update('memory', 'test_command', content='Run tox.')")
            gate.release.set()
    [outcome] = outcomes
    assert outcome.status == "refused"
    assert outcome.error is not None and "entry changed during refinement planning" in outcome.error
    entry = rig.local.load().get("memory", "test_command")
    assert entry is not None and entry.content == "Run tox.", "the kernel's write is not clobbered"


async def test_setup_code_builds_the_skills_from_source_when_the_kernel_cannot_import_them(
    kernel: KernelSession, skill_tree: dict[str, Path]
) -> None:
    roots = skill_roots(skill_tree["project"], {"HOME": str(skill_tree["home"])})
    code = setup_code(roots)
    block = (
        "import sys\n"
        "_saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k == 'skills' or k.startswith('skills.')}\n"
        "sys.modules['skills'] = None  # what an interpreter without the package sees\n"
    )
    try:
        await run_cell(kernel, block + code)
        out = await run_cell(
            kernel, "print(skills.__file__, refine.__file__, [s['name'] for s in skills.list()])"
        )
        assert out.startswith("<continual-acp skills> <continual-acp skills.refine>")
        assert "'pdf'" in out
    finally:
        await run_cell(kernel, "sys.modules.update(_saved)\n" + code)
