"""The ACP wire models (`acp.schema`), imported off the startup path.

`acp.schema` costs ~0.35 s to import on this machine, more than the whole `initialize` budget, so
the server starts importing it in a background thread at spawn and `initialize` never needs it.
Every later handler awaits it (usually long since loaded) to validate its params.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any

import anyio

from acp_server.process.import_costs import without_field_docstrings
from acp_server.protocol.errors import AcpError

if TYPE_CHECKING:
    from pydantic import BaseModel

log = logging.getLogger(__name__)

_SCHEMA_MODULE = "acp.schema"
_module: ModuleType | None = None


_started = False
_import_lock = threading.Lock()


def start_background_import() -> None:
    """Begin importing the wire models in a daemon thread (returns immediately; idempotent)."""
    global _started
    if not _started:
        _started = True
        threading.Thread(target=_import_now, name="acp-schema-import", daemon=True).start()


def _import_now() -> ModuleType:
    global _module
    with _import_lock:
        if _module is None:
            started = time.monotonic()
            # The dispatcher for every method but initialize and session/new (registry.DIRECT_METHODS)
            # comes first: the next request after session/new needs it, acp.schema only validates.
            _import_dispatcher()
            with without_field_docstrings(_SCHEMA_MODULE):
                _module = importlib.import_module(_SCHEMA_MODULE)
            log.info("acp.schema imported in %.0f ms", (time.monotonic() - started) * 1000)
        return _module


_dispatcher_ready = False


def _import_dispatcher() -> None:
    global _dispatcher_ready
    importlib.import_module("jsonrpcserver.async_main")
    _dispatcher_ready = True


async def dispatcher() -> None:
    """Return once jsonrpcserver's dispatcher is imported, waiting off the event loop: importing it
    on the loop while the background thread was half way through blocked the loop on the import lock
    for the rest of that import (0.3-1.3 s under load, with jsonschema)."""
    if not _dispatcher_ready:
        await anyio.to_thread.run_sync(_import_dispatcher)


async def schema() -> ModuleType:
    """The `acp.schema` module, waiting (off the event loop) for the background import if needed."""
    if _module is not None:
        return _module
    return await anyio.to_thread.run_sync(_import_now)


def _jsonable_errors(exc: Any) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = []
    for item in exc.errors(include_url=False, include_context=False, include_input=False):
        errors.append(
            {
                "loc": [str(part) for part in item.get("loc", ())],
                "msg": item.get("msg", ""),
                "type": item.get("type", ""),
            }
        )
    return errors


async def validate(model_name: str, params: object, method: str) -> BaseModel:
    """Validate request params against an `acp.schema` model; -32602 with the errors in `data`."""
    module = await schema()
    model = getattr(module, model_name)
    if not isinstance(params, dict):
        raise AcpError.invalid_params(f"{method}: params must be an object", [])
    from pydantic import ValidationError

    try:
        validated: BaseModel = model.model_validate(params)
        return validated
    except ValidationError as exc:
        errors = _jsonable_errors(exc)
        first = errors[0] if errors else {"loc": [], "msg": "invalid"}
        where = ".".join(first["loc"]) or "params"
        raise AcpError.invalid_params(
            f"Invalid params for {method}: {where}: {first['msg']}", errors
        ) from None
