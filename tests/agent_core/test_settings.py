"""The session settings table: ids, allowed values, defaults, and the messages a bad value gets."""

from __future__ import annotations

import pytest

from agent_core.config import loader as config
from agent_core.config import session_settings as settings


def test_the_table_lists_every_setting_a_session_accepts_in_order() -> None:
    assert [s.id for s in settings.SETTINGS] == [
        "mode", "model", "refine_review", "max_turn_requests", "wait_for_refinement",
    ]  # fmt: skip


def test_only_settable_by_scripts_settings_are_not_advertised_to_editors() -> None:
    assert [s.id for s in settings.advertised()] == ["mode", "model", "refine_review", "wait_for_refinement"]


def test_modes_and_review_policies_are_the_values_the_config_file_accepts() -> None:
    # agent_core.config.loader validates config.toml/env against its own tuples; they must be the table's.
    assert settings.MODES == config.MODES == ("ask", "auto", "autonomous")
    assert settings.REVIEW_POLICIES == config.REFINE_REVIEW == ("always", "global_only", "never")


def test_defaults_are_auto_mode_global_only_review_and_no_waiting() -> None:
    assert settings.MODE.default == "auto"
    assert settings.REFINE_REVIEW.default == "global_only"
    assert settings.WAIT_FOR_REFINEMENT.default is False


def test_every_choice_has_a_label_and_a_description() -> None:
    for setting in settings.SETTINGS:
        assert setting.name and setting.description
        for choice in setting.choices:
            assert choice.name and choice.description, (setting.id, choice.value)


def test_an_unknown_setting_is_refused_naming_every_setting() -> None:
    with pytest.raises(ValueError) as info:
        settings.validate("colour", "blue", models=[])
    assert str(info.value) == (
        "unknown config option 'colour'; options: mode, model, refine_review, max_turn_requests, "
        "wait_for_refinement"
    )


def test_a_mode_outside_the_table_is_refused_naming_the_modes() -> None:
    with pytest.raises(ValueError) as info:
        settings.validate("mode", "yolo", models=[])
    assert str(info.value) == "mode must be one of ask, auto, autonomous; got 'yolo'"


def test_a_review_policy_outside_the_table_is_refused_naming_the_policies() -> None:
    with pytest.raises(ValueError) as info:
        settings.validate("refine_review", "sometimes", models=[])
    assert str(info.value) == "refine_review must be one of always, global_only, never; got 'sometimes'"


def test_a_model_must_be_one_of_the_configured_models_when_there_are_any() -> None:
    assert settings.validate("model", "m2", models=["m1", "m2"]) == "m2"
    with pytest.raises(ValueError, match="unknown model 'm3'; configured models: m1, m2"):
        settings.validate("model", "m3", models=["m1", "m2"])


def test_any_non_empty_model_id_is_accepted_when_none_are_configured() -> None:
    assert settings.validate("model", "anything", models=[]) == "anything"


def test_an_empty_model_id_is_refused() -> None:
    with pytest.raises(ValueError, match="model must be a non-empty model id"):
        settings.validate("model", "  ", models=[])


@pytest.mark.parametrize("value", [0, -1, True, "3"])
def test_max_turn_requests_must_be_a_positive_integer(value: object) -> None:
    with pytest.raises(ValueError, match="max_turn_requests must be a positive integer"):
        settings.validate("max_turn_requests", value, models=[])


@pytest.mark.parametrize(
    ("value", "stored"), [("true", True), ("false", False), (True, True), (False, False)]
)
def test_wait_for_refinement_is_stored_as_a_boolean_from_a_string_or_a_boolean(
    value: object, stored: bool
) -> None:
    assert settings.validate("wait_for_refinement", value, models=[]) is stored


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_wait_for_refinement_refuses_anything_but_true_or_false(value: object) -> None:
    with pytest.raises(ValueError, match="wait_for_refinement must be true or false"):
        settings.validate("wait_for_refinement", value, models=[])


def test_a_stored_boolean_is_shown_as_its_choice_value_and_a_missing_one_as_the_default() -> None:
    assert settings.WAIT_FOR_REFINEMENT.choice_value(True) == "true"
    assert settings.WAIT_FOR_REFINEMENT.choice_value(None) == "false"
    assert settings.REFINE_REVIEW.choice_value(None) == "global_only"
    assert settings.MODEL.choice_value(None) == ""


def test_the_model_picker_adds_the_current_model_when_it_is_not_configured() -> None:
    choices = settings.model_choices(["m1", "m2"], "custom")
    assert [c.value for c in choices] == ["m1", "m2", "custom"]
    assert [c.value for c in settings.model_choices(["m1"], "m1")] == ["m1"]


class _Session:
    """Just what acp_server's config options read of a session."""

    def __init__(self, config: dict[str, object], models: list[str]) -> None:
        self.config = config
        self.models = models

    @property
    def mode(self) -> str:
        return str(self.config["mode"])

    def available_models(self) -> list[str]:
        return self.models


def _from_table(session: _Session) -> list[dict[str, object]]:
    """The config options as the table describes them (the wire shape is acp_server's)."""
    options: list[dict[str, object]] = []
    for setting in settings.advertised():
        current = setting.choice_value(session.config.get(setting.id))
        choices = (
            settings.model_choices(session.available_models(), current or None)
            if setting is settings.MODEL
            else setting.choices
        )
        options.append(
            {
                "id": setting.id,
                "name": setting.name,
                "description": setting.description,
                "category": setting.category,
                "type": "select",
                "currentValue": current,
                "options": [
                    {
                        "value": c.value,
                        "name": c.name,
                        **({"description": c.description} if c.description else {}),
                    }
                    for c in choices
                ],
            }
        )
    return options


@pytest.mark.parametrize(
    "config",
    [
        {"mode": "auto", "model": "m1", "refine_review": "global_only"},
        {"mode": "ask", "model": "other", "refine_review": "never", "wait_for_refinement": True},
        {"mode": "autonomous", "model": None, "refine_review": "always", "wait_for_refinement": False},
    ],
)
def test_the_table_describes_exactly_the_config_options_editors_are_sent(config: dict[str, object]) -> None:
    from acp_server.sessions.config_options import config_options

    session = _Session(config, ["m1", "m2"])
    assert _from_table(session) == config_options(session)


def test_the_table_describes_exactly_the_modes_editors_are_sent() -> None:
    from acp_server.sessions.config_options import modes_state

    session = _Session({"mode": "ask"}, [])
    assert modes_state(session)["availableModes"] == [
        {"id": c.value, "name": c.name, "description": c.description} for c in settings.MODE.choices
    ]
