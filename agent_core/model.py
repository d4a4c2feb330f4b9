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
import logging
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_core.aio import shielded
from agent_core.config.loader import AgentConfig
from agent_core.errors import ModelError
from agent_core.model_errors import (
    error_detail,
    explain,
    is_openai_error,
    refused_format,
    refuses_null_content,
)
from agent_core.model_events import (
    ModelDone,
    ModelEvent,
    ReasoningDelta,
    StreamFallback,
    TextDelta,
    ToolCall,
    Usage,
    answer_events,
    parse_usage,
)
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


class _StreamFailed(Exception):
    """The stream started but did not deliver a whole answer (cut, empty, or an error inside it)."""

    def __init__(self, message: str, *, reason: str, partial: bool) -> None:
        super().__init__(message)
        self.message = message  # the error, should the unstreamed request fail too
        self.reason = reason  # a few words for the user's notice
        self.partial = partial


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
            if is_openai_error(exc) and not started:
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
            if is_openai_error(exc):
                raise self._explain(exc, chosen) from exc
            raise ModelError(
                f"model endpoint {self.endpoint} failed: {type(exc).__name__}: {exc}", endpoint=self.endpoint
            ) from exc
        return answer_events(reply, self.endpoint)

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
                if not is_openai_error(exc):
                    raise
                if refuses_null_content(exc, sent):
                    self._needs_text_content.add(chosen)
                    body["messages"] = _text_content(body["messages"])
                    log.warning(
                        "model endpoint %s refused an assistant message without text beside its tool "
                        "calls; sending empty text instead",
                        self.endpoint,
                    )
                    continue
                form = refused_format(exc, sent)
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
                    error_detail(exc)[:200],
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

    def _explain(self, exc: Exception, model: str) -> ModelError:
        return explain(
            exc, model, endpoint=self.endpoint, max_retries=self.config.max_retries, origin=self._origin
        )

    async def list_models(self) -> list[str]:
        """Models the endpoint offers (`GET /models`); empty when it cannot say."""
        try:
            page = await (await self._openai()).models.list()
        except Exception as exc:
            log.info("listing models at %s failed: %s", self.endpoint, exc)
            return []
        return [m.id for m in page.data]


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
