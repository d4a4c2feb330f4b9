"""Session settings: the one table of what a session can be told to change, and their validation.

Each `Setting` names its id, its allowed values (`choices`, or none for an open setting such as the
model, whose choices are the configured models), its default, and the words an editor shows for it.
`Session.set_config` validates against this table, and acp_server builds its `modes` and
`configOptions` from it, so a mode or a review policy is defined
once. Stored values are what `set_config` keeps in `Session.config` (and in the transcript's `config`
records): strings, except `max_turn_requests` (int) and `wait_for_refinement` (bool).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

# ACP config-option categories (the `category` field); `_custom` is the spec's prefix for our own.
Category = Literal["mode", "model", "_custom"]
SettingValue = str | int | bool | None


@dataclass(frozen=True)
class Choice:
    """One allowed value: what is stored, the label an editor shows, and a sentence saying what it does."""

    value: str
    name: str
    description: str = ""


@dataclass(frozen=True)
class Setting:
    """One session setting.

    `choices` empty means the allowed values are not fixed here (the model: the configured models;
    `max_turn_requests`: any positive integer). `advertised` settings are offered to editors as config
    options; the others can be set by `Session.set_config` only (scripts, tests).
    """

    id: str
    name: str
    description: str
    category: Category
    default: SettingValue
    choices: tuple[Choice, ...] = ()
    advertised: bool = True

    @property
    def values(self) -> tuple[str, ...]:
        """The allowed stored values, in the order an editor lists them (empty for an open setting)."""
        return tuple(choice.value for choice in self.choices)

    def choice_value(self, stored: object) -> str:
        """The stored value as the editor-facing choice value (`True` -> "true"; missing -> the default)."""
        value = self.default if stored is None or stored == "" else stored
        if isinstance(value, bool):
            return "true" if value else "false"
        return "" if value is None else str(value)


MODE = Setting(
    id="mode",
    name="Mode",
    description="How much the agent may do without asking",
    category="mode",
    default="auto",
    choices=(
        Choice(
            "ask",
            "Ask",
            "Ask permission before every cell and every refinement (a harness write from an allowed "
            "cell too); selecting Ask again revokes an “Allow always (this session)” grant",
        ),
        Choice(
            "auto", "Auto", "Cells run; local refinements apply as candidates; global ones wait for review"
        ),
        Choice(
            "autonomous",
            "Autonomous",
            "Auto, and keep going until the configured gates pass or a limit is hit",
        ),
    ),
)
MODEL = Setting(
    id="model",
    name="Model",
    description="The model that answers prompts",
    category="model",
    default=None,  # the configured `model` (AgentConfig.model)
)
REFINE_REVIEW = Setting(
    id="refine_review",
    name="Refinement review",
    description="Which harness refinements wait for your review",
    category="_custom",
    default="global_only",
    choices=(
        Choice("always", "Always", "Review every refinement before it applies"),
        Choice(
            "global_only",
            "Global only",
            "Review refinements of the global harness; local ones apply as candidates",
        ),
        Choice("never", "Never", "Apply refinements without review (they can still be rolled back)"),
    ),
)
MAX_TURN_REQUESTS = Setting(
    id="max_turn_requests",
    name="Model requests per prompt",
    description="How many model requests one prompt may make before the turn stops",
    category="_custom",
    default=None,  # the configured `max_turn_requests` (AgentConfig.max_turn_requests)
    advertised=False,
)
WAIT_FOR_REFINEMENT = Setting(
    id="wait_for_refinement",
    name="Wait for refinement",
    description="Whether a prompt answers only after background refinement has settled",
    category="_custom",
    default=False,
    choices=(
        Choice("false", "No", "Answer the prompt at once; refinement settles in the background"),
        Choice("true", "Yes", "Answer only after refinement settled (scripts, CI)"),
    ),
)

# Table order is the order of the error message naming every setting; editors see the advertised ones
# in this order too.
SETTINGS: tuple[Setting, ...] = (MODE, MODEL, REFINE_REVIEW, MAX_TURN_REQUESTS, WAIT_FOR_REFINEMENT)
BY_ID: Mapping[str, Setting] = {setting.id: setting for setting in SETTINGS}

MODES: tuple[str, ...] = MODE.values
REVIEW_POLICIES: tuple[str, ...] = REFINE_REVIEW.values


def advertised() -> tuple[Setting, ...]:
    """The settings offered to editors as config options, in table order."""
    return tuple(setting for setting in SETTINGS if setting.advertised)


def model_choices(available: Sequence[str], current: str | None) -> tuple[Choice, ...]:
    """The model picker's choices: the configured models, plus the current one if it is not among them."""
    names = list(dict.fromkeys([*available, *([current] if current else [])]))
    return tuple(Choice(name, name) for name in names)


def validate(key: str, value: object, *, models: Sequence[str]) -> SettingValue:
    """The value to store for `key`; raises ValueError with a readable message on a bad key or value.

    `models` are the configured models (an empty list accepts any non-empty model id).
    """
    setting = BY_ID.get(key)
    if setting is None:
        raise ValueError(f"unknown config option {key!r}; options: {', '.join(BY_ID)}")
    if setting is MODEL:
        if not isinstance(value, str) or not value.strip():
            raise ValueError("model must be a non-empty model id")
        if models and value not in models:
            raise ValueError(f"unknown model {value!r}; configured models: {', '.join(models)}")
        return value
    if setting is MAX_TURN_REQUESTS:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"max_turn_requests must be a positive integer; got {value!r}")
        return value
    if setting is WAIT_FOR_REFINEMENT:
        # Editors send config values as strings; scripts may send a JSON boolean.
        flags: dict[object, bool] = {True: True, False: False, "true": True, "false": False}
        if not isinstance(value, bool | str) or value not in flags:
            raise ValueError(f"wait_for_refinement must be true or false; got {value!r}")
        return flags[value]
    if not isinstance(value, str) or value not in setting.values:
        raise ValueError(f"{setting.id} must be one of {', '.join(setting.values)}; got {value!r}")
    return value
