"""Skill checks in real scratch kernels, and the store refusing or annotating skills by them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_core.trust.skill_check import OFF_NOTE, SkillCheckService, disabled_verifier, verify_enabled
from harness_store import HarnessEntry, HarnessStore


def skill(
    callable_: str,
    arguments: dict[str, Any],
    examples: list[dict[str, Any]] | None = None,
    module: str = "trustskills",
) -> HarnessEntry:
    return HarnessEntry(
        id=callable_,
        kind="skill",
        title=callable_,
        content="a skill",
        reference={"type": "python", "import": module, "callable": callable_},
        arguments=arguments,
        examples=examples or [],
        created_at="2026-01-01T00:00:00Z",
        updated_at="2026-01-01T00:00:00Z",
    )


def edit(
    callable_: str,
    arguments: dict[str, Any],
    examples: list[dict[str, Any]] | None = None,
    module: str = "trustskills",
    action: str = "create",
) -> dict[str, Any]:
    return {
        "action": action,
        "kind": "skill",
        "id": callable_,
        "title": callable_,
        "content": "a skill",
        "reference": {"type": "python", "import": module, "callable": callable_},
        "arguments": arguments,
        "examples": examples or [],
    }


def test_good_skill_with_passing_examples_is_verified(service: SkillCheckService, skill_dir: Path) -> None:
    check = service.check(
        skill(
            "add",
            {"x": {"type": "number"}, "y": {"type": "number"}},
            [{"args": [1, 2], "expect": 3}, {"kwargs": {"x": 5}, "predicate": "result == 5"}],
        ),
        cwd=skill_dir,
    )
    assert (check.ok, check.stage) == (True, "passed"), check.output
    assert "example 2: ok" in check.output


def test_import_error_fails_the_import_stage(service: SkillCheckService, skill_dir: Path) -> None:
    check = service.check(skill("add", {"x": {}}, module="no_such_module_xyz"), cwd=skill_dir)
    assert (check.ok, check.stage) == (False, "import")
    assert "ModuleNotFoundError" in check.output


def test_missing_callable_fails_the_callable_stage(service: SkillCheckService, skill_dir: Path) -> None:
    check = service.check(skill("not_callable", {}), cwd=skill_dir)
    assert (check.ok, check.stage) == (False, "callable")


def test_signature_without_a_declared_required_parameter_fails(
    service: SkillCheckService, skill_dir: Path
) -> None:
    check = service.check(skill("needs_two", {"a": {"type": "number"}}), cwd=skill_dir)
    assert (check.ok, check.stage) == (False, "signature")
    assert "parameter 'b' has no default" in check.output


def test_failing_example_names_the_result_and_the_expectation(
    service: SkillCheckService, skill_dir: Path
) -> None:
    check = service.check(skill("add", {"x": {}, "y": {}}, [{"args": [2, 2], "expect": 5}]), cwd=skill_dir)
    assert (check.ok, check.stage) == (False, "examples")
    assert "returned 4, expected 5" in check.output


def test_hanging_example_is_stopped_at_the_timeout(service: SkillCheckService, skill_dir: Path) -> None:
    check = service.check(skill("sleepy", {"seconds": {}}, [{"args": [600]}]), cwd=skill_dir)
    assert (check.ok, check.stage) == (False, "timeout")
    assert "did not finish within 3 s" in check.output
    assert check.duration < 60


def test_async_skill_example_is_awaited(service: SkillCheckService, skill_dir: Path) -> None:
    check = service.check(skill("later", {"x": {}}, [{"args": [4], "expect": 8}]), cwd=skill_dir)
    assert check.ok, check.output


def test_scratch_kernel_has_no_state_of_an_earlier_check(service: SkillCheckService, skill_dir: Path) -> None:
    (skill_dir / "leaky.py").write_text(
        "import builtins\n"
        "def mark():\n    builtins._trust_mark = getattr(builtins, '_trust_mark', 0) + 1\n"
        "    return builtins._trust_mark\n",
        encoding="utf-8",
    )
    first = service.check(skill("mark", {}, [{"expect": 1}], module="leaky"), cwd=skill_dir)
    second = service.check(skill("mark", {}, [{"expect": 1}], module="leaky"), cwd=skill_dir)
    assert (first.ok, second.ok) == (True, True), second.output


def test_store_refuses_a_skill_whose_check_fails_with_the_output(
    service: SkillCheckService, skill_dir: Path, tmp_path: Path
) -> None:
    store = HarnessStore(tmp_path / "harness")
    result = store.apply(
        {"summary": "s", "edits": [edit("add", {"x": {}, "y": {}}, [{"args": [1, 1], "expect": 3}])]},
        scope="global",
        trigger="user",
        verifier=service.verifier(skill_dir),
    )
    (applied,) = result.applied_edits
    assert applied.applied is False
    assert applied.error is not None and applied.error.startswith("skill check failed: examples check failed")
    assert "returned 2, expected 3" in applied.error
    assert store.load().get("skill", "add") is None
    assert store.history()[-1].id == result.id


def test_store_records_the_check_note_on_an_applied_skill(
    service: SkillCheckService, skill_dir: Path, tmp_path: Path
) -> None:
    store = HarnessStore(tmp_path / "harness")
    result = store.apply(
        {"summary": "s", "edits": [edit("add", {"x": {}, "y": {}}, [{"args": [1, 1], "expect": 2}])]},
        scope="global",
        trigger="user",
        verifier=service.verifier(skill_dir),
    )
    (applied,) = result.applied_edits
    assert applied.applied is True
    assert applied.check is not None and applied.check.startswith("verified in a scratch kernel")
    assert store.load().get("skill", "add") is not None


def test_verification_switched_off_says_so_on_the_applied_edit(tmp_path: Path) -> None:
    store = HarnessStore(tmp_path / "harness")
    result = store.apply(
        {"summary": "s", "edits": [edit("whatever", {}, module="not_importable_at_all")]},
        scope="global",
        trigger="user",
        verifier=disabled_verifier(),
    )
    assert result.applied_edits[0].applied is True
    assert result.applied_edits[0].check == OFF_NOTE


def test_a_verifier_that_raises_refuses_the_skill(tmp_path: Path) -> None:
    def broken(entry: HarnessEntry) -> Any:
        raise RuntimeError("pool gone")

    store = HarnessStore(tmp_path / "harness")
    result = store.apply(
        {"summary": "s", "edits": [edit("x", {})]}, scope="global", trigger="user", verifier=broken
    )
    assert result.applied_edits[0].error == (
        "skill check failed: the skill check could not run: RuntimeError: pool gone"
    )


def test_non_skill_edits_never_call_the_verifier(tmp_path: Path) -> None:
    calls: list[str] = []

    def spy(entry: HarnessEntry) -> Any:
        calls.append(entry.id)
        raise AssertionError("not for memories")

    store = HarnessStore(tmp_path / "harness")
    result = store.apply(
        {"edits": [{"action": "create", "kind": "memory", "title": "m", "content": "c"}]},
        scope="global",
        trigger="user",
        verifier=spy,
    )
    assert (result.applied, calls) == (True, [])


def test_rollback_of_a_verified_skill_is_not_rechecked(tmp_path: Path) -> None:
    calls: list[str] = []

    def counting(entry: HarnessEntry) -> Any:
        from harness_store.verify import Verdict

        calls.append(entry.id)
        return Verdict(True, "ok")

    store = HarnessStore(tmp_path / "harness")
    first = store.apply({"edits": [edit("s1", {})]}, scope="global", trigger="user", verifier=counting)
    store.apply(
        {"edits": [{**edit("s1", {}, action="update"), "content": "changed"}]},
        scope="global",
        trigger="user",
        verifier=counting,
    )
    assert calls == ["s1", "s1"]
    back = store.rollback(store.history()[-1].id)
    assert back.applied and calls == ["s1", "s1"]
    assert first.applied


@pytest.mark.parametrize(
    ("extra", "scope", "expected"),
    [
        ({}, "local", True),
        ({"verify_skills": False}, "global", False),
        ({"verify_skills": {"project": False}}, "project", False),
        ({"verify_skills": {"project": False}}, "local", True),
    ],
)
def test_verify_skills_setting_by_scope(extra: dict[str, Any], scope: str, expected: bool) -> None:
    assert verify_enabled(extra, scope) is expected
