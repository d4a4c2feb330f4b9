"""Session modes and config options (ACP.md "Modes and config options").

Zed hides `modes` once config options exist, so the mode is also a config option (category `mode`)
and `modes` mirrors it for older clients.
"""

from __future__ import annotations

from typing import Any, Protocol

MODES: tuple[tuple[str, str, str], ...] = (
    (
        "ask",
        "Ask",
        "Ask permission before every cell and every refinement (a harness write from an allowed "
        "cell too); selecting Ask again revokes an “Allow always (this session)” grant",
    ),
    ("auto", "Auto", "Cells run; local refinements apply as candidates; global ones wait for review"),
    ("autonomous", "Autonomous", "Auto, and keep going until the configured gates pass or a limit is hit"),
)
REFINE_REVIEW: tuple[tuple[str, str, str], ...] = (
    ("always", "Always", "Review every refinement before it applies"),
    (
        "global_only",
        "Global only",
        "Review refinements of the global harness; local ones apply as candidates",
    ),
    ("never", "Never", "Apply refinements without review (they can still be rolled back)"),
)

WAIT_FOR_REFINEMENT: tuple[tuple[str, str, str], ...] = (
    ("false", "No", "Answer the prompt at once; refinement settles in the background"),
    ("true", "Yes", "Answer only after refinement settled (scripts, CI)"),
)


class ConfigurableSession(Protocol):
    @property
    def mode(self) -> str: ...

    @property
    def config(self) -> dict[str, Any]: ...

    def available_models(self) -> list[str]: ...


def modes_state(session: ConfigurableSession) -> dict[str, Any]:
    return {
        "currentModeId": session.mode,
        "availableModes": [{"id": mode, "name": name, "description": text} for mode, name, text in MODES],
    }


def _select(
    option_id: str,
    name: str,
    category: str,
    current: str,
    choices: list[tuple[str, str, str]],
    description: str,
) -> dict[str, Any]:
    return {
        "id": option_id,
        "name": name,
        "description": description,
        "category": category,
        "type": "select",
        "currentValue": current,
        "options": [
            {"value": value, "name": label, **({"description": text} if text else {})}
            for value, label, text in choices
        ],
    }


def config_options(session: ConfigurableSession) -> list[dict[str, Any]]:
    config = session.config
    model = str(config.get("model") or "")
    models = list(dict.fromkeys([*session.available_models(), *([model] if model else [])]))
    refine = str(config.get("refine_review") or "global_only")
    return [
        _select(
            "mode", "Mode", "mode", session.mode, list(MODES), "How much the agent may do without asking"
        ),
        _select(
            "model", "Model", "model", model, [(m, m, "") for m in models], "The model that answers prompts"
        ),
        _select(
            "refine_review",
            "Refinement review",
            "_custom",
            refine,
            list(REFINE_REVIEW),
            "Which harness refinements wait for your review",
        ),
        _select(
            "wait_for_refinement",
            "Wait for refinement",
            "_custom",
            "true" if config.get("wait_for_refinement") else "false",
            list(WAIT_FOR_REFINEMENT),
            "Whether a prompt answers only after background refinement has settled",
        ),
    ]


def session_setup(session: ConfigurableSession) -> dict[str, Any]:
    """The `modes` + `configOptions` pair every new/load/resume response carries."""
    return {"modes": modes_state(session), "configOptions": config_options(session)}
