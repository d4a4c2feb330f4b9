"""The one settings table: the generated reference page, unknown keys, environment-only variables, env coverage."""

from __future__ import annotations

import importlib.util
import logging
import re
from pathlib import Path
from types import ModuleType

import pytest

from agent_core.config import reference as config_reference
from agent_core.config import table as config_table
from agent_core.config.loader import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("acp_server", "agent_core", "harness_store", "host_base", "kernel_bridge", "skills")


def _reference_generator() -> ModuleType:
    # docs/ is not a package: the generator is a script, loaded from its file as `python docs/...` runs it.
    spec = importlib.util.spec_from_file_location(
        "gen_config_reference", ROOT / "docs" / "gen_config_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_reference_page_is_the_one_generated_from_the_settings_table() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert page == _reference_generator().render(), "regenerate it: python docs/gen_config_reference.py"


def test_the_configuration_reference_holds_every_row_of_the_settings_table() -> None:
    # The page is the generator's output, and the generator's output carries the table whole.
    assert config_reference.markdown_table() in _reference_generator().render()


def test_every_environment_variable_the_product_reads_has_a_row() -> None:
    pattern = re.compile(r"\"((?:CONTINUAL_ACP|OPENAI)_[A-Z_]+)\"")
    named = {
        match
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        for match in pattern.findall(path.read_text(encoding="utf-8"))
    }
    assert named - set(config_table.BY_ENV) == set()


def test_an_unknown_config_key_is_reported_with_the_closest_valid_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "config.toml"
    path.write_text("contex_window = 1000\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="agent_core.config.loader"):
        config = load_config({"HOME": str(tmp_path), "CONTINUAL_ACP_CONFIG": str(path)})
    expected = f"{path}: unknown setting 'contex_window'; did you mean 'context_window'? (it is ignored)"
    assert config.warnings == (expected,)
    assert [record.getMessage() for record in caplog.records] == [expected]
    assert config.context_window == 128_000


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        (
            "CONTINUAL_ACP_LOG_LEVEL",
            "chatty",
            "setting CONTINUAL_ACP_LOG_LEVEL = 'CHATTY' (from environment variable CONTINUAL_ACP_LOG_LEVEL)"
            " is not valid: it must be 'DEBUG' or 'INFO'",
        ),
        (
            "CONTINUAL_ACP_MAX_MESSAGE_BYTES",
            "lots",
            "setting CONTINUAL_ACP_MAX_MESSAGE_BYTES = 'lots' (from environment variable "
            "CONTINUAL_ACP_MAX_MESSAGE_BYTES) is not valid: it must be a whole number >= 1024",
        ),
        (
            "CONTINUAL_ACP_MAX_MESSAGE_BYTES",
            "10",
            "setting CONTINUAL_ACP_MAX_MESSAGE_BYTES = 10 (from environment variable",
        ),
    ],
)
def test_environment_only_variables_are_checked_at_start_naming_the_variable(
    tmp_path: Path, name: str, raw: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config({"HOME": str(tmp_path), name: raw})


def test_environment_only_variables_parse_to_their_kind() -> None:
    env = {"CONTINUAL_ACP_LOG_LEVEL": "debug", "CONTINUAL_ACP_MAX_MESSAGE_BYTES": "4096"}
    assert config_table.from_env("CONTINUAL_ACP_LOG_LEVEL", env) == "DEBUG"
    assert config_table.from_env("CONTINUAL_ACP_MAX_MESSAGE_BYTES", env) == 4096
    assert config_table.from_env("CONTINUAL_ACP_MAX_MESSAGE_BYTES", {}) == 64 * 1024 * 1024


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("subagents_max_depth = 0", "subagents_max_depth"),
        ('auto_refine_every = "often"', "auto_refine_every"),
        ("mcp_call_timeout = -1", "mcp_call_timeout"),
        ('verify_skills = "maybe"', "verify_skills"),
        ("autonomous_checkpoint_every = 1.5", "autonomous_checkpoint_every"),
        ('sandbox_tier = "chroot"', "sandbox_tier"),
        ("gates = [3]", "gates"),
    ],
)
def test_a_feature_setting_with_a_bad_value_is_refused_at_start_naming_the_key(
    tmp_path: Path, line: str, key: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=rf"^setting {key} = .* \(from {re.escape(str(path))}\) is not valid"
    ):
        load_config({"HOME": str(tmp_path), "CONTINUAL_ACP_CONFIG": str(path)})


def test_modes_and_review_policies_come_from_the_session_settings_table() -> None:
    from agent_core.config import loader as config
    from agent_core.config import session_settings as settings

    assert config.MODES == settings.MODES and config.REFINE_REVIEW == settings.REVIEW_POLICIES
