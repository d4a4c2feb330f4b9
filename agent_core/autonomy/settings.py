"""Autonomous mode's settings from config.toml: the loop's limits, the user's gates and the
referee's settings, a bad value reported (and its default used) rather than raised."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_core.autonomy.gates import Gate, GateConfigError, parse_gates
from agent_core.autonomy.loop import LoopLimits
from agent_core.config import table as config_table
from agent_core.config.option import ConfigError
from agent_core.control_plane.settings import RefereeSettings

__all__ = ["AutonomySettings"]


@dataclass(frozen=True)
class AutonomySettings:
    """From config.toml: `autonomous_max_continuations`, `autonomous_max_tokens`,
    `autonomous_max_seconds`, `autonomous_checkpoint_every`, `gates`."""

    limits: LoopLimits = field(default_factory=LoopLimits)
    user_gates: tuple[Gate, ...] = ()
    referee: RefereeSettings = field(default_factory=RefereeSettings)
    error: str | None = None  # a bad setting, reported by /autonomous status (and the defaults used)

    @classmethod
    def from_extra(cls, extra: Mapping[str, Any]) -> AutonomySettings:
        errors: list[str] = []

        def number(key: str) -> Any:
            # `load_config` refused a bad value at start; a mapping from elsewhere reports it here.
            try:
                return config_table.value(extra, key)
            except ConfigError as exc:
                errors.append(f"{exc}; using {config_table.BY_KEY[key].default!r}")
                return config_table.BY_KEY[key].default

        limits = LoopLimits(
            max_continuations=number("autonomous_max_continuations"),
            max_tokens=number("autonomous_max_tokens"),
            max_seconds=number("autonomous_max_seconds"),
            checkpoint_every=number("autonomous_checkpoint_every"),
        )
        try:
            gates = parse_gates(extra.get("gates"), source="user", where="config.toml")
        except GateConfigError as exc:
            errors.append(str(exc))
            gates = ()
        referee = RefereeSettings.from_extra(extra)
        errors += referee.errors
        return cls(limits=limits, user_gates=gates, referee=referee, error="; ".join(errors) or None)
