"""load_config: environment over config.toml over defaults, with readable errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.config import load_config


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


def test_configured_output_budget_is_sent(tmp_path: Path) -> None:
    config = load_config({"HOME": str(tmp_path), "CONTINUAL_ACP_MAX_OUTPUT_TOKENS": "4096"})
    assert config.max_output_tokens == 4096 and config.send_max_tokens is True


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("CONTINUAL_ACP_KERNEL_POOL", "many", "CONTINUAL_ACP_KERNEL_POOL='many' is not a valid int"),
        ("CONTINUAL_ACP_KERNEL_POOL", "-1", "kernel_pool_size must be >= 0"),
        ("CONTINUAL_ACP_MODE", "yolo", "mode 'yolo' is not one of"),
        ("CONTINUAL_ACP_MAX_OUTPUT_TOKENS", "0", "max_output_tokens must be >= 1"),
    ],
)
def test_bad_values_name_the_setting(tmp_path: Path, name: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        load_config({"HOME": str(tmp_path), name: value})


def test_broken_config_file_is_ignored_not_fatal(tmp_path: Path) -> None:
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()
    (config_dir / "config.toml").write_text("model = [unclosed")
    config = load_config({"HOME": str(tmp_path), "CONTINUAL_ACP_CONFIG": str(config_dir / "config.toml")})
    assert config.model is None
