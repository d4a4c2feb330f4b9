"""A kernel gateway behind TLS (a throwaway self-signed certificate): verification on, off, or a CA bundle."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_support import Gateway, self_signed_cert, start_gateway, stop_gateway
from system_deps import requires

from kernel_bridge import KernelPool
from kernel_bridge.gateway import GatewayLauncher
from kernel_bridge.gateway_rest import GatewayError, GatewaySettings

pytestmark = [
    pytest.mark.anyio,
    requires(shutil.which("openssl") is not None, "openssl is needed to make a test certificate"),
]


@pytest.fixture(scope="module")
def tls_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, Path]]:
    directory = tmp_path_factory.mktemp("tls-gateway")
    cert, key = self_signed_cert(directory)
    gw = start_gateway(directory, tls=(cert, key))
    yield gw, cert
    stop_gateway(gw)


async def test_tls_gateway_with_its_ca_bundle_runs_a_cell(
    tls_gateway: tuple[Gateway, Path], tmp_path: Path
) -> None:
    gateway, cert = tls_gateway
    assert gateway.url.startswith("https://")
    pool = KernelPool(
        0, launcher=GatewayLauncher(GatewaySettings(gateway.url, gateway.token, verify=str(cert)))
    )
    try:
        s = await pool.acquire(cwd=tmp_path)
        assert (await s.execute("print('over tls')").result()).output == "over tls\n"
    finally:
        await pool.aclose()


async def test_tls_gateway_with_an_untrusted_certificate_names_the_settings(
    tls_gateway: tuple[Gateway, Path],
) -> None:
    gateway, _ = tls_gateway
    launcher = GatewayLauncher(GatewaySettings(gateway.url, gateway.token))
    with pytest.raises(GatewayError) as caught:
        await launcher.check()
    await launcher.aclose()
    assert "gateway_ca_bundle" in str(caught.value)
    assert "gateway_tls_verify" in str(caught.value)


async def test_tls_verification_off_reaches_a_self_signed_gateway(
    tls_gateway: tuple[Gateway, Path], tmp_path: Path
) -> None:
    gateway, _ = tls_gateway
    pool = KernelPool(0, launcher=GatewayLauncher(GatewaySettings(gateway.url, gateway.token, verify=False)))
    try:
        s = await pool.acquire(cwd=tmp_path)
        assert (await s.execute("print(2 + 2)").result()).output == "4\n"
    finally:
        await pool.aclose()
