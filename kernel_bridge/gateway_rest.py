"""REST side of a Jupyter Kernel Gateway / Enterprise Gateway: start, interrupt, restart, delete.

A thin layer over `aiohttp` (the same library carries the websocket channels, so the gateway needs
one networking dependency; `httpx` is not a given: the installed openai client depends on `httpx2`).
Every request carries the token (`Authorization: token ...`), TLS is
verified unless the user turned it off or named a CA bundle, and every failure becomes a
`KernelStartError` (or `GatewayError`) that names the gateway and says what to change.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from kernel_bridge.errors import KernelStartError

log = logging.getLogger(__name__)

URL_VAR = "CONTINUAL_ACP_GATEWAY_URL"
TOKEN_VAR = "CONTINUAL_ACP_GATEWAY_TOKEN"


class GatewayError(KernelStartError):
    """The gateway refused or failed a request; the message names the gateway and the fix."""


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    """Where the gateway is and how to talk to it."""

    url: str
    token: str | None = field(default=None, repr=False)
    # True (system CA store), False (no verification: self-signed test gateways), or a CA bundle path.
    verify: bool | str = True
    kernel_name: str | None = None  # the gateway's default kernelspec when None
    request_timeout: float = 60.0
    # Names of this server's environment variables sent to the kernel at start. Jupyter Kernel
    # Gateway passes only `KERNEL_*` variables and those it lists in `--KernelGatewayApp.allowed_envs`
    # (Enterprise Gateway: `--EnterpriseGatewayApp.client_envs`); others are dropped by the gateway.
    forward_env: tuple[str, ...] = ()

    @property
    def base(self) -> str:
        return self.url.rstrip("/")

    def headers(self) -> dict[str, str]:
        """Request headers: the token, when one is configured."""
        return {"Authorization": f"token {self.token}"} if self.token else {}

    def ws_url(self, kernel_id: str, session_id: str) -> str:
        """The websocket address of a kernel's channels."""
        base = self.base
        if base.startswith("https://"):
            base = "wss://" + base[len("https://") :]
        elif base.startswith("http://"):
            base = "ws://" + base[len("http://") :]
        return f"{base}/api/kernels/{kernel_id}/channels?session_id={session_id}"


def ssl_option(verify: bool | str) -> ssl.SSLContext | bool:
    """aiohttp's `ssl=` value for a `verify` setting (True, False, or a CA bundle path)."""
    if verify is True:
        return True
    if verify is False:
        return False
    return ssl.create_default_context(cafile=str(verify))


class GatewayRest:
    """The gateway's kernel REST API for one server (one connection pool)."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self._session: aiohttp.ClientSession | None = None

    def http(self) -> aiohttp.ClientSession:
        """The shared aiohttp session (token header set), made on first use in the running loop."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                base_url=self.settings.base + "/",
                headers=self.settings.headers(),
                timeout=aiohttp.ClientTimeout(total=self.settings.request_timeout),
                connector=aiohttp.TCPConnector(ssl=ssl_option(self.settings.verify)),
            )
        return self._session

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        where = f"the kernel gateway at {self.settings.base}"
        try:
            async with self.http().request(method, path.lstrip("/"), json=body) as response:
                status = response.status
                text = await response.text()
        except aiohttp.ClientConnectorCertificateError as exc:
            raise GatewayError(
                f"{where}: TLS certificate not trusted ({exc}); set `gateway_ca_bundle` to the gateway's "
                "CA bundle, or `gateway_tls_verify = false` for a test gateway"
            ) from exc
        except (aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError) as exc:
            raise GatewayError(
                f"{where} is not reachable ({exc}); start the gateway or fix {URL_VAR} (config `gateway_url`)"
            ) from exc
        except TimeoutError as exc:
            raise GatewayError(
                f"{where} did not answer {method} {path} within {self.settings.request_timeout:g} s"
            ) from exc
        except aiohttp.ClientError as exc:
            raise GatewayError(f"{where} failed {method} {path}: {exc}") from exc
        if status == 401:
            given = "no token was sent" if not self.settings.token else "the token was refused"
            raise GatewayError(
                f"{where} answered HTTP 401 to {method} {path}: {given}; set "
                f"{TOKEN_VAR} (config `gateway_token`) to the gateway's auth token"
            )
        if status == 403:
            raise GatewayError(
                f"{where} forbids {method} {path} (HTTP 403: {text[:200]}); the gateway's configuration "
                f"disallows it (Kernel Gateway needs e.g. --JupyterWebsocketPersonality.list_kernels=True "
                f"for listing), or the token ({TOKEN_VAR}) lacks the permission"
            )
        if not text:
            return status, None
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    async def _request(self, method: str, path: str, body: Any = None) -> Any:
        status, data = await self._call(method, path, body)
        if status >= 400:
            raise GatewayError(
                f"the kernel gateway at {self.settings.base} answered HTTP {status} to {method} {path}: "
                f"{str(data)[:500]}"
            )
        return data

    async def check(self) -> dict[str, Any]:
        """GET /api and the kernelspecs (proves the URL and the token); returns the spec listing."""
        await self._request("GET", "/api")
        specs = await self._request("GET", "/api/kernelspecs")
        return specs if isinstance(specs, dict) else {}

    async def start_kernel(self, env: dict[str, str]) -> str:
        """POST /api/kernels; returns the new kernel's id."""
        body: dict[str, Any] = {"env": env}
        if self.settings.kernel_name:
            body["name"] = self.settings.kernel_name
        reply = await self._request("POST", "/api/kernels", body)
        if not isinstance(reply, dict) or not isinstance(reply.get("id"), str):
            raise GatewayError(f"the kernel gateway at {self.settings.base} sent no kernel id: {reply!r}")
        return str(reply["id"])

    async def kernel(self, kernel_id: str) -> dict[str, Any] | None:
        """The kernel's model (execution_state...), or None when the gateway no longer has it."""
        status, data = await self._call("GET", f"/api/kernels/{kernel_id}")
        if status == 404:
            return None
        if status >= 400:
            raise GatewayError(f"the kernel gateway at {self.settings.base} answered HTTP {status}")
        return data if isinstance(data, dict) else None

    async def list_kernels(self) -> list[dict[str, Any]]:
        """GET /api/kernels."""
        reply = await self._request("GET", "/api/kernels")
        return [k for k in reply if isinstance(k, dict)] if isinstance(reply, list) else []

    async def interrupt(self, kernel_id: str) -> None:
        """POST /api/kernels/{id}/interrupt (the gateway signals or messages the kernel)."""
        await self._request("POST", f"/api/kernels/{kernel_id}/interrupt")

    async def restart(self, kernel_id: str) -> None:
        """POST /api/kernels/{id}/restart."""
        await self._request("POST", f"/api/kernels/{kernel_id}/restart")

    async def delete(self, kernel_id: str, timeout: float | None = None) -> bool:
        """DELETE /api/kernels/{id}; False when the gateway did not have it (404)."""
        call = self._call("DELETE", f"/api/kernels/{kernel_id}")
        status, _ = await (asyncio.wait_for(call, timeout) if timeout is not None else call)
        return status < 400
