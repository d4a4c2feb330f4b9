"""The curator's optional model pass (agent_core/refinement/curation_model.py) against the scripted
model over real HTTP and real stores: its merges join the deterministic pass's dry-run report and
its one history record under the same rules; a refused merge or a garbage reply is a note, and the
deterministic pass stands."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from agent_core.refinement import ModelClientCompletion, RefinementCoordinator
from agent_core.refinement.curation_model import CURATOR_SYSTEM_PROMPT, CuratorModel
from agent_core.refinement.surface import HarnessSurface
from agent_core.testing.scripted_model import Response, text
from harness_store import HarnessStore

from .conftest import Rig, serving

pytestmark = pytest.mark.anyio


def _store(store: HarnessStore) -> None:
    """`tests` (verified), `again` (its near duplicate: the deterministic merge), `checks` (another
    lesson the deterministic rules leave alone) and `mine` (a person's entry)."""
    first = store.apply(
        {"edits": [{"action": "create", "kind": "memory", "title": "Tests", "content": "Run make check."}]},
        scope="global",
        trigger="model",
    )
    store.record_review(first.id, "apply")
    store.apply(
        {
            "edits": [
                {"action": "create", "kind": "memory", "title": "Again", "content": "run `make check`"},
                {
                    "action": "create",
                    "kind": "memory",
                    "title": "Checks",
                    "content": "Check before a commit.",
                },
            ]
        },
        scope="global",
        trigger="model",
    )
    store.apply(
        {"edits": [{"action": "create", "kind": "memory", "title": "Mine", "content": "Commit small."}]},
        scope="global",
        trigger="user",
    )


def _reply(merges: list[dict[str, str]], generalizations: Sequence[dict[str, object]] = ()) -> Response:
    return text(json.dumps({"merges": merges, "generalizations": list(generalizations)}))


def _surface(rig: Rig) -> tuple[RefinementCoordinator, HarnessSurface]:
    coordinator, surface = rig.harness()
    surface.curator_model = CuratorModel(ModelClientCompletion(rig.model_client()), 4096)
    return coordinator, surface


def _trust(store: HarnessStore, entry_id: str) -> str:
    entry = store.load().get("memory", entry_id)
    assert entry is not None
    return entry.trust


async def test_a_model_merge_is_in_the_dry_run_and_applies_in_the_passs_one_history_record(rig: Rig) -> None:
    _store(rig.glob)
    records = len(rig.glob.history())
    rig.server.push(
        _reply([{"kind": "memory", "id": "checks", "into": "tests", "reason": "the same lesson"}])
    )
    coordinator, surface = _surface(rig)
    async with serving(coordinator, rig):
        dry = await surface.curate("global", home=rig.home, apply=False)
        done = await surface.curate("global", home=rig.home, apply=True)
    report = dry.plan.report()
    assert "- merge `memory/checks` into `memory/tests` (model: the same lesson)" in report
    assert "- merge `memory/again` into `memory/tests`" in report  # the deterministic pass's own
    # one request (the apply reuses what the dry run showed), asked the curator's way
    assert len(rig.server.requests) == 1
    assert rig.server.requests[0]["messages"][0]["content"] == CURATOR_SYSTEM_PROMPT
    assert rig.server.requests[0]["response_format"]["type"] == "json_schema"
    assert done.result is not None and len(rig.glob.history()) == records + 1
    archived = rig.glob.load().get("memory", "checks")
    assert archived is not None and archived.trust == "rejected"
    assert archived.metadata["archived"]["merged_into"] == "tests"
    assert _trust(rig.glob, "again") == "rejected"


async def test_a_model_merge_into_a_missing_target_or_of_a_persons_entry_is_refused(rig: Rig) -> None:
    _store(rig.glob)
    rig.server.push(
        _reply(
            [{"kind": "memory", "id": "checks", "into": "nowhere", "reason": "x"}],
            [{"kind": "memory", "ids": ["mine"], "into": "tests", "reason": "y"}],
        )
    )
    coordinator, surface = _surface(rig)
    async with serving(coordinator, rig):
        done = await surface.curate("global", home=rig.home, apply=True)
    report = done.plan.report()
    assert (
        "- note: model merge `memory/checks` into `memory/nowhere` refused: "
        "the merge target does not exist; nothing archived"
    ) in report
    assert (
        "- note: model merge `memory/mine` into `memory/tests` refused: written or pinned by a person"
        in report
    )
    assert [a.id for a in done.plan.actions] == ["again"]  # only the deterministic merge
    assert _trust(rig.glob, "checks") == "candidate" and _trust(rig.glob, "mine") == "verified"
    assert _trust(rig.glob, "again") == "rejected"


async def test_a_garbage_reply_leaves_the_deterministic_pass_with_a_note(rig: Rig) -> None:
    _store(rig.glob)
    rig.server.push(text("Everything looks tidy to me!"), _reply([{"kind": "memory", "id": "checks"}]))
    coordinator, surface = _surface(rig)
    async with serving(coordinator, rig):
        prose = await surface.curate("global", home=rig.home, apply=False)
        shape = await surface.curate("global", home=rig.home, apply=False)
    for done in (prose, shape):
        assert [a.id for a in done.plan.actions] == ["again"]
        assert "; the deterministic pass stands" in done.plan.report()
    assert "model pass skipped: the reply has the wrong shape (1 problem)" in shape.plan.report()


def test_the_model_pass_is_off_unless_the_setting_turns_it_on(rig: Rig) -> None:
    from agent_core.refinement.attach import curator_model

    planner = rig.planner(completion=object())
    assert curator_model(rig.config, planner) is None
    rig.config.extra["curate_model_pass"] = True
    made = curator_model(rig.config, planner)
    assert made is not None and made.client is planner.client
