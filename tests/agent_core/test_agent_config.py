"""load_config: environment over config.toml over defaults, with readable errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_core.config.loader import ConfigFileError, load_config


def test_environment_wins_over_the_config_file(tmp_path: Path) -> None:
    config_dir = tmp_path / ".config" / "continual-acp"
    config_dir.mkdir(parents=True)
    (config_dir / "config.toml").write_text(
        'model = "from-file"\nbase_url = "http://file/v1"\ncontext_window = 32000\nmodels = ["a", "b"]\nimages = false\n'
    )
    config = load_config({"HOME": str(tmp_path), "CONTINUAL_ACP_MODEL": "from-env"})
    assert config.model == "from-env" and config.base_url == "http://file/v1"
    assert config.context_window == 32000 and config.models == ("a", "b")
    assert config.extra == {"images": False}
    assert config.home == tmp_path / ".local" / "share" / "continual-acp"


def test_home_resolution_order(tmp_path: Path) -> None:
    assert load_config({"HOME": str(tmp_path), "XDG_DATA_HOME": "/xdg"}).home == Path("/xdg/continual-acp")
    assert load_config(
        {"HOME": str(tmp_path), "XDG_DATA_HOME": "/xdg", "CONTINUAL_ACP_HOME": "/h"}
    ).home == Path("/h")


def test_defaults_without_any_setting(tmp_path: Path) -> None:
    config = load_config({"HOME": str(tmp_path)})
    assert config.model is None and not config.model_configured
    assert config.kernel_pool_size == 1 and config.max_turn_requests == 50 and config.mode == "auto"
    assert config.send_max_tokens is False


@pytest.mark.parametrize(("raw", "eager"), [("0", False), ("false", False), ("1", True), ("yes", True)])
def test_the_eager_kernel_start_is_set_by_its_environment_variable(
    tmp_path: Path, raw: str, eager: bool
) -> None:
    assert load_config({"HOME": str(tmp_path), "CONTINUAL_ACP_EAGER_KERNEL": raw}).eager_kernel is eager


def test_configured_output_budget_is_sent(tmp_path: Path) -> None:
    config = load_config({"HOME": str(tmp_path), "CONTINUAL_ACP_MAX_OUTPUT_TOKENS": "4096"})
    assert config.max_output_tokens == 4096 and config.send_max_tokens is True


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "CONTINUAL_ACP_KERNEL_POOL",
            "many",
            "setting kernel_pool_size = 'many' (from environment variable CONTINUAL_ACP_KERNEL_POOL) is not valid: it must be a whole number >= 0",
        ),
        (
            "CONTINUAL_ACP_KERNEL_POOL",
            "-1",
            "setting kernel_pool_size = -1 (from environment variable CONTINUAL_ACP_KERNEL_POOL)",
        ),
        (
            "CONTINUAL_ACP_MODE",
            "yolo",
            "setting mode = 'yolo' (from environment variable CONTINUAL_ACP_MODE) is not valid: it must be 'ask' or",
        ),
        (
            "CONTINUAL_ACP_MAX_OUTPUT_TOKENS",
            "0",
            "setting max_output_tokens = 0 (from environment variable CONTINUAL_ACP_MAX_OUTPUT_TOKENS) is not valid: it must be a whole number of tokens >= 1",
        ),
        (
            "CONTINUAL_ACP_CONTEXT_WINDOW",
            "big",
            "setting context_window = 'big' (from environment variable CONTINUAL_ACP_CONTEXT_WINDOW)",
        ),
        (
            "CONTINUAL_ACP_EAGER_KERNEL",
            "sometimes",
            "setting eager_kernel = 'sometimes' (from environment variable CONTINUAL_ACP_EAGER_KERNEL) is not valid: it must be true or false",
        ),
        (
            "CONTINUAL_ACP_CONTEXT_WINDOW",
            "-5",
            "setting context_window = -5 (from environment variable CONTINUAL_ACP_CONTEXT_WINDOW)",
        ),
    ],
)
def test_bad_values_name_the_setting(tmp_path: Path, name: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        load_config({"HOME": str(tmp_path), name: value})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            'context_window = "big"',
            "setting context_window = 'big' (from {path}) is not valid: it must be a whole number of tokens >= 1",
        ),
        (
            "context_window = -5",
            "setting context_window = -5 (from {path}) is not valid: it must be a whole number of tokens >= 1",
        ),
        (
            'compact_threshold = "x"',
            "setting compact_threshold = 'x' (from {path}) is not valid: it must be a number greater than 0 and at most 1",
        ),
        (
            'cell_timeout = "soon"',
            "setting cell_timeout = 'soon' (from {path}) is not valid: it must be a number of seconds > 0",
        ),
        (
            'max_output_tokens = "x"',
            "setting max_output_tokens = 'x' (from {path}) is not valid: it must be a whole number of tokens >= 1",
        ),
        (
            "models = 5",
            "setting models = 5 (from {path}) is not valid: it must be a list of model ids (strings)",
        ),
    ],
)
def test_a_wrong_typed_config_file_value_is_refused_naming_key_value_file_and_what_is_allowed(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(message.format(path=path))):
        load_config({"HOME": str(tmp_path), "CONTINUAL_ACP_CONFIG": str(path)})


def test_a_config_file_that_does_not_parse_is_an_error_naming_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('kernel = "sandbox"\nmodel = [unclosed\n')
    with pytest.raises(ConfigFileError) as caught:
        load_config({"HOME": str(tmp_path), "CONTINUAL_ACP_CONFIG": str(path)})
    assert str(path) in str(caught.value) and "line 2" in str(caught.value)
