"""A configuration the server cannot use is an error at start that names the key (or the file and the
line), answered to every session request over real stdio; never a silent fall back to defaults.

No kernel is started by these tests (the configuration is refused before one could be).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from acp_client import RpcError
from acp_helpers import ClientFactory, initialize

CONFIG_INVALID = -32012


def test_an_unparsable_config_toml_is_refused_at_session_new_naming_the_file_and_the_line(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    # The sandbox request on line 1 must not silently become an unconfined local kernel.
    config.write_text('kernel = "sandbox"\nmodel = gpt-4.1\n', encoding="utf-8")
    client = spawn(None, CONTINUAL_ACP_CONFIG=str(config))
    assert initialize(client)["protocolVersion"] == 1  # initialize still answers: the editor shows the error
    for method in ("session/new", "session/list"):
        params = {"cwd": str(tmp_path), "mcpServers": []} if method == "session/new" else {}
        with pytest.raises(RpcError) as caught:
            client.request(method, params)
        error = caught.value
        assert error.code == CONFIG_INVALID, error
        assert str(config) in str(error.message) and "line 2" in str(error.message), error
        assert error.data == {"setting": "", "source": str(config), "line": 2}


def test_a_wrong_kernel_python_is_refused_at_start_naming_the_setting(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-python"
    client = spawn(None, CONTINUAL_ACP_CONFIG=str(_config(tmp_path, f'kernel_python = "{missing}"')))
    initialize(client)
    with pytest.raises(RpcError) as caught:
        client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    error = caught.value
    assert error.code == CONFIG_INVALID, error
    assert str(error.message).startswith("the configuration is not valid: setting kernel_python = "), error
    assert f"kernel interpreter not found: {missing} (no such file)" in str(error.message), error
    assert isinstance(error.data, dict) and error.data["setting"] == "kernel_python"


def _config(root: Path, text: str) -> Path:
    path = root / "config.toml"
    path.write_text(text + "\n", encoding="utf-8")
    return path
