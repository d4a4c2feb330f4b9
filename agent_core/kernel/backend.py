"""Which kernel backend the agent uses, and the `KernelPool` options that build it.

Settings (config.toml keys; the environment wins where a variable exists):

* `kernel` = "local" | "sandbox" | "gateway" | "provisioner"  (env `CONTINUAL_ACP_KERNEL`)
* gateway: `gateway_url` (env `CONTINUAL_ACP_GATEWAY_URL`), `gateway_token`
  (env `CONTINUAL_ACP_GATEWAY_TOKEN`), `gateway_tls_verify` (bool, default true),
  `gateway_ca_bundle` (path), `kernel_name` (the gateway's kernelspec), `gateway_env` (names of
  variables sent with the start request), `gateway_kernel_cwd` and `gateway_snapshot_dir` (paths on
  the kernel's side when its filesystem is not this machine's), `gateway_timeout` (seconds)
* sandbox: `sandbox_network` (bool, default false), `sandbox_tier` ("auto", "bubblewrap",
  "landlock", "none")
* provisioner: `kernel_name` (a kernelspec whose kernel.json names a jupyter_client provisioner)
* any backend: `kernel_host_transport` = "auto" | "socket" | "stdin"

The names `CONTINUAL_ACP_KERNEL`, `CONTINUAL_ACP_GATEWAY_URL` and `CONTINUAL_ACP_GATEWAY_TOKEN`
are a public contract. Parsing is separate from `config/loader.py` on purpose: it owns only these keys.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BACKENDS = ("local", "sandbox", "gateway", "provisioner")
KERNEL_VAR = "CONTINUAL_ACP_KERNEL"
GATEWAY_URL_VAR = "CONTINUAL_ACP_GATEWAY_URL"
GATEWAY_TOKEN_VAR = "CONTINUAL_ACP_GATEWAY_TOKEN"
HOST_TRANSPORTS = ("auto", "socket", "stdin")
SANDBOX_TIERS = ("auto", "bubblewrap", "landlock", "none")

# config.toml keys this module owns (taken out of AgentConfig.extra).
KEYS = (
    "kernel",
    "kernel_name",
    "kernel_host_transport",
    "gateway_url",
    "gateway_token",
    "gateway_tls_verify",
    "gateway_ca_bundle",
    "gateway_env",
    "gateway_kernel_cwd",
    "gateway_snapshot_dir",
    "gateway_timeout",
    "sandbox_network",
    "sandbox_tier",
)


@dataclass(frozen=True, slots=True)
class KernelBackend:
    """The configured kernel backend and its settings."""

    kind: str = "local"
    kernel_name: str | None = None
    host_transport: str = "auto"
    gateway_url: str | None = None
    gateway_token: str | None = field(default=None, repr=False)
    gateway_tls_verify: bool = True
    gateway_ca_bundle: str | None = None
    gateway_env: tuple[str, ...] = ()
    gateway_kernel_cwd: str | None = None
    gateway_snapshot_dir: str | None = None
    gateway_timeout: float = 60.0
    sandbox_network: bool = False
    sandbox_tier: str = "auto"

    def describe(self) -> str:
        """One line naming the backend (no secrets)."""
        if self.kind == "gateway":
            return f"gateway {self.gateway_url} (kernelspec {self.kernel_name or 'the default'})"
        if self.kind == "provisioner":
            return f"provisioner kernelspec {self.kernel_name}"
        if self.kind == "sandbox":
            return f"sandbox (tier {self.sandbox_tier}, network {'on' if self.sandbox_network else 'off'})"
        return "local"


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return value.lower() in ("1", "true", "yes", "on")
    raise ValueError(f"{name} must be true or false, got {value!r}")


def _text(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {value!r}")
    return value or None


def _choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{name} {value!r} is not one of {', '.join(choices)}")
    return str(value)


def parse_backend(values: MutableMapping[str, Any], env: Mapping[str, str]) -> KernelBackend:
    """Take this module's keys out of `values` (config.toml) and merge the environment over them.

    Raises `ValueError` naming the setting and the fix when a value is wrong.
    """
    raw = {key: values.pop(key) for key in KEYS if key in values}
    if env.get(KERNEL_VAR):
        raw["kernel"] = env[KERNEL_VAR]
    if env.get(GATEWAY_URL_VAR):
        raw["gateway_url"] = env[GATEWAY_URL_VAR]
    if env.get(GATEWAY_TOKEN_VAR):
        raw["gateway_token"] = env[GATEWAY_TOKEN_VAR]
    kind = _choice("kernel", raw.get("kernel", "local"), BACKENDS)
    gateway_env = raw.get("gateway_env", ())
    if isinstance(gateway_env, str) or not all(isinstance(n, str) for n in gateway_env):
        raise ValueError(f"gateway_env must be a list of variable names, got {gateway_env!r}")
    timeout = raw.get("gateway_timeout", 60.0)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise ValueError(f"gateway_timeout must be a positive number of seconds, got {timeout!r}")
    backend = KernelBackend(
        kind=kind,
        kernel_name=_text("kernel_name", raw.get("kernel_name")),
        host_transport=_choice(
            "kernel_host_transport", raw.get("kernel_host_transport", "auto"), HOST_TRANSPORTS
        ),
        gateway_url=_text("gateway_url", raw.get("gateway_url")),
        gateway_token=_text("gateway_token", raw.get("gateway_token")),
        gateway_tls_verify=_bool("gateway_tls_verify", raw.get("gateway_tls_verify", True)),
        gateway_ca_bundle=_text("gateway_ca_bundle", raw.get("gateway_ca_bundle")),
        gateway_env=tuple(gateway_env),
        gateway_kernel_cwd=_text("gateway_kernel_cwd", raw.get("gateway_kernel_cwd")),
        gateway_snapshot_dir=_text("gateway_snapshot_dir", raw.get("gateway_snapshot_dir")),
        gateway_timeout=float(timeout),
        sandbox_network=_bool("sandbox_network", raw.get("sandbox_network", False)),
        sandbox_tier=_choice("sandbox_tier", raw.get("sandbox_tier", "auto"), SANDBOX_TIERS),
    )
    if kind == "gateway":
        url = backend.gateway_url
        if not url:
            raise ValueError(
                f"kernel = 'gateway' needs the gateway's address: set {GATEWAY_URL_VAR} "
                "(or `gateway_url` in config.toml), e.g. http://gateway.example:8888"
            )
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"gateway_url must start with http:// or https://, got {url!r}")
    if kind == "provisioner" and not backend.kernel_name:
        raise ValueError(
            "kernel = 'provisioner' needs `kernel_name`: the kernelspec whose kernel.json names the "
            "provisioner (see `jupyter kernelspec list`)"
        )
    return backend


def pool_options(backend: KernelBackend, *, home: Path, protected: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Keyword arguments for `KernelPool(...)`: the launcher for `backend` and the host transport.

    `home` is the server's data dir (the gateway and provisioner ledgers live there; the sandbox
    keeps it read-only); `protected` are further paths a sandboxed kernel must not write.
    """
    from kernel_bridge import workspace_launch

    options: dict[str, Any] = {"host_transport": backend.host_transport}
    # Gates and skill checks start through the launch seam with the kernels' confinement: none
    # unless the backend is a sandbox (set below).
    workspace_launch.use_confinement(None)
    if backend.kind == "gateway":
        from kernel_bridge.gateway import GatewayLauncher, RemotePaths
        from kernel_bridge.gateway_rest import GatewaySettings

        assert backend.gateway_url is not None
        verify: bool | str = backend.gateway_tls_verify
        if verify and backend.gateway_ca_bundle:
            verify = backend.gateway_ca_bundle
        settings = GatewaySettings(
            url=backend.gateway_url,
            token=backend.gateway_token,
            verify=verify,
            kernel_name=backend.kernel_name,
            request_timeout=backend.gateway_timeout,
            forward_env=backend.gateway_env,
        )
        paths = RemotePaths(cwd=backend.gateway_kernel_cwd, snapshot_root=backend.gateway_snapshot_dir)
        options["launcher"] = GatewayLauncher(
            settings, ledger_path=home / "kernels" / "gateway-kernels.json", paths=paths
        )
    elif backend.kind == "sandbox":
        from kernel_bridge import workspace_launch
        from kernel_bridge.sandbox import SandboxLauncher

        sandbox = SandboxLauncher(
            network=backend.sandbox_network, protected=(home, *protected), tier=backend.sandbox_tier
        )
        options["launcher"] = sandbox
        workspace_launch.use_confinement(sandbox)
    elif backend.kind == "provisioner":
        from kernel_bridge.provisioner import ProvisionerLauncher

        assert backend.kernel_name is not None
        options["launcher"] = ProvisionerLauncher(
            backend.kernel_name, ledger_path=home / "kernels" / "provisioner-kernels.json"
        )
    return options


async def probe_backend(backend: KernelBackend, *, home: Path) -> tuple[bool, str, str | None]:
    """Check the configured backend without starting a session: (ok, detail, fix).

    The gateway is asked for its kernelspecs with the token (so a wrong URL, token or kernel name
    shows here); the sandbox reports the tier in force; the provisioner names the provisioner its
    kernelspec uses. `doctor` then starts a real kernel through the same backend.
    """
    from kernel_bridge.errors import KernelStartError

    options = pool_options(backend, home=home)
    launcher: Any = options.get("launcher")
    try:
        if backend.kind == "gateway":
            detail = await launcher.check()
            await launcher.aclose()
            return True, f"{detail}; {launcher.guarantees.describe()}", None
        if backend.kind == "sandbox":
            guarantees = launcher.guarantees
            if guarantees.approval_required:
                return (
                    False,
                    guarantees.describe(),
                    "install bubblewrap (`apt-get install bubblewrap`) and allow user namespaces, "
                    "or run Linux >= 6.2 with Landlock enabled; until then every cell of a sandbox "
                    "session needs approval",
                )
            return True, guarantees.describe(), None
        if backend.kind == "provisioner":
            name = launcher.provisioner_name()
            return True, f"kernelspec {backend.kernel_name} uses the {name}", None
    except KernelStartError as exc:
        return False, str(exc), "fix the setting named above (config.toml or the environment)"
    return True, "local kernels (unconfined: the kernel can do what this user can)", None
