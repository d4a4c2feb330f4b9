"""The `initialize` answer and its hand check, from the lightest modules (frames, errors).

Kept apart from capabilities.py (the dataclass of what the client offers) so that the early answer
(early_initialize.py) imports nothing it does not need: no dataclasses, no importlib.metadata.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from acp_server import __version__
from acp_server.protocol import frames
from acp_server.protocol.errors import AcpError

PROTOCOL_VERSION = 1
SERVER_NAME = "continual-acp"
SERVER_TITLE = "Continual ACP (IPython kernel agent)"
# Version of our `_meta["continual-acp"]` extension surface (bumped when the methods change shape).
EXTENSION_VERSION = 1

# The one auth method: a first-run setup in a terminal (endpoint, key, model -> config.toml).
SETUP_METHOD_ID = "continual-acp-setup"
SETUP_METHOD_NAME = "Set up a model (continual-acp setup)"
SETUP_DESCRIPTION = (
    "Asks in a terminal for the model endpoint (OpenAI, OpenRouter, a local llama.cpp or Ollama "
    "server, ...), its key and the model, checks them and writes ~/.config/continual-acp/config.toml. "
    "Run `continual-acp setup` yourself, or let the editor run it; not needed when the editor passes "
    "CONTINUAL_ACP_MODEL and OPENAI_BASE_URL / OPENAI_API_KEY."
)


def server_version() -> str:
    """This server's version: `acp_server.__version__`, which pyproject.toml reads as the
    distribution's version (importlib.metadata would cost ~35 ms on the startup path)."""
    return __version__


def check_initialize_params(params: object, method: str = "initialize") -> None:
    """Hand-checked so `initialize` never waits for the wire models (see wire.py). The one rule for
    both the early answer and the method table (params.read_initialize)."""
    if not isinstance(params, dict):
        raise AcpError.from_error(frames.invalid_params_error(f"{method}: params must be an object", []))
    version = params.get("protocolVersion")
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= 65535:
        raise AcpError.from_error(
            frames.invalid_params_error(
                f"Invalid params for {method}: protocolVersion: must be an integer (ACP speaks 1)",
                [frames.param_error(["protocolVersion"], "must be an integer 0..65535", "int_type")],
            )
        )
    for key in ("clientCapabilities", "clientInfo"):
        if key in params and params[key] is not None and not isinstance(params[key], dict):
            raise AcpError.from_error(
                frames.invalid_params_error(
                    f"Invalid params for {method}: {key}: must be an object",
                    [frames.param_error([key], "must be an object", "dict_type")],
                )
            )


def _flag(container: object, *path: str) -> bool:
    """Whether `container[path[0]][path[1]]...` is `true` (anything malformed: no)."""
    for key in path:
        if not isinstance(container, dict):
            return False
        container = container.get(key)
    return container is True


def setup_command() -> list[str]:
    """How to run `continual-acp setup` with the interpreter serving now (a registry install's
    private environment has no `continual-acp` on the editor's PATH)."""
    return [sys.executable, "-m", "acp_server", "setup"]


def auth_methods(client_capabilities: object) -> list[frames.Frame]:
    """The setup method in the one shape this client takes: the `terminal` type for a client with
    `auth.terminal: true` (the schema allows it only then); else an `agent` method (completed with
    `authenticate` once setup ran), carrying the `_meta["terminal-auth"]` launch line for a client that
    asks for that older form (`clientCapabilities._meta["terminal-auth"]: true`)."""
    if _flag(client_capabilities, "auth", "terminal"):
        return [frames.terminal_auth_method(SETUP_METHOD_ID, SETUP_METHOD_NAME, SETUP_DESCRIPTION, ["setup"])]
    legacy = _flag(client_capabilities, "_meta", "terminal-auth")
    return [
        frames.agent_auth_method(
            SETUP_METHOD_ID, SETUP_METHOD_NAME, SETUP_DESCRIPTION, setup_command() if legacy else None
        )
    ]


def initialize_answer(
    extension_methods: Sequence[str],
    extension_notifications: Sequence[str],
    protocol_version: object,
    client_capabilities: object = None,
    environ: Mapping[str, str] = os.environ,
) -> frames.Frame:
    """The answer in the protocol this connection speaks: v1 (`initialize_result`), or the v2 draft
    when the switch is on and the client asked for it (acp_server/v2; nothing of it loads otherwise)."""
    from acp_server.v2.switch import speaks_v2

    v1 = initialize_result(extension_methods, extension_notifications, client_capabilities)
    if not speaks_v2(protocol_version, environ):
        return v1
    from acp_server.v2 import builders, reshape

    caps = v1["agentCapabilities"]
    assert (
        isinstance(caps, dict) and isinstance(v1["agentInfo"], dict) and isinstance(v1["authMethods"], list)
    )
    prompt = caps["promptCapabilities"]
    assert isinstance(prompt, dict)
    return builders.initialize_response(
        info=v1["agentInfo"],
        auth_methods=[reshape.auth_method(m) for m in v1["authMethods"]],
        extension_meta=caps["_meta"],
        image=prompt.get("image") is True,
        embedded_context=prompt.get("embeddedContext") is True,
    )


def initialize_result(
    extension_methods: Sequence[str],
    extension_notifications: Sequence[str],
    client_capabilities: object = None,
) -> frames.Frame:
    """The `initialize` answer: this server's name and version, what works, our extension surface,
    the setup auth method as this client can take it."""
    return frames.initialize_response(
        protocol_version=PROTOCOL_VERSION,
        name=SERVER_NAME,
        title=SERVER_TITLE,
        version=server_version(),
        extension_version=EXTENSION_VERSION,
        extension_methods=sorted(extension_methods),
        extension_notifications=extension_notifications,
        auth_methods=auth_methods(client_capabilities),
    )
