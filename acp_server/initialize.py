"""The `initialize` answer and its hand check, from the lightest modules (frames, errors).

Kept apart from capabilities.py (the dataclass of what the client offers) so that the early answer
(early_initialize.py) imports nothing it does not need: no dataclasses, no importlib.metadata.
"""

from __future__ import annotations

from collections.abc import Sequence

from acp_server import __version__, frames
from acp_server.errors import AcpError

PROTOCOL_VERSION = 1
SERVER_NAME = "continual-acp"
SERVER_TITLE = "Continual ACP (IPython kernel agent)"
# Version of our `_meta["continual-acp"]` extension surface (bumped when the methods change shape).
EXTENSION_VERSION = 1


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


def initialize_result(
    extension_methods: Sequence[str], extension_notifications: Sequence[str]
) -> frames.Frame:
    """The `initialize` answer: this server's name and version, what works, our extension surface."""
    return frames.initialize_response(
        protocol_version=PROTOCOL_VERSION,
        name=SERVER_NAME,
        title=SERVER_TITLE,
        version=server_version(),
        extension_version=EXTENSION_VERSION,
        extension_methods=sorted(extension_methods),
        extension_notifications=extension_notifications,
    )
