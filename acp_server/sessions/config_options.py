"""Session modes and config options from agent_core's settings table.

One definition of each mode and review policy: `agent_core.config.session_settings` (its `Setting`s say the id,
the choices, the words an editor shows). Zed hides `modes` once config options exist, so the mode is
also a config option (category `mode`) and `modes` mirrors it for older clients.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from acp_server.protocol import frames

if TYPE_CHECKING:
    from agent_core.config.session_settings import Choice, Setting

JsonObject = dict[str, object]


class ConfigurableSession(Protocol):
    @property
    def mode(self) -> str: ...

    @property
    def config(self) -> Mapping[str, object]: ...

    def available_models(self) -> list[str]: ...


class KernelGuarantees(Protocol):
    """kernel_bridge's `KernelGuarantees`, as agent_core hands it over (acp_server may not import it)."""

    @property
    def backend(self) -> str: ...
    @property
    def where(self) -> str: ...
    @property
    def confined(self) -> bool: ...
    @property
    def tier(self) -> str | None: ...
    @property
    def network(self) -> bool: ...
    @property
    def approval_required(self) -> bool: ...
    @property
    def notes(self) -> tuple[str, ...]: ...


def _triples(choices: tuple[Choice, ...]) -> list[tuple[str, str, str]]:
    return [(choice.value, choice.name, choice.description) for choice in choices]


def modes_state(session: ConfigurableSession) -> JsonObject:
    """`modes`: the current mode and every mode of the table."""
    from agent_core.config.session_settings import MODE

    return frames.session_modes(session.mode, _triples(MODE.choices))


def _option(setting: Setting, session: ConfigurableSession) -> JsonObject:
    from agent_core.config.session_settings import MODEL, model_choices

    current = setting.choice_value(session.config.get(setting.id))
    if setting is MODEL:
        choices = model_choices(session.available_models(), current or None)
    else:
        choices = setting.choices
    return frames.select_config_option(
        setting.id,
        setting.name,
        description=setting.description,
        category=setting.category,
        current=current,
        choices=_triples(choices),
    )


def config_options(session: ConfigurableSession) -> list[JsonObject]:
    """Every advertised setting as a `select` config option, in table order."""
    from agent_core.config.session_settings import advertised

    return [_option(setting, session) for setting in advertised()]


def session_setup(session: ConfigurableSession, kernel: Mapping[str, object] | None = None) -> JsonObject:
    """The `modes` + `configOptions` pair every new/load/resume response carries (and, with
    `kernel`, the backend's guarantees under `_meta`)."""
    return frames.session_setup_response(modes_state(session), config_options(session), kernel)


def kernel_meta(found: KernelGuarantees | None) -> JsonObject | None:
    """The backend's guarantees for a session result's `_meta`, or None when not known yet."""
    if found is None:
        return None
    return frames.kernel_guarantees(
        found.backend,
        found.where,
        confined=found.confined,
        tier=found.tier,
        network=found.network,
        approval_required=found.approval_required,
        notes=found.notes,
    )
