"""Choosing the kernel backend: config.toml keys, the contract env vars, errors naming the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.config.loader import load_config
from agent_core.kernel.backend import KernelBackend, parse_backend, pool_options


def _write_config(home: Path, text: str) -> None:
    config_dir = home / ".config" / "continual-acp"
    config_dir.mkdir(parents=True)
    (config_dir / "config.toml").write_text(text)


def test_default_backend_is_local(tmp_path: Path) -> None:
    assert load_config({"HOME": str(tmp_path)}).kernel_backend == KernelBackend()


def test_gateway_from_the_contract_environment_variables(tmp_path: Path) -> None:
    config = load_config(
        {
            "HOME": str(tmp_path),
            "CONTINUAL_ACP_KERNEL": "gateway",
            "CONTINUAL_ACP_GATEWAY_URL": "https://gw.example:8888",
            "CONTINUAL_ACP_GATEWAY_TOKEN": "s3cret",
        }
    )
    backend = config.kernel_backend
    assert (backend.kind, backend.gateway_url, backend.gateway_token) == (
        "gateway",
        "https://gw.example:8888",
        "s3cret",
    )
    assert "s3cret" not in repr(backend)


def test_config_file_keys_reach_the_backend_not_extra(tmp_path: Path) -> None:
    _write_config(
        tmp_path,
        'kernel = "sandbox"\nsandbox_network = true\nkernel_host_transport = "stdin"\nimages = false\n',
    )
    config = load_config({"HOME": str(tmp_path)})
    assert config.kernel_backend.kind == "sandbox"
    assert config.kernel_backend.sandbox_network is True
    assert config.kernel_backend.host_transport == "stdin"
    assert config.extra == {"images": False}


def test_environment_backend_wins_over_the_file(tmp_path: Path) -> None:
    _write_config(tmp_path, 'kernel = "sandbox"\n')
    assert (
        load_config({"HOME": str(tmp_path), "CONTINUAL_ACP_KERNEL": "local"}).kernel_backend.kind == "local"
    )


def test_gateway_without_url_names_the_variable_to_set() -> None:
    with pytest.raises(ValueError, match="CONTINUAL_ACP_GATEWAY_URL"):
        parse_backend({"kernel": "gateway"}, {})


def test_unknown_backend_lists_the_choices() -> None:
    with pytest.raises(ValueError, match="local, sandbox, gateway, provisioner"):
        parse_backend({"kernel": "cloud"}, {})


def test_provisioner_needs_a_kernelspec_name() -> None:
    with pytest.raises(ValueError, match="kernel_name"):
        parse_backend({"kernel": "provisioner"}, {})


def test_bad_tls_setting_is_refused_with_its_name() -> None:
    with pytest.raises(ValueError, match="gateway_tls_verify"):
        parse_backend({"kernel": "gateway", "gateway_url": "http://x", "gateway_tls_verify": "maybe"}, {})


def test_gateway_backend_builds_a_gateway_launcher_with_the_ca_bundle(tmp_path: Path) -> None:
    from kernel_bridge.gateway import GatewayLauncher

    backend = parse_backend(
        {
            "kernel": "gateway",
            "gateway_url": "https://gw:8888/",
            "gateway_ca_bundle": "/etc/ca.pem",
            "kernel_name": "py",
        },
        {"CONTINUAL_ACP_GATEWAY_TOKEN": "t"},
    )
    launcher = pool_options(backend, home=tmp_path)["launcher"]
    assert isinstance(launcher, GatewayLauncher)
    assert launcher.settings.verify == "/etc/ca.pem"
    assert launcher.settings.base == "https://gw:8888"
    assert launcher.settings.kernel_name == "py"


def test_local_backend_uses_the_default_launcher(tmp_path: Path) -> None:
    assert pool_options(KernelBackend(), home=tmp_path) == {"host_transport": "auto"}
