"""session/new, load and resume over real stdio: the kernel backend's guarantees are in the result's
`_meta`, and a backend that cannot start kernels is a typed error at once, not at the first cell.

A required bubblewrap is hidden by a PATH without it, for real; no kernel is started by these tests.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_client import AcpClient, RpcError, server_env
from acp_helpers import ClientFactory, initialize, new_session

KERNEL_BACKEND_UNAVAILABLE = -32011


def _path_without_bwrap() -> str:
    """A PATH with this interpreter's directory and nothing else (so no `bwrap` is found)."""
    bin_dir = Path(sys.executable).parent
    assert not (bin_dir / "bwrap").exists()
    return str(bin_dir)


def _config(root: Path, tier: str) -> Path:
    config = root / "config.toml"
    config.write_text(f'kernel = "sandbox"\nsandbox_tier = "{tier}"\n')
    return config


@pytest.fixture(scope="module")
def unconfined_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AcpClient, Path]]:
    """One server per module (its tests only open sessions): sandbox backend with no tier in force."""
    root = tmp_path_factory.mktemp("no-bwrap")
    home = root / "home"
    home.mkdir()
    env = server_env(home, None, CONTINUAL_ACP_CONFIG=str(_config(root, "none")))
    client = AcpClient(env, cwd=str(root))
    initialize(client)
    yield client, root
    client.close()
    assert not client.garbage and not client.violations, (client.garbage, client.violations)


def _kernel_meta(result: dict[str, Any]) -> dict[str, Any]:
    kernel = result["_meta"]["continual-acp"]["kernel"]
    assert isinstance(kernel, dict)
    return kernel


def test_session_new_meta_says_the_sandbox_is_not_in_force_and_cells_need_approval(
    unconfined_server: tuple[AcpClient, Path],
) -> None:
    client, root = unconfined_server
    _, result = new_session(client, root)
    kernel = _kernel_meta(result)
    assert (kernel["backend"], kernel["confined"], kernel["approvalRequired"]) == ("sandbox", False, True)
    assert "sandbox_tier = 'none' was configured" in " ".join(kernel["notes"])


def test_session_resume_meta_carries_the_kernel_guarantees(unconfined_server: tuple[AcpClient, Path]) -> None:
    client, root = unconfined_server
    sid, _ = new_session(client, root)
    result = client.request("session/resume", {"sessionId": sid, "cwd": str(root), "mcpServers": []})
    assert _kernel_meta(result)["backend"] == "sandbox"


def test_session_new_with_a_required_bubblewrap_that_is_missing_is_a_backend_error(
    spawn: ClientFactory, tmp_path: Path
) -> None:
    client = spawn(CONTINUAL_ACP_CONFIG=str(_config(tmp_path, "bubblewrap")), PATH=_path_without_bwrap())
    initialize(client)
    with pytest.raises(RpcError) as caught:
        new_session(client, tmp_path)
    error = caught.value
    assert (error.code, error.data) == (KERNEL_BACKEND_UNAVAILABLE, {"backend": "sandbox"})
    assert "bubblewrap is not installed" in error.message and "sandbox_tier = 'auto'" in error.message
