"""The configuration reference's table, generated from config/table.py's rows (`markdown_table`;
`docs/gen_config_reference.py` writes docs/configuration.md from it, and a test fails while that page
is stale). `python -m agent_core.config.reference` prints the table alone.
"""

from __future__ import annotations

from agent_core.config.option import Option
from agent_core.config.table import OPTIONS


def _default_text(option: Option) -> str:
    if option.default_text:
        return option.default_text
    default = option.default
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, tuple):
        return "[]" if not default else repr(list(default))
    return (
        f"`{default!r}`"
        if isinstance(default, str)
        else f"{default:g}"
        if isinstance(default, float)
        else str(default)
    )


def markdown_table() -> str:
    """The configuration reference's table, one row per option (docs/configuration.md is generated from it)."""
    rows = ["| `config.toml` key | environment | default | allowed | what |", "|---|---|---|---|---|"]
    for option in OPTIONS:
        key = f"`{option.key}`" if option.key else ""
        env = f"`{option.env}`" if option.env else ""
        what = option.doc + (" (set by the server for its kernels; never set it)" if option.internal else "")
        default = "" if option.internal else _default_text(option)
        allowed = "" if option.internal else option.allowed.replace("|", "\\|")
        rows.append(f"| {key} | {env} | {default} | {allowed} | {what} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # `python -m agent_core.config.reference` prints the table
    print(markdown_table(), end="")
