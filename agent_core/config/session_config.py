"""The session's settings (the table is config/session_settings.py): the mode, the model and what
it accepts, the request limit, and changing one, recorded in the transcript.

`SessionConfig` is a part of `Session` (session.py): it names what it uses of the session below,
and the session supplies it.
"""

from __future__ import annotations

from typing import Any

from agent_core.config import session_settings as settings
from agent_core.config.loader import AgentConfig
from agent_core.history.transcript import TranscriptWriter


class SessionConfig:
    # What this part uses of the session (set by `Session.__init__`).
    agent_config: AgentConfig
    config: dict[str, Any]
    always_allowed: bool
    _writer: TranscriptWriter

    @property
    def mode(self) -> str:
        """`ask`, `auto` or `autonomous` (settings.MODE)."""
        return str(self.config["mode"])

    def set_mode(self, mode: str) -> None:
        """Same as `set_config("mode", mode)`."""
        self.set_config("mode", mode)

    @property
    def model_name(self) -> str | None:
        """The model that answers prompts; None when none is configured."""
        return self.config.get("model") or None

    @property
    def model_accepts_images(self) -> bool:
        """False once the endpoint refused images (or `images = false` in config.toml)."""
        return bool(self.config.get("images", self.agent_config.extra.get("images", True)))

    @property
    def max_turn_requests(self) -> int:
        """Model requests one prompt may make: the session's setting, else the configured limit."""
        return max(1, int(self.config.get("max_turn_requests") or self.agent_config.max_turn_requests))

    def available_models(self) -> list[str]:
        """The configured models (main, extra choices, refine model), for the model picker."""
        return self.agent_config.session_models()

    def set_config(self, key: str, value: Any) -> None:
        """Change one setting (agent_core.config.session_settings); raises ValueError with a readable message on a bad key or value."""
        value = settings.validate(key, value, models=self.available_models())
        self.config[key] = value
        if key == "mode" and value == "ask":
            # Selecting `ask` (again) revokes "Allow always (this session)": the user asked to be asked.
            self.always_allowed = False
        self._writer.append({"type": "config", "key": key, "value": value})
