"""A setting's row type (`Option`: key, kind, bounds or choices, default, what it does), the error a
bad value raises (`ConfigError`), and checking one value against its row (`check`, `parse_text` for
an environment variable's text). The rows themselves are config/table.py's `OPTIONS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

# The log-level choice: an environment variable's text is upper-cased before it is checked.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

Kind = Literal["str", "int", "float", "bool", "choice", "strings", "custom"]
MISSING: Any = object()


class ConfigError(ValueError):
    """A setting has a value of the wrong type or out of range; the message names the setting,
    where it came from, the value and what is allowed."""

    def __init__(self, key: str, value: Any, source: str, allowed: str) -> None:
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"setting {key} = {shown} (from {source}) is not valid: it must be {allowed}")
        self.key = key
        self.value = value
        self.source = source


@dataclass(frozen=True, slots=True)
class Option:
    """One setting. `key` is the `config.toml` key ("" for an environment-only variable)."""

    key: str
    kind: Kind
    doc: str
    default: Any = None
    env: str | None = None
    at_least: float | None = None  # inclusive lower bound
    above: float | None = None  # exclusive lower bound
    at_most: float | None = None
    choices: tuple[str, ...] = ()
    allowed_text: str = ""  # what the error and the docs say is allowed (generated when empty)
    # kind "custom": returns the normalized value or raises ValueError (its text is not shown).
    check: Callable[[Any], Any] | None = None
    # Set by the server for the processes it starts; documented, never set by a user.
    internal: bool = False
    # The default as the docs show it, when it is not a literal (e.g. "the data dir").
    default_text: str = ""

    @property
    def name(self) -> str:
        return self.key or str(self.env)

    @property
    def allowed(self) -> str:
        if self.allowed_text:
            return self.allowed_text
        if self.kind == "bool":
            return "true or false"
        if self.kind == "choice":
            return " or ".join(repr(choice) for choice in self.choices)
        if self.kind == "strings":
            return "a list of strings"
        if self.kind == "str":
            return "a string"
        noun = "a whole number" if self.kind == "int" else "a number"
        bounds = []
        if self.at_least is not None:
            bounds.append(f">= {self.at_least:g}")
        if self.above is not None:
            bounds.append(f"> {self.above:g}")
        if self.at_most is not None:
            bounds.append(f"<= {self.at_most:g}")
        return " ".join([noun, *bounds])


def parse_text(option: Option, raw: str) -> Any:
    """An environment variable's text as the option's kind (raises ValueError)."""
    if option.kind == "int":
        return int(raw.strip())
    if option.kind == "float":
        return float(raw.strip())
    if option.kind == "bool":
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError(raw)
    if option.kind == "strings":
        return [part.strip() for part in raw.split(",") if part.strip()]
    if option.kind == "choice" and option.choices == LOG_LEVELS:
        return raw.strip().upper()
    return raw


def check(option: Option, value: Any, source: str) -> Any:
    """`value` checked against `option` and normalized; raises `ConfigError` naming the setting."""
    name = option.name

    def refuse() -> ConfigError:
        return ConfigError(name, value, source, option.allowed)

    kind = option.kind
    if kind == "custom":
        assert option.check is not None
        try:
            return option.check(value)
        except ValueError as exc:
            detail = str(exc)
            if not detail or detail == str(value):
                raise refuse() from None
            raise ConfigError(name, value, source, f"{option.allowed} ({detail})") from None
    if kind == "str":
        if not isinstance(value, str):
            raise refuse()
        return value
    if kind == "choice":
        if value not in option.choices:
            raise refuse()
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise refuse()
        return value
    if kind == "strings":
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
            raise refuse()
        return tuple(value)
    number_ok = isinstance(value, int) if kind == "int" else isinstance(value, int | float)
    if isinstance(value, bool) or not number_ok or (kind == "float" and not math.isfinite(value)):
        raise refuse()
    if kind == "float":
        value = float(value)
    if (
        (option.at_least is not None and value < option.at_least)
        or (option.above is not None and value <= option.above)
        or (option.at_most is not None and value > option.at_most)
    ):
        raise refuse()
    return value
