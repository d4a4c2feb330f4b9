"""A failed model request, read: the `ModelError` that names the endpoint and what to check
(`explain`, with a Retry-After beyond the client's retry budget said), whether a refusal names the
structured-output form or an assistant `content: null` (`refused_format`, `refuses_null_content`),
and the error's own text (`error_detail`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from agent_core.errors import ModelError


def explain(
    exc: Exception, model: str, *, endpoint: str, max_retries: int, origin: Callable[[str], str]
) -> ModelError:
    """`exc` as a `ModelError` naming the endpoint and what to check (`origin(key)`: where a setting came from)."""
    import openai

    where = endpoint
    retried = f" (after {max_retries} retries)" if max_retries else ""
    status = getattr(exc, "status_code", None)
    detail = error_detail(exc)
    url, key, model_at = (origin(k) for k in ("base_url", "api_key", "model"))
    if isinstance(exc, openai.APITimeoutError):
        msg = f"model endpoint {where} timed out{retried}; check that the server is up and not overloaded (the URL is {url})"
    elif isinstance(exc, openai.APIConnectionError):
        msg = (
            f"model endpoint {where} could not be reached{retried} ({detail}); "
            f"check that the model server is running there (the URL is {url})"
        )
    elif isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        msg = f"model endpoint {where} rejected the credentials (HTTP {status}: {detail}); check the key ({key})"
    elif isinstance(exc, openai.NotFoundError):
        msg = (
            f"model endpoint {where} does not know model {model!r} (HTTP 404: {detail}); "
            f"check the model ({model_at}) and the URL ({url})"
        )
    elif isinstance(exc, openai.RateLimitError):
        msg = f"model endpoint {where} is rate limiting requests{retried} ({detail}); wait and retry, or check your plan's limits"
    elif status is not None and status >= 500:
        msg = f"model endpoint {where} failed with HTTP {status}{retried} ({detail}); the server had an internal error, check its logs"
    elif status is not None:
        msg = f"model endpoint {where} refused the request (HTTP {status}: {detail}); check the model ({model_at}) and the endpoint's limits"
    else:
        msg = f"model endpoint {where} failed: {detail}; check the URL ({url})"
    wait = _retry_after(exc)
    if wait is not None:
        # The openai client does not retry past a long Retry-After; that wait is beyond the
        # retry budget, so say how long the endpoint asked for instead of hiding it.
        msg += (
            f". The endpoint asked to wait {wait} (Retry-After), longer than the client waits "
            f"between retries (at most {_client_retry_after_cap():g} s): wait that long before retrying"
        )
    return ModelError(msg, endpoint=where, status=status)


def refused_format(exc: Exception, body: Mapping[str, Any]) -> str | None:
    """The structured-output form a refusal (400/422/500) names, if the request asked for one.

    A 400 for the context length or the credentials says nothing about `response_format` and is
    not taken for a refusal of it; llama-cpp-python answers an unknown form with HTTP 500 and a
    validation message naming `response_format`.
    """
    asked = body.get("response_format")
    if not isinstance(asked, dict) or getattr(exc, "status_code", None) not in (400, 422, 500):
        return None
    text = error_detail(exc).lower()
    if not any(word in text for word in ("response_format", "json_schema", "json_object", "grammar")):
        return None
    return str(asked.get("type"))


def refuses_null_content(exc: Exception, body: Mapping[str, Any]) -> bool:
    """A refusal (400/422/500) naming `content`, of a request holding an assistant `content: null`."""
    status = getattr(exc, "status_code", None)
    if status not in (400, 422, 500):
        return False
    text = error_detail(exc).lower()
    if "content" not in text or not any(word in text for word in ("string", "none", "null")):
        return False
    return any(
        isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None
        for m in body.get("messages") or ()
    )


def _client_retry_after_cap() -> float:
    """How long a Retry-After the openai client honours (it does not retry past it)."""
    try:
        from openai._constants import MAX_RETRY_AFTER_DELAY
    except ImportError:  # a private module: fall back to the value of older clients
        return 60.0
    return float(MAX_RETRY_AFTER_DELAY)


def _retry_after(exc: Exception) -> str | None:
    """A wait the error response asked for that the client's retries do not honour (longer than
    `_client_retry_after_cap`, or an HTTP date), readable; None when none or within the budget."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        value = headers.get("retry-after")
    except (AttributeError, TypeError):
        return None
    try:
        if millis:
            seconds = float(millis) / 1000
        elif value:
            seconds = float(value)
        else:
            return None
    except ValueError:
        return f"until {value}" if value else None  # an HTTP date
    return f"{seconds:g} s" if seconds > _client_retry_after_cap() else None


def is_openai_error(exc: BaseException) -> bool:
    # Not imported yet: nothing can have raised one (and importing it here would be on the loop).
    openai = sys.modules.get("openai")
    return openai is not None and isinstance(exc, openai.OpenAIError)


def joined(message: str, cause: str) -> str:
    """`message: cause`, without the doubled stop openai's own "Connection error." leaves."""
    return f"{message.rstrip('.')}: {cause}"


def error_detail(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if body.get("message"):
            return str(body["message"])
    message = str(exc) or type(exc).__name__
    cause = exc.__cause__ or exc.__context__
    if cause is not None and str(cause) and str(cause) not in message:
        message = joined(message, str(cause))
    return message
