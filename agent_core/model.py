"""The model client: Chat Completions over `openai.AsyncOpenAI`, streamed into typed events.

One tool, `ipython(code, title?)`. Text deltas, reasoning deltas (`reasoning_content` / `reasoning`,
which compatible servers send as extra fields) and tool-call deltas (accumulated by index) become
small records; the stream ends with a `ModelDone` carrying the finish reason, the complete tool calls
and the usage. Transient failures (429, 5xx, connection errors) are retried with backoff by the
openai client itself (`max_retries`); what still fails becomes a `ModelError` that names the endpoint
and what to check.

The planner and reviewer (refinement) reuse `ModelClient.complete`, so they share the endpoint,
credentials, retries and error messages.

Servers that cannot stream every request (llama-cpp-python's server is one: see `stream`) get the same
request again without `stream` instead of a failed answer; a `StreamFallback` event says so, and
that model is asked without streaming for the rest of the process.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import sys
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_core.aio import shielded
from agent_core.config.loader import AgentConfig
from agent_core.errors import ModelError
from agent_core.safetext import StreamJoiner, scrub, scrub_value

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

IPYTHON_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "ipython",
        "description": (
            "Run Python in the session's persistent IPython kernel (cwd = the project). Variables, imports "
            "and functions persist between calls. Use a `%%bash` cell for shell commands. Returns the "
            "cell's stdout/stderr, its displayed values and any exception."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The Python (or %%bash) cell to run."},
                "title": {
                    "type": "string",
                    "description": "A few words saying what the cell does, shown to the user.",
                },
            },
            "required": ["code"],
        },
    },
}

DEFAULT_BASE_URL = "https://api.openai.com/v1"


# ---------------------------------------------------------------- stream events


@dataclass(frozen=True)
class TextDelta:
    """A piece of answer text from the model stream."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of reasoning text from the model stream."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """A complete tool call; `arguments` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str

    def parsed(self) -> dict[str, Any]:
        """The arguments as an object; raises ValueError with a readable message if they are not one."""
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"the arguments of {self.name} are not valid JSON ({exc.msg} at {exc.pos})"
            ) from None
        if not isinstance(value, dict):
            raise ValueError(f"the arguments of {self.name} must be a JSON object")
        # A `"\\udc80"` escape in the arguments decodes to a lone surrogate: never let it through.
        return dict(scrub_value(value))


@dataclass(frozen=True)
class Usage:
    """Token counts of one model request."""

    input_tokens: int = 0  # prompt tokens not served from cache
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens


@dataclass(frozen=True)
class ModelDone:
    """The end of one model request: why it stopped, its text, reasoning, tool calls, usage."""

    finish_reason: str  # "stop" | "tool_calls" | "length" | "content_filter" | ...
    text: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None


@dataclass(frozen=True)
class StreamFallback:
    """The answer that follows was not streamed. `reason` says why (the stream failed, or this model's
    streams failed before); `restart`: deltas of a failed stream were already yielded, and the whole
    answer that follows replaces them."""

    reason: str
    restart: bool = False


ModelEvent = TextDelta | ReasoningDelta | StreamFallback | ModelDone


class _StreamFailed(Exception):
    """The stream started but did not deliver a whole answer (cut, empty, or an error inside it)."""

    def __init__(self, message: str, *, reason: str, partial: bool) -> None:
        super().__init__(message)
        self.message = message  # the error, should the unstreamed request fail too
        self.reason = reason  # a few words for the user's notice
        self.partial = partial


def parse_usage(raw: Any) -> Usage | None:
    """Read usage from the shapes compatible servers use (OpenAI, vLLM, OpenRouter/Anthropic-style)."""
    if raw is None:
        return None
    data: Mapping[str, Any] = raw.model_dump() if hasattr(raw, "model_dump") else dict(raw)
    prompt = int(data.get("prompt_tokens") or 0)
    output = int(data.get("completion_tokens") or 0)
    details = data.get("prompt_tokens_details") or {}
    cache_read = int(details.get("cached_tokens") or data.get("cache_read_input_tokens") or 0)
    cache_write = int(
        details.get("cache_write_tokens")
        or details.get("cache_creation_tokens")
        or data.get("cache_creation_input_tokens")
        or 0
    )
    return Usage(
        input_tokens=max(0, prompt - cache_read),
        output_tokens=output,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


@dataclass
class _CallSlot:
    """A tool call being assembled from stream deltas."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- the client


class ModelClient:
    """One per agent; safe to share between sessions (the openai client pools connections)."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self._client: openai.AsyncOpenAI | None = None
        # Models whose streams failed in this process: asked without streaming from then on.
        self._unstreamed: set[str] = set()
        # Models whose endpoint refused an assistant message with `content: null` beside its tool calls.
        self._needs_text_content: set[str] = set()
        # Per model, the structured-output forms its endpoint refused (`response_format`).
        self._refused_formats: dict[str, set[str]] = {}

    @property
    def endpoint(self) -> str:
        return self.config.base_url or DEFAULT_BASE_URL

    def _origin(self, key: str) -> str:
        """Where the setting behind an error was set (an environment variable, a config file line)."""
        if key == "base_url" and not self.config.base_url:
            return f"the default, {DEFAULT_BASE_URL}: set `base_url` in config.toml (`continual-acp setup`) or OPENAI_BASE_URL"
        return self.config.origin(key)

    async def _openai(self) -> openai.AsyncOpenAI:
        if self._client is None:
            # Deferred (`initialize` must be fast) and in a worker thread: importing openai takes
            # 0.3-1 s of CPU (its typed models, and aiohttp building an SSL context at import), which
            # on the event loop stalled every session and the reading of stdin for that long
            # (benchmarks/bench_suite_stalls.py found it as the suite's commonest stall).
            openai = await asyncio.to_thread(importlib.import_module, "openai")
            if self._client is not None:  # another request made it while this one waited
                return self._client
            self._client = openai.AsyncOpenAI(
                base_url=self.endpoint,
                # Local servers (Ollama, llama.cpp) need no key, but the client insists on one.
                api_key=self.config.api_key or "not-needed",
                max_retries=self.config.max_retries,
                timeout=openai.Timeout(self.config.request_timeout, connect=self.config.connect_timeout),
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def _model(self, model: str | None) -> str:
        chosen = model or self.config.model
        if not chosen:
            raise ModelError("no model configured: set CONTINUAL_ACP_MODEL", endpoint=self.endpoint)
        return chosen

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = (IPYTHON_TOOL,),
        max_tokens: int | None = None,
        schema: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[ModelEvent]:
        """Stream one completion. The last event is always `ModelDone`; errors raise `ModelError`.

        A stream that starts but does not deliver a whole answer (cut off, empty, no finish reason)
        is not the end: llama-cpp-python's server, for one, answers `200` and then sends nothing when
        the request fails after the stream began (a prompt over its context, `tool_choice: auto` when
        the model picks a tool), and it ends a running stream early whenever another request arrives.
        The same request is then sent once without `stream`: a whole answer (a `StreamFallback` comes
        first), or a plain HTTP error whose message says what the server could not do.

        `schema` (a JSON Schema) asks for the answer as structured output (`response_format`), in
        the first form the endpoint takes: OpenAI's `json_schema`, then `json_object` with a
        `schema` (llama-cpp-python's server), then none (`_post` steps down on a refusal).
        """
        chosen = self._model(model)
        kwargs = self._request(messages, chosen, tools, max_tokens)
        if schema is not None:
            self._ask_structured(kwargs, chosen, schema)
        if chosen in self._unstreamed:
            events = await self._unstreamed_answer(kwargs, chosen)
            yield StreamFallback("its streams failed earlier in this server process")
            for event in events:
                yield event
            return
        try:
            async for event in self._streamed(kwargs, chosen):
                yield event
        except _StreamFailed as failed:
            try:
                events = await self._unstreamed_answer(kwargs, chosen)
            except ModelError as exc:
                raise ModelError(
                    f"{failed.message}. Sent again without streaming, the request failed too: {exc}",
                    endpoint=self.endpoint,
                    status=exc.status,
                ) from exc
            self._unstreamed.add(chosen)
            log.warning(
                "%s; answered without streaming, and this model is no longer streamed", failed.message
            )
            yield StreamFallback(failed.reason, restart=failed.partial)
            for event in events:
                yield event

    def _request(
        self,
        messages: Sequence[Mapping[str, Any]],
        chosen: str,
        tools: Sequence[Mapping[str, Any]] | None,
        max_tokens: int | None,
    ) -> dict[str, Any]:
        """The request body (streamed; `_unstreamed_answer` drops the streaming fields)."""
        kwargs: dict[str, Any] = {
            "model": chosen,
            # The context holds untrusted text (the user's prompt, kernel output, files): a lone
            # surrogate in it would make the request body unencodable.
            "messages": scrub_value(list(messages)),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if max_tokens is None and self.config.send_max_tokens:
            max_tokens = self.config.max_output_tokens
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if tools:
            kwargs["tools"] = list(tools)
        if chosen in self._needs_text_content:
            kwargs["messages"] = _text_content(kwargs["messages"])
        return kwargs

    async def _streamed(self, kwargs: dict[str, Any], chosen: str) -> AsyncIterator[ModelEvent]:
        """The streamed answer; raises `_StreamFailed` when the stream starts but breaks."""
        stream: Any = None
        started = False  # whether the response began: a failure after that is a broken stream
        text: list[str] = []
        thought: list[str] = []
        slots: dict[int, _CallSlot] = {}
        finish = ""
        usage: Usage | None = None
        # Deltas are untrusted text: an emoji split across two chunks arrives as two lone
        # surrogates, and a lone one would break every later transcript write (see safetext).
        text_joiner, thought_joiner = StreamJoiner(), StreamJoiner()
        try:
            stream = await self._post(kwargs, chosen, stream=True)
            # The response began (status and headers came): whatever fails from here on is a broken
            # stream, even before its first chunk (llama.cpp closes an empty one mid-response).
            started = True
            async for chunk in stream:
                if getattr(chunk, "usage", None) is not None:
                    usage = parse_usage(chunk.usage)
                for choice in chunk.choices or ():
                    delta = choice.delta
                    if delta is not None:
                        extra = delta.model_extra or {}
                        piece = extra.get("reasoning_content") or extra.get("reasoning")
                        if isinstance(piece, str) and piece:
                            piece = thought_joiner.feed(piece)
                            if piece:
                                thought.append(piece)
                                yield ReasoningDelta(piece)
                        if delta.content:
                            content = text_joiner.feed(delta.content)
                            if content:
                                text.append(content)
                                yield TextDelta(content)
                        for call in delta.tool_calls or ():
                            slot = slots.setdefault(call.index, _CallSlot())
                            if call.id:
                                slot.id = call.id
                            if call.function is not None:
                                if call.function.name:
                                    slot.name = call.function.name
                                if call.function.arguments:
                                    slot.arguments.append(call.function.arguments)
                    if choice.finish_reason:
                        finish = choice.finish_reason
        except ModelError:
            raise
        except Exception as exc:
            if _is_openai_error(exc) and not started:
                raise self._explain(exc, chosen) from exc
            # A transport error while reading the stream (the openai client only wraps errors that
            # happen before the response starts): the answer is incomplete.
            raise _StreamFailed(
                f"the response stream from model endpoint {self.endpoint} broke off ({type(exc).__name__}: {exc}); "
                "nothing partial was kept - check the model server's logs and retry",
                reason=f"its stream broke off: {type(exc).__name__}",
                partial=bool(text or thought or slots),
            ) from exc
        finally:
            if stream is not None:
                # Closing the HTTP response is what stops a cancelled generation on the server side;
                # shield it so a cancelled turn still closes its stream, but never wait long.
                await shielded(stream.close(), 0.5)
        for joiner, parts, kind in (
            (thought_joiner, thought, ReasoningDelta),
            (text_joiner, text, TextDelta),
        ):
            rest = joiner.flush()
            if rest:
                parts.append(rest)
                yield kind(rest)
        # Some servers (older Ollama, llama.cpp) send no call id; the context still needs unique ones.
        calls = tuple(
            ToolCall(
                id=slot.id or f"call_{uuid.uuid4().hex[:16]}",
                name=slot.name or "ipython",
                arguments=scrub("".join(slot.arguments)),
            )
            for _, slot in sorted(slots.items())
        )
        if not finish:
            # The stream ended (even cleanly, with [DONE]) without the model saying it was done:
            # the answer is cut, and passing it off as a normal end_turn would hide that.
            shown = "; the partial answer above is kept" if text or calls else ""
            raise _StreamFailed(
                f"the response stream from model endpoint {self.endpoint} ended before the model "
                f"finished (no finish reason was sent){shown}; the answer is incomplete - retry, "
                "and check the model server's logs if it keeps happening",
                reason="its stream ended without a finish reason",
                partial=bool(text or thought or calls),
            )
        yield ModelDone(finish, "".join(text), "".join(thought), calls, usage)

    async def _unstreamed_answer(self, kwargs: dict[str, Any], chosen: str) -> list[ModelEvent]:
        """The same request without `stream`, as the events a stream would have given."""
        body = {k: v for k, v in kwargs.items() if k not in ("stream", "stream_options")}
        try:
            reply = await self._post(body, chosen, stream=False)
        except ModelError:
            raise
        except Exception as exc:
            if _is_openai_error(exc):
                raise self._explain(exc, chosen) from exc
            raise ModelError(
                f"model endpoint {self.endpoint} failed: {type(exc).__name__}: {exc}", endpoint=self.endpoint
            ) from exc
        return _answer_events(reply, self.endpoint)

    def _ask_structured(self, body: dict[str, Any], chosen: str, schema: Mapping[str, Any]) -> None:
        """Put the first structured-output form the endpoint has not refused into `body`."""
        refused = self._refused_formats.get(chosen, set())
        body.pop("response_format", None)
        if "json_schema" not in refused:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": dict(schema), "strict": False},
            }
        elif "json_object" not in refused:
            body["response_format"] = {"type": "json_object", "schema": dict(schema)}
        body[_SCHEMA_KEY] = dict(schema)  # kept for a step down; `_post` never sends it

    async def _post(self, body: dict[str, Any], chosen: str, *, stream: bool) -> Any:
        """POST the request, adapting it once to each refusal an endpoint is known to give.

        An endpoint that refuses `content: null` beside tool calls gets `""`: llama-cpp-python's
        server validates an assistant message's `content` as a string and answers HTTP 500 for the
        `null` the Chat Completions format allows beside `tool_calls`. An endpoint that refuses the
        structured-output form asked for gets the next one (`_ask_structured`), and in the end the
        plain request; each refusal is remembered for the model, so it is paid once per process.
        """
        post = self._post_stream if stream else self._post_whole
        while True:
            sent = {k: v for k, v in body.items() if k != _SCHEMA_KEY}
            try:
                return await post(sent)
            except Exception as exc:
                if not _is_openai_error(exc):
                    raise
                if _refuses_null_content(exc, sent):
                    self._needs_text_content.add(chosen)
                    body["messages"] = _text_content(body["messages"])
                    log.warning(
                        "model endpoint %s refused an assistant message without text beside its tool "
                        "calls; sending empty text instead",
                        self.endpoint,
                    )
                    continue
                form = _refused_format(exc, sent)
                schema = body.get(_SCHEMA_KEY)
                if form is None or schema is None:
                    raise
                self._refused_formats.setdefault(chosen, set()).add(form)
                self._ask_structured(body, chosen, schema)
                now = body.get("response_format")
                log.warning(
                    "model endpoint %s refused structured output as %r (%s); asking %s from now on for model %s",
                    self.endpoint,
                    form,
                    _error_detail(exc)[:200],
                    f"as {now['type']!r}" if now else "without it",
                    chosen,
                )

    async def _post_whole(self, body: dict[str, Any]) -> Any:
        client = await self._openai()  # first: it imports openai off the event loop
        from openai.types.chat import ChatCompletion

        return await client.post("/chat/completions", cast_to=ChatCompletion, body=body)

    async def _post_stream(self, body: dict[str, Any]) -> Any:
        """POST /chat/completions with `stream=True` through the openai client's own request path.

        `chat.completions.create` first walks the whole request through the SDK's typed-params
        transform, which measured ~11 ms per request for a 40-message context on this machine (and
        grows with the context) - more than the whole per-turn budget. Our messages are already
        plain JSON, so they go straight to `post`; retries, errors and SSE decoding are the same.
        """
        client = await self._openai()  # first: it imports openai off the event loop
        from openai import AsyncStream
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        return await client.post(
            "/chat/completions",
            cast_to=ChatCompletion,
            body=body,
            stream=True,
            stream_cls=AsyncStream[ChatCompletionChunk],
        )

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str | None = None,
        max_tokens: int | None = None,
        schema: Mapping[str, Any] | None = None,
    ) -> ModelDone:
        """A tool-less completion collected whole (compaction summaries, refinement planning);
        `schema` asks for the answer as structured output where the endpoint takes it."""
        done: ModelDone | None = None
        async for event in self.stream(
            messages, model=model, tools=None, max_tokens=max_tokens, schema=schema
        ):
            if isinstance(event, ModelDone):
                done = event
        assert done is not None
        return done

    async def list_models(self) -> list[str]:
        """Models the endpoint offers (`GET /models`); empty when it cannot say."""
        try:
            page = await (await self._openai()).models.list()
        except Exception as exc:
            log.info("listing models at %s failed: %s", self.endpoint, exc)
            return []
        return [m.id for m in page.data]

    def _explain(self, exc: Exception, model: str) -> ModelError:
        import openai

        where = self.endpoint
        retried = f" (after {self.config.max_retries} retries)" if self.config.max_retries else ""
        status = getattr(exc, "status_code", None)
        detail = _error_detail(exc)
        url, key, model_at = (self._origin(k) for k in ("base_url", "api_key", "model"))
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


def _text_content(messages: Sequence[Any]) -> list[Any]:
    """The messages with `""` for an assistant message's `content: null` beside its tool calls."""
    return [
        {**m, "content": ""}
        if isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None
        else m
        for m in messages
    ]


# The key under which a request body keeps its schema between `_request` and `_post` (not sent).
_SCHEMA_KEY = "_continual_acp_schema"


def _refused_format(exc: Exception, body: Mapping[str, Any]) -> str | None:
    """The structured-output form a refusal (400/422/500) names, if the request asked for one.

    A 400 for the context length or the credentials says nothing about `response_format` and is
    not taken for a refusal of it; llama-cpp-python answers an unknown form with HTTP 500 and a
    validation message naming `response_format`.
    """
    asked = body.get("response_format")
    if not isinstance(asked, dict) or getattr(exc, "status_code", None) not in (400, 422, 500):
        return None
    text = _error_detail(exc).lower()
    if not any(word in text for word in ("response_format", "json_schema", "json_object", "grammar")):
        return None
    return str(asked.get("type"))


def _refuses_null_content(exc: Exception, body: Mapping[str, Any]) -> bool:
    """A refusal (400/422/500) naming `content`, of a request holding an assistant `content: null`."""
    status = getattr(exc, "status_code", None)
    if status not in (400, 422, 500):
        return False
    text = _error_detail(exc).lower()
    if "content" not in text or not any(word in text for word in ("string", "none", "null")):
        return False
    return any(
        isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None
        for m in body.get("messages") or ()
    )


def _answer_events(reply: Any, endpoint: str) -> list[ModelEvent]:
    """A whole (non-streamed) `chat.completion` as stream events, ending with `ModelDone`."""
    choices = getattr(reply, "choices", None) or []
    if not choices:
        raise ModelError(f"model endpoint {endpoint} answered with no choices", endpoint=endpoint)
    choice = choices[0]
    message = choice.message
    extra = message.model_extra or {}
    thought = scrub(str(extra.get("reasoning_content") or extra.get("reasoning") or ""))
    text = scrub(message.content or "")
    calls = tuple(
        ToolCall(
            id=call.id or f"call_{uuid.uuid4().hex[:16]}",
            name=call.function.name or "ipython",
            arguments=scrub(call.function.arguments or ""),
        )
        for call in message.tool_calls or ()
        if getattr(call, "function", None) is not None
    )
    finish = choice.finish_reason or ("tool_calls" if calls else "stop")
    events: list[ModelEvent] = []
    if thought:
        events.append(ReasoningDelta(thought))
    if text:
        events.append(TextDelta(text))
    events.append(ModelDone(finish, text, thought, calls, parse_usage(getattr(reply, "usage", None))))
    return events


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


def _is_openai_error(exc: BaseException) -> bool:
    # Not imported yet: nothing can have raised one (and importing it here would be on the loop).
    openai = sys.modules.get("openai")
    return openai is not None and isinstance(exc, openai.OpenAIError)


def _joined(message: str, cause: str) -> str:
    """`message: cause`, without the doubled stop openai's own "Connection error." leaves."""
    return f"{message.rstrip('.')}: {cause}"


def _error_detail(exc: Exception) -> str:
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
        message = _joined(message, str(cause))
    return message
